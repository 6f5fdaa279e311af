"""Remote-desktop benchmark: T, X and X/T per protocol at 1 and 10 Mbit/s, 10 ms (thesis Fig. 4.6 points).

Runs real ``rd_qoe`` trials (the job type's ``run``, the code path of ``qoelab rd bench`` and of the
worker) for every protocol and rate, ``--repetitions`` times each, interleaved (repetition outermost)
so slow drifts of the host spread over all conditions. Reports per condition T, X and X/T as mean ±
95 % CI over all updates (pages × repetitions) and over the per-trial means (the thesis' method:
one mean per run, CI over runs), the run-to-run spread of T (SD and coefficient of variation of the
per-trial means), timeouts, updates where pixel and packet time disagree, and the trial overhead
(setup, teardown).

    sudo .venv/bin/python benchmarks/rd_bench/run.py                 # print the table
    sudo .venv/bin/python benchmarks/rd_bench/run.py --write-docs    # also update docs/rd-benchmark.md
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from scipy import stats

from qoelab.errors import QoelabError
from qoelab.rd.bench_cli import bench

REPO = Path(__file__).resolve().parents[2]
DOC = REPO / "docs" / "rd-benchmark.md"
BEGIN, END = "<!-- rdbench:begin -->", "<!-- rdbench:end -->"


def mean_ci(values: list[float]) -> tuple[float | None, float | None]:
    """Mean and Student-t 95 % half-width (None when it cannot be computed)."""
    vals = [v for v in values if v is not None and math.isfinite(v)]
    if not vals:
        return None, None
    m = statistics.fmean(vals)
    if len(vals) < 2:
        return m, None
    return m, float(stats.t.ppf(0.975, len(vals) - 1)) * statistics.stdev(vals) / math.sqrt(len(vals))


def fmt(pair: tuple[float | None, float | None], scale: float = 1.0, digits: int = 0) -> str:
    m, ci = pair
    if m is None:
        return "—"
    text = f"{m * scale:.{digits}f}"
    return text + (f" ± {ci * scale:.{digits}f}" if ci is not None else "")


def condition_row(protocol: str, rate: str, trials: list[dict[str, Any]]) -> dict[str, Any]:
    ok = [t for t in trials if "error" not in t]
    updates = [u for t in ok for u in t["updates"] if not u["timed_out"] and u["T_ms"] is not None]
    per_trial_t = [t["summary"]["T_ms"] for t in ok if "T_ms" in t["summary"]]
    spread = statistics.stdev(per_trial_t) if len(per_trial_t) > 1 else None
    return {
        "protocol": protocol,
        "rate": rate,
        "trials": len(trials),
        "failed": len(trials) - len(ok),
        "updates": len(updates),
        "timed_out": sum(int(t["summary"].get("n_timed_out", 0)) for t in ok),
        "disagree": sum(int(t["summary"].get("n_disagree", 0)) for t in ok),
        "extended": sum(bool(u.get("extended_to_pixels")) for t in ok for u in t["updates"]),
        "T_updates": mean_ci([u["T_ms"] for u in updates]),
        "T_trials": mean_ci(per_trial_t),
        "T_spread_sd": spread,
        "T_spread_cv": spread / statistics.fmean(per_trial_t) if spread is not None else None,
        "X_updates": mean_ci([u["bytes_down"] for u in updates]),
        "X_trials": mean_ci([t["summary"]["bytes_down"] for t in ok if "bytes_down" in t["summary"]]),
        "R_updates": mean_ci([u["rate_bps"] for u in updates if u["rate_bps"] is not None]),
        "pixel_updates": mean_ci([u["pixel_ms"] for u in updates if u["pixel_ms"] is not None]),
        "setup": mean_ci([t["summary"]["setup_s"] for t in ok if "setup_s" in t["summary"]]),
        "teardown": mean_ci([t["summary"]["teardown_s"] for t in ok if "teardown_s" in t["summary"]]),
        "link_tcp_down": mean_ci([t["summary"].get("link_tcp_down_bps") for t in ok]),
        "errors": [t["error"] for t in trials if "error" in t],
    }


def markdown(rows: list[dict[str, Any]], command: str, meta: dict[str, Any]) -> str:
    lines = [
        f"Command: `{command}` ({meta['date']}, kernel {meta['kernel']}, {meta['cores']} cores, "
        f"{meta['pages']} pages per trial, {meta['repetitions']} repetitions per condition, delay 10 ms, "
        f"Q = P = 0.5 s, thesis settings; wall time {meta['wall_min']:.0f} min).",
        "",
        "± is the 95 % CI (Student t). *over updates*: all updates of all repetitions pooled; "
        "*over runs*: one mean per trial, CI over the repetitions (the thesis' method). "
        "Spread = SD of the per-trial mean T (and as % of the mean).",
        "",
        "| protocol | link | T ms over updates | T ms over runs | T spread run-to-run | X KB over updates "
        "| X/T Mbit/s over updates | pixel ms | n (timed out / pixel≠packet / extended) | setup s "
        "| teardown s | link TCP down Mbit/s |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        cv = f" ({100 * r['T_spread_cv']:.0f} %)" if r["T_spread_cv"] is not None else ""
        spread = f"{r['T_spread_sd']:.0f} ms{cv}" if r["T_spread_sd"] is not None else "—"
        lines.append(
            f"| {r['protocol']} | {r['rate']} | {fmt(r['T_updates'])} | {fmt(r['T_trials'])} | {spread} "
            f"| {fmt(r['X_updates'], 1e-3, 1)} | {fmt(r['R_updates'], 1e-6, 2)} | {fmt(r['pixel_updates'])} "
            f"| {r['updates']} ({r['timed_out']} / {r['disagree']} / {r['extended']}) "
            f"| {fmt(r['setup'], 1, 1)} | {fmt(r['teardown'], 1, 1)} | {fmt(r['link_tcp_down'], 1e-6, 2)} |"
        )
    failed = [r for r in rows if r["failed"]]
    for r in failed:
        lines.append("")
        lines.append(f"{r['protocol']} {r['rate']}: {r['failed']} trial(s) failed: {'; '.join(r['errors'])}")
    return "\n".join(lines)


def write_docs(table: str) -> None:
    text = DOC.read_text()
    block = f"{BEGIN}\n{table}\n{END}"
    if BEGIN in text and END in text:
        text = text[: text.index(BEGIN)] + block + text[text.index(END) + len(END) :]
    else:
        text = text.rstrip("\n") + "\n\n" + block + "\n"
    DOC.write_text(text)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--protocols", default="vnc,spice,x2go")
    parser.add_argument("--rates", default="1mbit,10mbit")
    parser.add_argument("--repetitions", type=int, default=3)
    parser.add_argument("--pages", type=int, default=5)
    parser.add_argument("--json-out", type=Path, default=Path(__file__).with_name("last-run.json"))
    parser.add_argument("--write-docs", action="store_true", help="put the table into docs/rd-benchmark.md")
    args = parser.parse_args(argv)
    if os.geteuid() != 0:
        print("needs root (network namespaces, X servers)", file=sys.stderr)
        return 2
    protocols, rates = args.protocols.split(","), args.rates.split(",")
    results: dict[tuple[str, str], list[dict[str, Any]]] = {(p, r): [] for p in protocols for r in rates}
    started = time.monotonic()
    for rep in range(args.repetitions):
        for protocol in protocols:
            for rate in rates:
                raw = {"protocol": protocol, "rate": rate, "delay": "10ms", "pages": args.pages,
                       "seed": 1, "verify_duration": "2s"}  # fmt: skip
                workdir = Path(tempfile.mkdtemp(prefix="qoelab-rdbench-"))
                t0 = time.monotonic()
                try:
                    doc = bench(raw, workdir)
                    trial = {"updates": doc["updates"], "summary": doc["summary"], "rep": rep}
                    s = doc["summary"]
                    print(f"rep {rep} {protocol:5} {rate:6}: T {s.get('T_ms', float('nan')):7.0f} ms  "
                          f"X {s.get('bytes_down', float('nan')) / 1e3:6.1f} KB  "
                          f"timed out {int(s.get('n_timed_out', 0))}  ({time.monotonic() - t0:.0f} s)",
                          flush=True)  # fmt: skip
                except QoelabError as err:
                    trial = {"error": str(err), "rep": rep, "updates": [], "summary": {}}
                    print(f"rep {rep} {protocol} {rate}: FAILED: {err}", flush=True)
                finally:
                    shutil.rmtree(workdir, ignore_errors=True)
                results[(protocol, rate)].append(trial)
    rows = [condition_row(p, r, results[(p, r)]) for p in protocols for r in rates]
    meta = {
        "date": dt.date.today().isoformat(),
        "kernel": platform.release(),
        "cores": os.cpu_count(),
        "pages": args.pages,
        "repetitions": args.repetitions,
        "wall_min": (time.monotonic() - started) / 60,
    }
    command = "sudo .venv/bin/python benchmarks/rd_bench/run.py" + (
        " --write-docs" if args.write_docs else ""
    )
    table = markdown(rows, command, meta)
    print(table)
    args.json_out.write_text(
        json.dumps(
            {"meta": meta, "rows": rows, "trials": {f"{p} {r}": t for (p, r), t in results.items()}},
            indent=1,
            default=str,
        )  # fmt: skip
    )
    if args.write_docs:
        write_docs(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
