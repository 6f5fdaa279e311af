"""Paper 002's experiments on this host: E1, E2, E7 at both buffers and the E8 delay sweep.

Each run is one thinclient_tcp trial (real namespaces, the userspace router, Linux TCP); seeds
1..N are the repetitions (each seed is a different set of traffic series, as the paper's 7 runs
shifted its senders). Results go to ``benchmarks/thinclient/results/<name>.json`` one run per
entry (appended, so an interrupted benchmark resumes where it stopped), and ``--table`` prints
the Markdown tables of docs/thinclient-tcp.md from them: mean and 95 % CI per configuration
beside the paper's numbers.

    .venv/bin/python benchmarks/thinclient/paper_table.py --set main --pairs 100 --duration 60 --reps 3
    .venv/bin/python benchmarks/thinclient/paper_table.py --set e8 --pairs 100 --duration 60 --reps 2
    .venv/bin/python benchmarks/thinclient/paper_table.py --table
"""

from __future__ import annotations

import argparse
import json
import secrets
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "workers"))

from qoelab import jobs  # noqa: E402
from qoelab.hostfacts import run_facts  # noqa: E402
from qoelab.jobs.thinclient_tcp import record_params  # noqa: E402
from qoelab.params import validate_params  # noqa: E402
from qoelab.thinclient import experiments  # noqa: E402
from qoelab.thinclient.trial import run_trial  # noqa: E402

RESULTS = Path(__file__).with_name("results")
KEEP = ("r_I150", "r_I1000", "T_I150_s", "T_I1000_s", "rto_per_conn_300s", "spurious_rto_per_conn_300s",
        "utilisation", "utilisation_interactive", "router_drops", "router_drops_marked", "max_queue_bytes",
        "p50_I_ms", "p99_I_ms", "max_I_ms", "p99_B_ms", "max_B_ms", "TcpExtTCPLostRetransmit",
        "TcpExtTCPSackRecovery", "TcpExtTCPRenoRecovery", "TcpExtTCPLossProbes", "TcpRetransSegs",
        "max_rto_one_conn", "schedule_lag_p99_ms", "schedule_lag_max_ms", "writes_I", "span_s",
        "share_server_I150", "share_router_I150", "share_retransmission_I150", "share_client_I150",
        "share_propagation_I150", "share_server_I1000", "share_router_I1000", "share_retransmission_I1000",
        "share_client_I1000", "share_propagation_I1000")  # fmt: skip

# The paper's real traces had blocks of hundreds of packets; "heavy": the same mean, a power-law tail.
HEAVY = {"bulk_length": "pareto", "max_bulk": 250}
SETS: dict[str, list[tuple[str, str, dict[str, Any]]]] = {
    "main": [(e, b, {}) for e in ("e1", "e2", "e7") for b in ("large", "small")],
    "heavy": [(e, b, HEAVY) for e in ("e1", "e2", "e7") for b in ("large", "small")],
    "e8": [
        ("e8", b, {**HEAVY, "delay": f"{d}ms"}) for b in ("large", "small") for d in experiments.E8_DELAYS_MS
    ],
    # How many pairs this host replays on schedule (run with --pairs 150 and --pairs 200, --reps 1):
    # not the paper's load, so no findings read it.
    "capacity": [("e1", "large", HEAVY)],
}


