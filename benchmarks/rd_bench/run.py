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

``--servers namespace,vm,vm-cold`` compares the server modes (issue 6): ``vm`` starts each guest from
the host's saved snapshot, ``vm-cold`` boots it (only at ``--cold-rates``, to measure the boot);
that table goes to its own block of docs/rd-benchmark.md.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from qoelab import stats
from qoelab.errors import QoelabError
from qoelab.rd.bench_cli import bench

REPO = Path(__file__).resolve().parents[2]
DOC = REPO / "docs" / "rd-benchmark.md"
BEGIN, END = "<!-- rdbench:begin -->", "<!-- rdbench:end -->"
VM_BEGIN, VM_END = "<!-- rdbench-vm:begin -->", "<!-- rdbench-vm:end -->"
SERVERS = {
    "namespace": {},
    "vm": {"server": "vm", "vm_start": "snapshot"},
    "vm-cold": {"server": "vm", "vm_start": "cold"},
}


def mean_ci(values: list[float]) -> tuple[float | None, float | None]:
    """Mean and Student-t 95 % half-width (None when it cannot be computed)."""
    s = stats.mean_ci(values)
    return s.mean, s.half_width


def fmt(pair: tuple[float | None, float | None], scale: float = 1.0, digits: int = 0) -> str:
    m, ci = pair
    if m is None:
        return "—"
    text = f"{m * scale:.{digits}f}"
    return text + (f" ± {ci * scale:.{digits}f}" if ci is not None else "")


