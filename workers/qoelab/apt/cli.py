"""``qoelab apt simulate``: the APT controller on a goodput curve given as CSV, no network.

The top-level ``qoelab`` command calls :func:`register`.
"""

from __future__ import annotations

import argparse
import json
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


def register(subparsers: Any) -> None:
    """Add ``apt`` with ``simulate`` to an argparse subparsers object."""
    apt = subparsers.add_parser("apt", help="storage APT: tune parallel IP-SAN sessions (thesis ch. 2)")
    sub = apt.add_subparsers(dest="apt_command", required=True)
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