def run_one(exp: str, buffer: str, extra: dict[str, Any], seed: int, pairs: int, duration: int,
            keep_records: Path | None) -> dict[str, Any]:  # fmt: skip
    job = jobs.get("thinclient_tcp")
    raw = {**experiments.preset(exp, buffer), **extra, "experiment": exp, "seed": seed, "pairs": pairs,
           "duration": f"{duration}s"}  # fmt: skip
    params = validate_params(job.params, raw)
    work = Path(tempfile.mkdtemp(prefix="qoelab-tcbench-"))
    try:
        out = run_trial(params.to_run(), "qbt" + secrets.token_hex(3), work)
        if keep_records is not None:
            keep_records.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(work / "down.rec", keep_records)
            (keep_records.with_suffix(".ports.json")).write_text(
                json.dumps({str(k): v for k, v in _ports(work).items()})
            )
    finally:
        shutil.rmtree(work, ignore_errors=True)
    s = out.summary
    return {
        "experiment": exp, "buffer": buffer, "extra": extra, "seed": seed, "pairs": pairs,
        "duration_s": duration,
        "summary": {k: s.get(k) for k in KEEP}, "tcp": out.link.get("tcp", {}).get("server"),
        "host": run_facts(),
        "emulator": out.link.get("emulator", {}).get("down"), "at": time.strftime("%Y-%m-%dT%H:%M:%S"),
    }  # fmt: skip


def _ports(work: Path) -> dict[int, int]:
    from qoelab.thinclient import replay

    return replay.ports(work / "replay")


def mean_ci(values: list[float]) -> tuple[float, float] | None:
    """Mean and Student-t 95 % half-width (NaN for one value), None for none."""
    from qoelab.stats import mean_ci as interval

    s = interval(values)
    if s.mean is None:
        return None
    return s.mean, float("nan") if s.half_width is None else s.half_width


def fmt(mc: tuple[float, float] | None, spec: str = "{:.2e}") -> str:
    if mc is None:
        return "—"
    mean, half = mc
    return spec.format(mean) + ("" if np.isnan(half) else " ± " + spec.format(half))


