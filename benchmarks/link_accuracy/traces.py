"""Accuracy of trace links: every library trace pair through `qoelab link check --trace` (issue 37).

For each pair of the lab's trace library (``<name>.down`` as the down direction, ``<name>.up`` as
the up direction, both at once) it builds a userspace link with a one-way delay, runs the trace
check (``qoelab.emulation.trace_check``: a saturating flow of full-size datagrams each way, the
receiver's kernel timestamps per 100 ms against the opportunities the trace offered) for one
period of the trace or 120 s, and records delivered against expected and the series correlation,
with the machine, kernel and commit. Targets (the issue's): delivered within 2 % of expected and a
correlation of at least 0.98 per direction.

    sudo .venv/bin/python benchmarks/link_accuracy/traces.py \
        --out benchmarks/link_accuracy/results/traces.json
    .venv/bin/python benchmarks/link_accuracy/traces.py --report benchmarks/link_accuracy/results/traces.json

Needs root (namespaces, TUN) and a built linkemu (`make -C workers/csrc`). Run it on a quiet host:
the sender and receiver are Python threads.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from qoelab.emulation import traces
from qoelab.emulation.profile import LinkProfile
from qoelab.emulation.topology import emulated_link
from qoelab.emulation.trace_check import DELIVERED_TOLERANCE, MIN_CORRELATION, check_traces
from qoelab.hostfacts import run_facts


def pairs() -> list[str]:
    """Names with both a .down and an .up trace in the library."""
    names = {p.stem for p in traces.LIBRARY.iterdir() if p.suffix in (".down", ".up")}
    return sorted(n for n in names if (traces.LIBRARY / f"{n}.down").is_file()
                  and (traces.LIBRARY / f"{n}.up").is_file())  # fmt: skip


def run(delay: str, duration_s: float | None) -> dict[str, Any]:
    rows = []
    for name in pairs():
        profile = LinkProfile.parse(trace=f"{name}.down", up_trace=f"{name}.up", delay=delay)
        started = time.time()
        with emulated_link(profile, backend="userspace") as link:
            checked = check_traces(link, duration_s)
        rows.append({"pair": name, "delay": delay, "seconds": round(time.time() - started, 1), **checked})
        down, up = checked["down"], checked["up"]
        print(f"{name}: down {down['delivered_ratio']:.4f} r={down['series_corr']:.4f}, "
              f"up {up['delivered_ratio']:.4f} r={up['series_corr']:.4f}", flush=True)  # fmt: skip
    tcp_cc = Path("/proc/sys/net/ipv4/tcp_congestion_control").read_text().strip()
    return {"host": {**run_facts(), "tcp_congestion_control": tcp_cc,
                     "started": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())},
            "targets": {"delivered_within": DELIVERED_TOLERANCE, "min_series_corr": MIN_CORRELATION},
            "rows": rows}  # fmt: skip


def report(doc: dict[str, Any]) -> str:
    h = doc["host"]
    lines = [
        f"{h['cpu']} (BogoMIPS {h['bogomips']}), {h['cores']} cores, kernel {h['kernel']}, "
        f"code {h['code_revision']}, started {h['started']}.",
        "",
        "| trace pair | direction | window | expected | delivered | delivered / expected | series r "
        "(100 ms) | target met |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for row in doc["rows"]:
        for name in ("down", "up"):
            d = row[name]
            lines.append(
                f"| {row['pair']} | {name} | {d['window_s']:g} s | {d['expected_bps'] / 1e6:.3f} Mbit/s "
                f"| {d['delivered_bps'] / 1e6:.3f} Mbit/s | {d['delivered_ratio']:.4f} "
                f"| {d['series_corr']:.4f} | {'yes' if d['ok'] else 'NO'} |"
            )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--delay", default="20ms", help="one-way delay of every link (default 20ms)")
    ap.add_argument(
        "--duration", type=float, default=None, help="seconds per pair (default: a period, <= 120)"
    )
    ap.add_argument("--out", type=Path, help="write the results here (JSON)")
    ap.add_argument("--report", type=Path, help="print the table of an earlier run and exit")
    args = ap.parse_args(argv)
    if args.report:
        print(report(json.loads(args.report.read_text())))
        return 0
    doc = run(args.delay, args.duration)
    if args.out:
        args.out.write_text(json.dumps(doc, indent=1) + "\n")
    print(report(doc))
    return 0 if all(r[n]["ok"] for r in doc["rows"] for n in ("down", "up")) else 1


if __name__ == "__main__":
    sys.exit(main())
