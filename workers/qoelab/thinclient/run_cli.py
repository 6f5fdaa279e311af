"""``qoelab thinclient run``: one thin-client TCP trial on this host, a paper 002 experiment by name.

``--preset e2 --buffer 25kb`` picks the experiment's settings (``thinclient.experiments``) and the
router buffer; ``--set NAME=VALUE`` changes any job parameter. A line every 10 s while it runs;
at the end r_I150, r_I1000, RTOs per connection and the delay decomposition, beside the paper's
values where the paper has them. ``--json`` prints the metrics and the TCP settings read back.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

from qoelab.thinclient import experiments

RUN_EPILOG = """\
experiments (notes/seed-thinclient-tcp.md §7.4; buffer large = 2,500,000 B, small = 25,000 B):
{experiments}

examples:
  qoelab thinclient run --preset e2 --buffer 25kb
  qoelab thinclient run --preset e1 --buffer large --pairs 20 --duration 60s --json
  qoelab thinclient run --preset e7 --set delay=50ms --set tcp_frto=0
  qoelab thinclient run --preset e1 --buffer 25kb --trace capture.pcap   # an rd_qoe session's capture
"""


def register_run(sub: Any) -> None:
    listing = "\n".join(f"  {e.key}  {e.title}" for e in experiments.EXPERIMENTS.values())
    run = sub.add_parser(
        "run",
        help="replay thin-client traffic of N pairs through one bottleneck (a paper 002 experiment)",
        description="Run one thin-client TCP trial here (needs root: network namespaces).",
        epilog=RUN_EPILOG.format(experiments=listing),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    run.add_argument("--preset", default="e1", help="experiment e1..e9 (default e1, no modification)")
    run.add_argument("--buffer", default="large", help="large, small or a size such as 25kb (router buffer)")
    run.add_argument("--pairs", help="server/client pairs (default 100, the paper's)")
    run.add_argument("--duration", help="replay length, e.g. 60s (default 300s, the paper's)")
    run.add_argument("--trace", metavar="PCAP", help="replay this capture's server timeline, not the model")
    run.add_argument("--trace-server-port", metavar="P", help="the capture's server port (default: SYNs)")
    run.add_argument("--set", action="append", default=[], metavar="NAME=VALUE", help="any job parameter")
    run.add_argument("--json", action="store_true", help="print the metrics and the TCP settings as JSON")
    run.set_defaults(func=cmd_run)


def cmd_run(args: argparse.Namespace) -> int:
    from qoelab import jobs
    from qoelab.errors import ParameterError
    from qoelab.jobs.local import apply_sets, run_here
    from qoelab.params import validate_params

    try:
        raw: dict[str, Any] = experiments.preset(args.preset, args.buffer)
    except KeyError as err:
        raise ParameterError("--preset", err.args[0]) from None
    raw["experiment"] = args.preset.lower()
    for name in ("pairs", "duration", "trace", "trace_server_port"):
        if getattr(args, name) is not None:
            raw[name] = getattr(args, name)
    job = jobs.get("thinclient_tcp")
    params = validate_params(job.params, apply_sets(raw, args.set))
    if os.geteuid() != 0:
        print("qoelab thinclient run: needs root (network namespaces); run it with sudo", file=sys.stderr)
        return 2
    result = run_here(job, params, "qtr", live=not args.json)
    s, paper = result.summary, result.provenance.get("paper") or {}
    if args.json:
        tcp = (result.link.get("tcp") or {}).get("server") or {}
        print(json.dumps({"summary": s, "paper": paper, "tcp": tcp, "provenance": result.provenance}))
        return 0
    print(report(s, paper))
    return 0


def _num(v: Any, spec: str = "{:.2e}") -> str:
    return "—" if v is None else spec.format(v)


def report(s: dict[str, float], paper: dict[str, float]) -> str:
    """The end-of-run lines: the paper's metrics beside its numbers, then the decomposition."""
    rows = (
        ("r_I150", "interactive above 150 - t0 ms", "{:.2e}"),
        ("r_I1000", "interactive above 1000 - t0 ms", "{:.2e}"),
        ("T_I150_s", "T_I150, s (Eq. 4 as printed)", "{:.1f}"),
        ("T_I1000_s", "T_I1000, s (Eq. 4 as printed)", "{:.1f}"),
        ("rto_per_conn_300s", "RTOs per connection per 300 s", "{:.2f}"),
        ("utilisation", "bottleneck utilisation", "{:.3f}"),
        ("utilisation_interactive", "  of it interactive payload", "{:.4f}"),
    )
    lines = [f"{'':34}{'measured':>10}{'paper':>10}"]
    lines += [f"{label:34}{_num(s.get(k), f):>10}{_num(paper.get(k), f):>10}" for k, label, f in rows]
    ms, count = "{:.1f}", "{:.0f}"
    lines.append(
        f"interactive delay p50 {_num(s.get('p50_I_ms'), ms)} ms, p99 {_num(s.get('p99_I_ms'), ms)} ms, "
        f"max {_num(s.get('max_I_ms'), count)} ms; router drops {_num(s.get('router_drops'), count)}, "
        f"largest queue {_num(s.get('max_queue_bytes'), count)} B"
    )
    for k in (150, 1000):
        parts = [
            f"{c} {100 * s[f'share_{c}_I{k}']:.0f} %"
            for c in ("server", "retransmission", "router", "propagation", "client")
            if f"share_{c}_I{k}" in s
        ]
        tail = ", ".join(parts) if parts else "no interactive write that late"
        lines.append(f"delay of interactive writes above {k} - t0 ms: {tail}")
    lines.append(
        f"sender behind schedule: p99 {_num(s.get('schedule_lag_p99_ms'), '{:.1f}')} ms, "
        f"max {_num(s.get('schedule_lag_max_ms'), '{:.1f}')} ms"
    )
    return "\n".join(lines)