def table(name: str) -> str:
    """Two tables per result file: the paper's ratios beside ours, then what TCP and the router did."""
    rows = [json.loads(line) for line in (RESULTS / f"{name}.jsonl").read_text().splitlines() if line]
    groups: dict[tuple, list[dict]] = {}
    for r in rows:  # runs with another number of pairs (the capacity set) are a group of their own
        key = (r["experiment"], r["buffer"], json.dumps(r["extra"], sort_keys=True), r.get("pairs", 100))
        groups.setdefault(key, []).append(r)
    ratios = [
        "| exp. | buffer | extra | runs | r_I150 | paper | r_I1000 | paper | T_I150 (s) "
        "| interactive p99 (ms) "
        "| router share >130 ms | server share >130 ms |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    mechanics = [
        "| exp. | buffer | extra | RTO/conn/300 s | paper | spurious | lost retrans. | drops "
        "| max queue (KB) "
        "| util. | util. interactive | lag p99 (ms) | router late p99 (µs) |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for (exp, buf, extra, pairs), rs in groups.items():
        paper = experiments.EXPERIMENTS[exp].paper.get(buf, {})
        col = {k: mean_ci([r["summary"].get(k) for r in rs]) for k in KEEP}
        late = mean_ci([(r.get("emulator") or {}).get("late_p99_us") for r in rs])
        x = json.loads(extra)
        shown = {k: v for k, v in x.items() if k not in ("bulk_length", "max_bulk")}
        label = ", ".join(
            [*(f"{k} {v}" for k, v in shown.items()), *(["power-law bulk"] if x.get("bulk_length") else []),
             *([f"{pairs} pairs"] if pairs != 100 else [])]
        )  # fmt: skip
        head = f"| {exp.upper()} | {buf} | {label} |"
        ratios.append(
            f"{head} {len(rs)} | {fmt(col['r_I150'])} | {paper.get('r_I150', '—')} | {fmt(col['r_I1000'])} | "
            f"{paper.get('r_I1000', '—')} | {fmt(col['T_I150_s'], '{:.0f}')} | "
            f"{fmt(col['p99_I_ms'], '{:.0f}')} | "
            f"{fmt(col['share_router_I150'], '{:.2f}')} | {fmt(col['share_server_I150'], '{:.2f}')} |"
        )
        mechanics.append(
            f"{head} {fmt(col['rto_per_conn_300s'], '{:.2f}')} | {paper.get('rto_per_conn_300s', '—')} | "
            f"{fmt(col['spurious_rto_per_conn_300s'], '{:.2f}')} | "
            f"{fmt(col['TcpExtTCPLostRetransmit'], '{:.0f}')} | "
            f"{fmt(col['router_drops'], '{:.0f}')} | {fmt(_scaled(col['max_queue_bytes']), '{:.0f}')} | "
            f"{fmt(col['utilisation'], '{:.2f}')} | {fmt(col['utilisation_interactive'], '{:.3f}')} | "
            f"{fmt(col['schedule_lag_p99_ms'], '{:.1f}')} | {fmt(late, '{:.0f}')} |"
        )
    return "\n".join(ratios) + "\n\n" + "\n".join(mechanics)


def findings(names: list[str]) -> str:
    """The tc002 report over the saved runs of ``names`` (main and heavy, the paper's 20 ms and 100
    pairs, when empty), as the sweep page would show it for one sweep of those runs (pooled over
    seeds). ``qoelab report tc002 --from-committed`` adds E8 for the check made for it."""
    from qoelab import findings as tc_findings

    rows = []
    for path in sorted(RESULTS.glob("*.jsonl")):
        if path.stem not in (names or ("main", "heavy")):
            continue
        for line in path.read_text().splitlines():
            r = json.loads(line)
            rows.append({"params": record_params(r), "summary": r["summary"]})
    found = tc_findings.evaluate("tc002", rows)
    return tc_findings.render_markdown(found, title=tc_findings.REPORT_TITLES["tc002"], level=3)


def _scaled(mc: tuple[float, float] | None) -> tuple[float, float] | None:
    return None if mc is None else (mc[0] / 1e3, mc[1] / 1e3)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--set", choices=sorted(SETS), help="which runs")
    ap.add_argument("--pairs", type=int, default=100)
    ap.add_argument("--duration", type=int, default=60, help="seconds per run")
    ap.add_argument("--reps", type=int, default=3, help="seeds 1..N")
    ap.add_argument(
        "--records", action="store_true", help="keep the router's records of seed 1 (Fig. 9 traces)"
    )
    ap.add_argument("--table", action="store_true", help="print the tables from the saved results")
    ap.add_argument(
        "--findings",
        nargs="*",
        metavar="SET",
        help="print the tc002 findings over the saved results of these sets (main and heavy when none "
        "is named)",
    )
    args = ap.parse_args()
    if args.findings is not None:
        print(findings(args.findings))
        return 0
    if args.table:
        for name in sorted(p.stem for p in RESULTS.glob("*.jsonl")):
            print(f"### {name}\n\n{table(name)}\n")
        return 0
    if not args.set:
        ap.error("--set or --table")
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / f"{args.set}.jsonl"
    done = set()
    if path.exists():
        for line in path.read_text().splitlines():
            r = json.loads(line)
            extra = json.dumps(r["extra"], sort_keys=True)
            done.add((r["experiment"], r["buffer"], extra, r["seed"], r["pairs"], r["duration_s"]))
    for seed in range(1, args.reps + 1):  # seeds outermost: a cut-short run still covers every configuration
        for exp, buf, extra in SETS[args.set]:
            key = (exp, buf, json.dumps(extra, sort_keys=True), seed, args.pairs, args.duration)
            if key in done:
                continue
            keep = None
            if args.records and seed == 1:
                tag = "-".join([exp, buf, *(f"{k}{v}" for k, v in extra.items())])
                keep = RESULTS / "records" / f"{tag}.rec"
            started = time.time()
            row = run_one(exp, buf, extra, seed, args.pairs, args.duration, keep)
            with path.open("a") as fh:
                fh.write(json.dumps(row) + "\n")
            s = row["summary"]
            print(f"{exp} {buf} {extra or ''} seed {seed}: r_I150 {s['r_I150']:.2e} "
                  f"r_I1000 {s['r_I1000']:.2e} "
                  f"RTO/conn/300s {s['rto_per_conn_300s']:.2f} drops {s['router_drops']:.0f} "
                  f"({time.time() - started:.0f} s)", flush=True)  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