def condition_row(
    protocol: str, rate: str, trials: list[dict[str, Any]], server: str = "namespace"
) -> dict[str, Any]:
    ok = [t for t in trials if "error" not in t]
    vms = [t["vm"] for t in ok if t.get("vm")]
    updates = [u for t in ok for u in t["updates"] if not u["timed_out"] and u["T_ms"] is not None]
    per_trial_t = [t["summary"]["T_ms"] for t in ok if "T_ms" in t["summary"]]
    spread = statistics.stdev(per_trial_t) if len(per_trial_t) > 1 else None
    return {
        "server": server,
        "protocol": protocol,
        "rate": rate,
        "vm_ready": mean_ci([v["boot_to_ready_s"] for v in vms]),
        "vm_restore": mean_ci([v["restore_s"] for v in vms if v.get("restore_s") is not None]),
        "vm_teardown": mean_ci([v["teardown_s"] for v in vms if v.get("teardown_s") is not None]),
        "vm_starts": sorted({v["start"] for v in vms}),
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
        f"Q = P = 0.5 s, thesis settings, TCP {meta['tcp_cc']} in both namespaces; "
        f"wall time {meta['wall_min']:.0f} min).",
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


def markdown_servers(rows: list[dict[str, Any]], command: str, meta: dict[str, Any]) -> str:
    lines = [
        f"Command: `{command}` ({meta['date']}, kernel {meta['kernel']}, {meta['cores']} cores, "
        f"{meta['pages']} pages per trial, {meta['repetitions']} repetition(s), delay 10 ms, "
        f"Q = {meta['quiet']}, P = 0.5 s, thesis settings, TCP {meta['tcp_cc']}; "
        f"guests under {meta['accel']}; "
        f"wall time {meta['wall_min']:.0f} min).",
        "",
        "± is the 95 % CI (Student t): *over updates* pools every update of every repetition, *over runs* "
        "takes one mean per trial (the thesis' method; — with one repetition). *guest ready*: QEMU start "
        "to the first page on "
        "the guest's screen (boot, or snapshot restore + page load); *restore*: QEMU start to the "
        "restored guest running. Setup includes the guest's start, teardown includes stopping it.",
        "",
        "| server | protocol | link | T ms over updates | T ms over runs | X KB | X/T Mbit/s | pixel ms "
        "| n (timed out / extended) | guest ready s | restore s | setup s | teardown s |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['server']} | {r['protocol']} | {r['rate']} | {fmt(r['T_updates'])} | {fmt(r['T_trials'])} "
            f"| {fmt(r['X_updates'], 1e-3, 1)} | {fmt(r['R_updates'], 1e-6, 2)} | {fmt(r['pixel_updates'])} "
            f"| {r['updates']} ({r['timed_out']} / {r['extended']}) | {fmt(r['vm_ready'], 1, 1)} "
            f"| {fmt(r['vm_restore'], 1, 2)} | {fmt(r['setup'], 1, 1)} | {fmt(r['teardown'], 1, 1)} |"
        )
    for r in rows:
        if r["failed"]:
            lines += ["", f"{r['server']} {r['protocol']} {r['rate']}: {r['failed']} trial(s) failed: "
                      f"{'; '.join(r['errors'])}"]  # fmt: skip
    return "\n".join(lines)


def write_docs(table: str, begin: str = BEGIN, end: str = END) -> None:
    text = DOC.read_text()
    block = f"{begin}\n{table}\n{end}"
    if begin in text and end in text:
        text = text[: text.index(begin)] + block + text[text.index(end) + len(end) :]
    else:
        text = text.rstrip("\n") + "\n\n" + block + "\n"
    DOC.write_text(text)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--protocols", default="vnc,spice,x2go")
    parser.add_argument("--rates", default="1mbit,10mbit")
    parser.add_argument("--repetitions", type=int, default=3)
    parser.add_argument("--pages", type=int, default=5)
    parser.add_argument("--servers", default="namespace", help=f"comma-separated, of {', '.join(SERVERS)}")
    parser.add_argument("--cold-rates", default="10mbit", help="rates at which vm-cold runs")
    parser.add_argument("--quiet", default="0.5s", help="Q, the silence that ends an update")
    parser.add_argument("--tcp-cc", default="cubic", help="TCP in both namespaces (the thesis': cubic)")
    parser.add_argument(
        "--json-out", type=Path, help="default: last-run.json (last-run-servers.json with --servers)"
    )
    parser.add_argument("--write-docs", action="store_true", help="put the table into docs/rd-benchmark.md")
    args = parser.parse_args(argv)
    if os.geteuid() != 0:
        print("needs root (network namespaces, X servers)", file=sys.stderr)
        return 2
    protocols, rates, servers = args.protocols.split(","), args.rates.split(","), args.servers.split(",")
    unknown = [s for s in servers if s not in SERVERS]
    if unknown:
        parser.error(f"--servers: unknown {', '.join(unknown)} (known: {', '.join(SERVERS)})")
    cold_rates = set(args.cold_rates.split(","))
    conditions = [
        (server, p, r) for server in servers for p in protocols for r in rates
        if server != "vm-cold" or r in cold_rates
    ]  # fmt: skip
    results: dict[tuple[str, str, str], list[dict[str, Any]]] = {c: [] for c in conditions}
    started = time.monotonic()
    accel = set()
    for rep in range(args.repetitions):
        for server, protocol, rate in conditions:
            raw = {"protocol": protocol, "rate": rate, "delay": "10ms", "pages": args.pages,
                   "seed": 1, "verify_duration": "2s", "quiet": args.quiet, "tcp_cc": args.tcp_cc,
                   **SERVERS[server]}  # fmt: skip
            workdir = Path(tempfile.mkdtemp(prefix="qoelab-rdbench-"))
            t0 = time.monotonic()
            try:
                doc = bench(raw, workdir)
                vm = doc["provenance"].get("vm")
                trial = {"updates": doc["updates"], "summary": doc["summary"], "rep": rep, "vm": vm}
                if vm:
                    accel.add(vm["accel"])
                s = doc["summary"]
                print(f"rep {rep} {server:9} {protocol:5} {rate:6}: "
                      f"T {s.get('T_ms', float('nan')):7.0f} ms  "
                      f"X {s.get('bytes_down', float('nan')) / 1e3:6.1f} KB  "
                      f"timed out {int(s.get('n_timed_out', 0))}  ({time.monotonic() - t0:.0f} s)",
                      flush=True)  # fmt: skip
            except QoelabError as err:
                trial = {"error": str(err), "rep": rep, "updates": [], "summary": {}}
                print(f"rep {rep} {server} {protocol} {rate}: FAILED: {err}", flush=True)
            finally:
                shutil.rmtree(workdir, ignore_errors=True)
            results[(server, protocol, rate)].append(trial)
    rows = [condition_row(p, r, results[(sv, p, r)], sv) for sv, p, r in conditions]
    meta = {
        "date": dt.date.today().isoformat(),
        "kernel": platform.release(),
        "cores": os.cpu_count(),
        "pages": args.pages,
        "repetitions": args.repetitions,
        "wall_min": (time.monotonic() - started) / 60,
        "quiet": args.quiet,
        "accel": "/".join(sorted(accel)) or "—",
        "tcp_cc": args.tcp_cc,
    }
    compare = servers != ["namespace"]
    json_out = args.json_out or Path(__file__).with_name(
        "last-run-servers.json" if compare else "last-run.json"
    )
    command = " ".join(
        ["sudo .venv/bin/python benchmarks/rd_bench/run.py", *(argv if argv is not None else sys.argv[1:])]
    )
    table = markdown_servers(rows, command, meta) if compare else markdown(rows, command, meta)
    print(table)
    json_out.write_text(
        json.dumps(
            {"meta": meta, "rows": rows, "trials": {" ".join(c): t for c, t in results.items()}},
            indent=1,
            default=str,
        )  # fmt: skip
    )
    if args.write_docs:
        write_docs(table, *((VM_BEGIN, VM_END) if compare else (BEGIN, END)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
