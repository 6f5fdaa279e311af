"""Trial throughput: where an ``rd_qoe`` trial's wall time goes, per protocol, and trials per hour.

Submits a thesis preset to a running lab (``make demo`` starts one) and waits, or reads a finished
sweep, then splits every succeeded trial's time (the ``phases`` the job type and the runner record
in its provenance) into link set-up and verification, desktop and session set-up, the clicks (with
the pauses Q and P), teardown and upload, and the rest. *Overhead* is everything but the clicks.

    .venv/bin/python benchmarks/throughput/run.py --preset ch4-fig46 --size quick --api URL --token T
    .venv/bin/python benchmarks/throughput/run.py --sweep 12 --write-docs     # an existing sweep
    .venv/bin/python benchmarks/throughput/run.py --sweep 2 --sweep 3 --sweep 4  # several, and in all

The token is a researcher's API token (``make demo`` prints it; or QOELAB_API_TOKEN).
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from qoelab import presets
from qoelab.client import ApiClient
from qoelab.sweeps import SweepSpec, submit, wait

REPO = Path(__file__).resolve().parents[2]
DOC = REPO / "docs" / "throughput.md"
BEGIN, END = "<!-- throughput:begin -->", "<!-- throughput:end -->"
# (column, phases summed into it)
COLUMNS = (
    ("link + verify", ("link_s", "verify_s")),
    ("session set-up", ("setup_s",)),
    ("clicks (with Q, P)", ("run_s",)),
    ("analysis", ("analysis_s", "record_s")),
    ("teardown", ("teardown_s", "link_teardown_s")),
    ("upload", ("upload_s",)),
)


def _median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def trial_rows(api: ApiClient, sweep_id: int) -> list[dict[str, Any]]:
    """Per succeeded trial: protocol, wall time (claim to finish) and its phases."""
    out = []
    for t in api.get_all("/api/trials/", sweep=sweep_id):
        if t["status"] != "succeeded":
            continue
        detail = api.get(f"/api/trials/{t['id']}/")
        phases = (detail.get("provenance") or {}).get("phases") or {}
        out.append({
            "protocol": t["resolved"].get("protocol") or "—",
            "wall_s": t["duration_s"],
            "phases": phases,
            "started_at": dt.datetime.fromisoformat(t["started_at"]),
            "finished_at": dt.datetime.fromisoformat(t["finished_at"]),
        })  # fmt: skip
    return out


def table(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    by_protocol: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        by_protocol.setdefault(r["protocol"], []).append(r)
    out = []
    for protocol, trials in sorted(by_protocol.items()):
        line: dict[str, Any] = {"protocol": protocol, "n": len(trials)}
        line["wall"] = _median([t["wall_s"] for t in trials])
        for column, keys in COLUMNS:
            line[column] = _median([sum(t["phases"].get(k, 0.0) for k in keys) for t in trials])
        line["overhead"] = _median([t["wall_s"] - t["phases"].get("run_s", 0.0) for t in trials])
        out.append(line)
    return out


def markdown(lines: list[dict[str, Any]], rows: list[dict[str, Any]], meta: dict[str, Any]) -> str:
    span_h = (max(r["finished_at"] for r in rows) - min(r["started_at"] for r in rows)).total_seconds() / 3600
    head = ["protocol", "trials", "wall s", *(c for c, _ in COLUMNS), "overhead s (all but clicks)"]
    ordered = sorted(rows, key=lambda r: r["started_at"])
    # Idle time between one trial's finish and the next one's claim (scheduler tick, Celery's new
    # pool process, the claim). Meaningful with one slot; negative values are overlapping slots.
    gaps = [
        (b["started_at"] - a["finished_at"]).total_seconds()
        for a, b in zip(ordered, ordered[1:], strict=False)
    ]
    gaps = [g for g in gaps if g >= 0]
    out = [
        f"**{meta['name']}**. " if meta.get("name") else "",
        f"Command: `{meta['command']}` ({meta['date']}, {os.cpu_count()} cores; sweep {meta['sweep']}: "
        f"{len(rows)} succeeded trials in {span_h * 60:.0f} min, "
        f"**{len(rows) / span_h:.0f} trials per hour** "
        f"with {meta['slots']} worker slot(s)).",
        "",
        "Medians per trial in seconds. *wall*: claim to finish as the backend saw it. Between trials "
        f"the host was idle for a median {_median(gaps) or 0:.1f} s (finish to the next claim).",
        "",
        "| " + " | ".join(head) + " |",
        "|" + "---|" * len(head),
    ]
    for line in lines:
        cells = [line["protocol"], str(line["n"]), f"{line['wall']:.1f}"]
        cells += [f"{line[c]:.1f}" for c, _ in COLUMNS] + [f"{line['overhead']:.1f}"]
        out.append("| " + " | ".join(cells) + " |")
    return "\n".join(out)


def sweep_name(api: ApiClient, sweep_id: int) -> str:
    return str(api.get(f"/api/sweeps/{sweep_id}/").get("name") or "")


def in_all(rows: list[dict[str, Any]], sweep_ids: list[int]) -> str:
    """The sweeps together: first claim to last finish, trials per hour, overhead per protocol."""
    span_h = (max(r["finished_at"] for r in rows) - min(r["started_at"] for r in rows)).total_seconds() / 3600
    overhead = {
        line["protocol"]: f"{line['overhead']:.1f} s" for line in table(rows)
    }  # fmt: skip
    busy_min = sum(r["wall_s"] for r in rows) / 60
    return (
        f"**In all** (sweeps {', '.join(map(str, sweep_ids))}): {len(rows)} succeeded trials, "
        f"**{busy_min:.0f} min** of trials (the sum of their wall times), {span_h * 60:.0f} min from the "
        f"first claim to the last finish ({len(rows) / span_h:.0f} trials per hour over that span); "
        "median overhead per trial " + ", ".join(f"{p} {v}" for p, v in overhead.items()) + "."
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    which = parser.add_mutually_exclusive_group(required=True)
    which.add_argument("--preset", help="submit this preset and wait (e.g. ch4-fig46)")
    which.add_argument("--sweep", type=int, action="append", help="read this finished sweep (repeatable)")
    parser.add_argument("--size", default="quick", choices=presets.SIZES)
    parser.add_argument("--api", default=os.environ.get("QOELAB_API_URL", "http://127.0.0.1:8000"))
    parser.add_argument("--token", default=os.environ.get("QOELAB_API_TOKEN", ""))
    parser.add_argument("--slots", type=int, default=1, help="worker slots the lab ran (for the text)")
    parser.add_argument("--write-docs", action="store_true", help=f"put the table into {DOC.name}")
    args = parser.parse_args(argv)
    api = ApiClient(args.api, args.token)
    sweep_ids = args.sweep or []
    if args.preset:
        spec = SweepSpec.model_validate(presets.get(args.preset).sweep_spec(args.size))
        sweep_id = int(submit(api, spec)["id"])
        print(f"sweep {sweep_id} submitted", flush=True)
        t0 = time.monotonic()
        wait(api, sweep_id, lambda c, _b: print(f"{c['done']}/{c['total']} done", end="\r", flush=True))
        print(f"\nfinished in {(time.monotonic() - t0) / 60:.1f} min")
        sweep_ids = [sweep_id]
    shown = ["benchmarks/throughput/run.py", *(argv if argv is not None else sys.argv[1:])]
    command = " ".join(a for a in shown if not a.startswith("--token") and a != args.token)
    parts, every = [], []
    for sweep_id in sweep_ids:
        rows = trial_rows(api, sweep_id)
        if not rows:
            print(f"sweep {sweep_id} has no succeeded trial", file=sys.stderr)
            return 1
        every += rows
        meta = {"command": command, "date": dt.date.today().isoformat(), "sweep": sweep_id,
                "slots": args.slots, "name": sweep_name(api, sweep_id)}  # fmt: skip
        parts.append(markdown(table(rows), rows, meta))
    if len(sweep_ids) > 1:
        parts.append(in_all(every, sweep_ids))
    text = "\n\n".join(parts)
    print(text)
    if args.write_docs:
        doc = DOC.read_text()
        doc = doc[: doc.index(BEGIN) + len(BEGIN)] + "\n" + text + "\n" + doc[doc.index(END) :]
        DOC.write_text(doc)
    return 0


if __name__ == "__main__":
    sys.exit(main())
