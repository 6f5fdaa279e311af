"""Paper 002's Fig. 9 question on Linux: after bursty drops at the router, does a sender stall for
seconds? Read from the router's own per-packet records (``paper_table.py --records`` keeps them).

For every connection: its data packets in arrival order at the router, each a first transmission
or a retransmission (its range starts below the highest byte seen before), forwarded or dropped.
A **loss episode** starts at a drop when nothing was outstanding and ends when a forwarded copy has
covered the start of every range dropped since (a dropped copy of bytes that had already got
through, a spurious retransmission, needs no recovery and is not counted); its length is the
recovery time the paper's Fig. 9 shows growing to several seconds in ns-2. Also counted:
retransmissions dropped again (the paper's "lost retransmissions", which only an RTO recovers in
ns-2's FullTCP) and the longest
silence of the connection inside an episode (RTO backoff shows there). The longest episode is
drawn as a time-sequence SVG (Fig. 9's axes).

    .venv/bin/python benchmarks/thinclient/stall.py benchmarks/thinclient/results/records/e2-small.rec

``--run EXP:BUFFER[:heavy]`` runs that experiment's seed 1 (``paper_table.run_one``: 100 pairs, 60 s),
analyses its records and appends the run's summary and the analysis to ``results/stall.jsonl``, the
committed file docs/thinclient-tcp.md's stall table quotes (the records themselves are large and
git-ignored):

    sudo .venv/bin/python benchmarks/thinclient/stall.py --run e1:small:heavy --run e2:small:heavy \
        --run e7:small:heavy --run e2:small
    .venv/bin/python benchmarks/thinclient/stall.py --table    # the doc's table, from stall.jsonl
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "workers"))

from qoelab.emulation import records  # noqa: E402
from qoelab.thinclient import decompose  # noqa: E402


def connection_packets(recs: np.ndarray, port: int) -> dict[str, np.ndarray] | None:
    """One connection's data packets (``decompose.streams``), each marked dropped or not and first
    transmission or retransmission (its range starts below the highest byte seen before)."""
    c = decompose.streams(recs, {0: port}).get(0)
    if c is None:
        return None
    highest = np.maximum.accumulate(np.concatenate([[0], c["end"][:-1]]))
    return {"t": c["arrival"], "start": c["start"], "end": c["end"], "dropped": ~c["forwarded"],
            "retransmission": c["start"] < highest}  # fmt: skip


def episodes(p: dict[str, np.ndarray]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    outstanding: list[int] = []  # starts of dropped ranges not yet covered by a forwarded copy
    current: dict[str, Any] | None = None
    last_t = None
    for i in range(p["t"].size):
        t, s, e = int(p["t"][i]), int(p["start"][i]), int(p["end"][i])
        if current is not None and last_t is not None:  # a gap inside the episode: nothing sent
            current["longest_silence_ns"] = max(current["longest_silence_ns"], t - last_t)
        if p["dropped"][i]:
            earlier = ~p["dropped"][:i] & (p["start"][:i] <= s) & (s < p["end"][:i])
            if earlier.any():
                continue  # a spurious retransmission: its bytes had already got through
            if current is None:
                current = {"start_ns": t, "drops": 0, "lost_retransmissions": 0, "longest_silence_ns": 0}
            current["drops"] += 1
            current["lost_retransmissions"] += int(p["retransmission"][i])
            outstanding.append(s)
        elif current is not None:
            outstanding = [x for x in outstanding if not s <= x < e]
        last_t = t
        if current is not None and not outstanding:
            current["end_ns"] = t
            out.append(current)
            current = None
    if current is not None:
        current["end_ns"] = None  # never recovered within the records
        out.append(current)
    return out


def svg(p: dict[str, np.ndarray], t0: int, t1: int, path: Path, first_drop_ns: int) -> None:
    """A time-sequence plot: first transmissions, retransmissions and drops (Fig. 9's axes)."""
    keep = (p["t"] >= t0) & (p["t"] <= t1)
    t = (p["t"][keep] - t0) / 1e9
    seq = p["start"][keep]
    if not t.size:
        return
    w, h, m = 800, 480, 50
    lo, hi = seq.min(), max(seq.max(), seq.min() + 1)
    span = max(t.max(), 1e-3)

    def xy(ti: float, si: int) -> tuple[float, float]:
        return m + (w - 2 * m) * ti / span, h - m - (h - 2 * m) * (si - lo) / (hi - lo)

    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" '
             f'font-size="12"><rect width="{w}" height="{h}" fill="white"/>',
             f'<line x1="{m}" y1="{h - m}" x2="{w - m}" y2="{h - m}" stroke="black"/>',
             f'<line x1="{m}" y1="{m}" x2="{m}" y2="{h - m}" stroke="black"/>',
             f'<text x="{w / 2}" y="{h - 12}" text-anchor="middle">time (s), 0 .. {span:.2f}; the first '
             f"drop at {(first_drop_ns - t0) / 1e9:.2f} s</text>",
             f'<text x="14" y="{h / 2}" transform="rotate(-90 14 {h / 2})" text-anchor="middle">'
             f"stream offset (bytes) {lo} .. {hi}</text>"]  # fmt: skip
    styles = {"first": "#1f77b4", "retransmission": "#2ca02c", "dropped": "#d62728"}
    for ti, si, d, r in zip(t, seq, p["dropped"][keep], p["retransmission"][keep], strict=True):
        x, y = xy(float(ti), int(si))
        colour = styles["dropped"] if d else styles["retransmission"] if r else styles["first"]
        parts.append(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="2" fill="{colour}"/>')
    for i, (name, colour) in enumerate(styles.items()):
        parts.append(f'<circle cx="{w - 170}" cy="{m + 16 * i}" r="4" fill="{colour}"/>'
                     f'<text x="{w - 160}" y="{m + 4 + 16 * i}">{name}</text>')  # fmt: skip
    parts.append("</svg>")
    path.write_text("\n".join(parts))


def analyse(rec: Path, svg_out: Path | None) -> dict[str, Any]:
    recs = records.read(rec)
    ports = {int(k): v for k, v in json.loads(rec.with_suffix(".ports.json").read_text()).items()}
    found, worst = [], None
    for conn, port in ports.items():
        p = connection_packets(recs, port)
        if p is None:
            continue
        for ep in episodes(p):
            ep["conn"] = conn
            found.append(ep)
            length = (ep["end_ns"] or int(p["t"][-1])) - ep["start_ns"]
            if worst is None or length > worst[0]:
                worst = (length, p, ep)
    lengths = np.array([(e["end_ns"] - e["start_ns"]) / 1e6 for e in found if e["end_ns"] is not None])
    out = {
        "records": rec.name,
        "episodes": len(found),
        "unrecovered": sum(e["end_ns"] is None for e in found),
        "recovery_ms_p50": float(np.percentile(lengths, 50)) if lengths.size else None,
        "recovery_ms_p99": float(np.percentile(lengths, 99)) if lengths.size else None,
        "recovery_ms_max": float(lengths.max()) if lengths.size else None,
        "episodes_over_1s": int((lengths > 1000).sum()),
        "drops": sum(e["drops"] for e in found),
        "lost_retransmissions": sum(e["lost_retransmissions"] for e in found),
        "longest_silence_ms": max((e["longest_silence_ns"] / 1e6 for e in found), default=None),
    }
    if worst is not None and svg_out is not None:
        _, p, ep = worst
        end = ep["end_ns"] or int(p["t"][-1])
        svg(p, ep["start_ns"] - 200_000_000, end + 200_000_000, svg_out, ep["start_ns"])
        out["worst"] = {"conn": ep["conn"], "drops": ep["drops"],
                        "lost_retransmissions": ep["lost_retransmissions"],
                        "recovery_ms": (end - ep["start_ns"]) / 1e6, "svg": str(svg_out)}  # fmt: skip
    return out


def run_and_analyse(spec: str, svg_dir: Path, out: Path) -> dict[str, Any]:
    """Run ``EXP:BUFFER[:heavy]`` at seed 1, keep its records, analyse them, append one row to ``out``."""
    sys.path.insert(0, str(Path(__file__).parent))
    import paper_table  # the benchmark's own runner: same presets, pairs and duration as its tables

    exp, buffer, *more = spec.split(":")
    extra = paper_table.HEAVY if more == ["heavy"] else {}
    tag = "-".join([exp, buffer, *(["heavy"] if extra else [])])
    rec = paper_table.RESULTS / "records" / f"{tag}.rec"
    row = paper_table.run_one(exp, buffer, extra, 1, 100, 60, rec)
    row["stall"] = analyse(rec, svg_dir / f"thinclient-stall-{tag}.svg")
    with out.open("a") as fh:
        fh.write(json.dumps(row) + "\n")
    return row


# The doc's label per run: the experiment's TCP and the bulk length it replays.
RUN_LABELS = {"e1": "E1: Reno, no SACK", "e2": "E2: SACK + RACK + TLP, priority",
              "e7": "E7: E2 with separate connections"}  # fmt: skip


def table(path: Path) -> str:
    """The stall table docs/thinclient-tcp.md quotes, from the committed rows (one per run)."""
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    out = ["| run (seed 1, 100 pairs, 60 s) | loss episodes | drops | lost retransmissions "
           "| recovery p50 / p99 / max (ms) | episodes > 1 s | unrecovered |",
           "|---|---|---|---|---|---|---|"]  # fmt: skip
    for r in rows:
        st = r["stall"]
        bulk = "power-law bulk" if (r.get("extra") or {}).get("bulk_length") == "pareto" else "geometric bulk"
        label = f"{RUN_LABELS.get(r['experiment'], r['experiment'].upper())}, {r['buffer']} buffer, {bulk}"
        ms = [st.get(k) for k in ("recovery_ms_p50", "recovery_ms_p99", "recovery_ms_max")]
        rec = " / ".join("—" if v is None else f"{v:,.0f}" for v in ms)
        out.append(f"| {label} | {st['episodes']} | {st['drops']:,} | {st['lost_retransmissions']} | {rec} "
                   f"| {st['episodes_over_1s']} | {st['unrecovered']} |")  # fmt: skip
    return "\n".join(out)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("records", nargs="*", type=Path, help="router records saved by paper_table.py --records")
    ap.add_argument("--run", action="append", default=[], metavar="EXP:BUFFER[:heavy]",
                    help="run seed 1 of this experiment and analyse it (repeatable)")  # fmt: skip
    ap.add_argument("--out", type=Path, default=Path(__file__).with_name("results") / "stall.jsonl")
    ap.add_argument("--svg-dir", type=Path, default=ROOT / "docs" / "img", help="for the worst episode")
    ap.add_argument("--table", action="store_true", help="print the stall table from --out and exit")
    args = ap.parse_args()
    if args.table:
        print(table(args.out))
        return 0
    if not args.records and not args.run:
        ap.error("name records, or --run EXP:BUFFER[:heavy]")
    for rec in args.records:
        print(json.dumps(analyse(rec, args.svg_dir / f"thinclient-stall-{rec.stem}.svg")))
    for spec in args.run:
        print(json.dumps(run_and_analyse(spec, args.svg_dir, args.out)["stall"]), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
