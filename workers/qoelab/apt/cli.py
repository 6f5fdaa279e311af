"""``qoelab apt run``: one storage-APT trial on this host; ``qoelab apt simulate``: the APT
controller on a goodput curve given as CSV, no network.

The top-level ``qoelab`` command calls :func:`register`.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

SIMULATE_EPILOG = """\
The curve is CSV, one line per N: 'N,goodput_bps' (a header line and # comments are skipped);
it must give every N the controller probes (give 1..n-max to be safe). '-' reads standard input.

examples:
  qoelab apt simulate --goodput curve.csv --n0 4 --alpha 2 --n-max 64
  qoelab apt simulate --goodput curve.csv --gss textbook --json
"""


RUN_EPILOG = """\
Runs one storage_apt trial here (root: network namespaces) with the job type's defaults: Reno,
SACK, 512 KB socket buffers, a 1,000-packet queue (Table 2.1, scaled to this host). Every field of
the job type can be given as --set NAME=VALUE (e.g. --set stripe=256kb --set tcp_cc=cubic).

examples:
  qoelab apt run --protocol nbd --mode apt --rate 200mbit --delay 20ms
  qoelab apt run --protocol iscsi --mode fixed --sessions 8 --json
  qoelab apt run --protocol synthetic --delay 100ms --n-max 128
"""


def register(subparsers: Any) -> None:
    """Add ``apt`` with ``run`` and ``simulate`` to an argparse subparsers object."""
    apt = subparsers.add_parser("apt", help="storage APT: tune parallel IP-SAN sessions (thesis ch. 2)")
    sub = apt.add_subparsers(dest="apt_command", required=True)
    run = sub.add_parser(
        "run",
        help="run one storage-APT trial on this host and print each step",
        description="Read from an NBD or iSCSI target across the emulated link with one session "
        "(vanilla), N sessions (fixed) or N tuned by APT, and print every step and the steady goodput.",
        epilog=RUN_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    run.add_argument("--protocol", default="nbd", choices=("nbd", "iscsi", "synthetic"), help="default nbd")
    run.add_argument("--mode", default="apt", choices=("apt", "fixed", "vanilla"), help="default apt")
    run.add_argument("--sessions", type=int, help="active sessions in fixed mode")
    run.add_argument("--rate", default="200mbit", help="bottleneck rate (default 200mbit)")
    run.add_argument("--delay", default="20ms", help="one-way delay (default 20ms)")
    run.add_argument("--n0", type=int, default=4, help="APT's first N (default 4)")
    run.add_argument("--alpha", type=float, default=2.0, help="APT's increase factor (default 2)")
    run.add_argument("--n-max", type=int, default=64, help="sessions opened (default 64)")
    run.add_argument("--gss", choices=("paper", "textbook"), default="paper")
    run.add_argument("--delta", default="5s", help="measurement interval per step (default 5s)")
    run.add_argument("--steady", default="30s", help="steady-state window after tuning (default 30s)")
    run.add_argument("--set", action="append", default=[], metavar="NAME=VALUE", help="any other field")
    run.add_argument("--json", action="store_true", help="print the summary, steps and link as JSON")
    run.set_defaults(func=cmd_run)
    sim = sub.add_parser(
        "simulate",
        help="run the APT controller on a goodput curve and print its probes",
        description="Run the APT controller (bracket search, then golden-section search) on a goodput "
        "curve instead of a network and print every step.",
        epilog=SIMULATE_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sim.add_argument("--goodput", required=True, metavar="FILE", help="CSV lines N,goodput_bps ('-': stdin)")
    sim.add_argument("--n0", type=int, default=4, help="initial number of sessions (default 4, Table 2.1)")
    sim.add_argument("--alpha", type=float, default=2.0, help="multiplicative increase factor (default 2)")
    sim.add_argument("--n-max", type=int, default=64, help="most sessions (default 64; the paper's 128)")
    sim.add_argument(
        "--gss",
        choices=("paper", "textbook"),
        default="paper",
        help="Eq. 2.1's left case as printed (paper, default) or textbook golden-section search",
    )
    sim.add_argument("--json", action="store_true", help="print probes, n_star, steps, saturated as JSON")
    sim.set_defaults(func=cmd_simulate)


def cmd_simulate(args: argparse.Namespace) -> int:
    from qoelab.apt.controller import AptConfig, read_curve, simulate

    config = AptConfig(n0=args.n0, alpha=args.alpha, n_max=args.n_max, gss=args.gss)
    if args.goodput == "-":
        curve = read_curve(sys.stdin)
    else:
        path = Path(args.goodput)
        if not path.is_file():
            from qoelab.apt.controller import CurveError

            raise CurveError(f"--goodput: no such file {args.goodput!r}")
        curve = read_curve(path.read_text().splitlines())
    ctl = simulate(curve, config)
    if args.json:
        out = ctl.summary()
        out["steps_detail"] = [s.to_json() for s in ctl.steps]
        print(json.dumps(out))
        return 0
    print(f"APT n0={config.n0} alpha={config.alpha:g} n_max={config.n_max} gss={config.gss}")
    print(f"{'k':>3}  {'phase':<8} {'N':>4}  {'goodput':>14}  {'bracket after':<15} {'branch':<9} next N")
    for s in ctl.steps:
        bracket = f"({s.l}, {s.m}, {s.r})" if s.l is not None else "—"
        goodput = f"{s.goodput_bps / 1e6:>9.3f} Mbit/s"
        print(f"{s.k:>3}  {s.phase:<8} {s.n:>4}  {goodput}  {bracket:<15} {s.branch:<9} {s.next_n}")
    s = ctl.summary()
    how = "saturated at n_max" if s["saturated"] else f"bracket ({', '.join(map(str, s['bracket']))})"
    print(f"N* = {s['n_star']} after {s['steps']} steps ({how}); probes: {' '.join(map(str, s['probes']))}")
    return 0


def run_params(args: argparse.Namespace) -> dict[str, Any]:
    raw: dict[str, Any] = {
        "transport": args.protocol, "mode": args.mode, "rate": args.rate, "delay": args.delay,
        "n0": args.n0, "alpha": args.alpha, "n_max": args.n_max, "gss": args.gss,
        "delta": args.delta, "steady": args.steady,
    }  # fmt: skip
    if args.sessions is not None:
        raw["sessions"] = args.sessions
    from qoelab.jobs.local import apply_sets

    return apply_sets(raw, args.set)


def cmd_run(args: argparse.Namespace) -> int:
    from qoelab import jobs
    from qoelab.params import validate_params

    job = jobs.get("storage_apt")
    params = validate_params(job.params, run_params(args))
    if params.transport != "synthetic" and os.geteuid() != 0:
        print("qoelab apt run: needs root (network namespaces); run it with sudo", file=sys.stderr)
        return 2
    from qoelab.jobs.local import run_here

    result = run_here(job, params, "qar", live=not args.json)  # a live line per step
    s = result.summary
    if args.json:
        out = {"summary": s, "steps": [x.values for x in result.samples], "link": result.link,
               "provenance": result.provenance}  # fmt: skip
        print(json.dumps(out, default=str))
        return 0
    line = f"steady: N = {s['n_steady']:g}, goodput {s['goodput_steady_bps'] / 1e6:.1f} Mbit/s"
    if "utilization" in s:
        line += f" ({100 * s['utilization']:.0f} % of the link)"
    if "n_star" in s:
        line += f"; APT fixed N* = {s['n_star']:g} after {s['steps']:g} steps ({s['converge_s']:.0f} s)"
    if s.get("saturated"):
        line += ", saturated at n_max"
    print(line)
    for side in ("client", "storage"):
        if f"cpu_load_{side}" in s:
            per_gbit = s[f"cpu_ticks_per_bit_{side}"] * 1e9
            print(f"CPU {side}: {s[f'cpu_load_{side}']:.2f} cores, {per_gbit:.2f} ticks per Gbit")
    return 0
