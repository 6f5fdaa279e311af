"""``qoelab thinclient classify``: paper 002's interactive/bulk flows of a capture, beside the paper's.

The top-level ``qoelab`` command calls :func:`register`. Each subcommand is a parser on the
``thinclient`` subparsers and a ``cmd_*`` handler; ``run`` (the replay job) is in ``run_cli``.
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path
from typing import Any

from qoelab.errors import ParameterError

TAU_MIN_S, TAU_MAX_S = 10e-6, 10.0

CLASSIFY_EPILOG = """\
Takes the server's TCP segments that carry payload (pure ACKs, the client's data and retransmitted
sequence ranges left out). A segment more than --tau after the previous payload segment of its
connection starts a new flow, as does a connection's first segment; a flow of one segment is
interactive, of two or more bulk (paper 002 §2.1; notes/seed-thinclient-tcp.md §1.3, §7.2).

Without --server-ip/--server-port the server of each connection is the end that sent more payload
bytes (on a tie, the lower port); with them, only connections with such an end count, and that end
is the server. Capture on the server's side of the wire with offloads (TSO/GSO) off: the paper's
6.3 ms rule was fitted there, and a WAN splits bulk blocks into RTT-spaced bursts.

examples:
  qoelab thinclient classify rdp.pcapng
  qoelab thinclient classify trial.pcap --server-port 3389 --tau 5ms --json
"""

# (JSON key, label, format) of the table rows; flow counts are compared with Table 2's per-300-s ones.
_ROWS: tuple[tuple[str, str, str], ...] = (
    ("alpha", "alpha  P(bulk after interactive)", "{:.3f}"),
    ("beta", "beta   P(interactive after bulk)", "{:.3f}"),
    ("p_I", "p_I    share of interactive flows", "{:.3f}"),
    ("p_B", "p_B    share of bulk flows", "{:.3f}"),
    ("c_B", "c_B    segments per bulk flow", "{:.2f}"),
    ("t_II_s", "t_II   s, interactive -> interactive", "{:.3f}"),
    ("t_IB_s", "t_IB   s, interactive -> bulk", "{:.3f}"),
    ("t_BI_s", "t_BI   s, bulk -> interactive", "{:.3f}"),
    ("t_BB_s", "t_BB   s, bulk -> bulk", "{:.3f}"),
    ("bytes_per_packet_interactive", "bytes per segment, interactive", "{:.1f}"),
    ("bytes_per_packet_bulk", "bytes per segment, bulk", "{:.1f}"),
)


def register(subparsers: Any) -> None:
    tc = subparsers.add_parser("thinclient", help="thin-client traffic of paper 002 (two-state model)")
    sub = tc.add_subparsers(dest="thinclient_command", metavar="COMMAND", required=True)
    cl = sub.add_parser(
        "classify",
        help="interactive and bulk flows of a capture, beside the paper's Tables 1-2",
        description="Classify a capture's server->client segments into interactive and bulk flows.",
        epilog=CLASSIFY_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    cl.add_argument("capture", metavar="CAPTURE", help="pcap or pcapng file")
    cl.add_argument("--server-port", type=int, metavar="P", help="the server's TCP port (e.g. 3389)")
    cl.add_argument("--server-ip", metavar="IP", help="the server's address")
    cl.add_argument("--tau", help="gap that starts a new flow, 10us to 10s (default 10^-2.2 s = 6.31 ms)")
    cl.add_argument("--json", action="store_true", help="print the measured and the paper's values as JSON")
    cl.set_defaults(func=cmd_classify)
    from qoelab.thinclient.run_cli import register_run

    register_run(sub)


def _tau(text: str | None) -> float:
    from qoelab.thinclient.model import FLOW_THRESHOLD_S
    from qoelab.units import parse_duration

    if text is None:
        return FLOW_THRESHOLD_S
    bound = "must be 10us to 10s"
    try:
        value = parse_duration(text, field="--tau")
    except ParameterError as err:
        raise ParameterError("--tau", f"{err.message}; it {bound}") from None
    if not TAU_MIN_S * (1 - 1e-9) <= value <= TAU_MAX_S * (1 + 1e-9):  # 10us parses as 1.0000000000000001e-05
        raise ParameterError("--tau", f"{bound}, got {text}")
    return value


def cmd_classify(args: argparse.Namespace) -> int:
    from qoelab.thinclient.classify import classify

    tau = _tau(args.tau)
    if args.server_port is not None and not 1 <= args.server_port <= 65535:
        raise ParameterError("--server-port", f"must be 1 to 65535, got {args.server_port}")
    try:
        result = classify(Path(args.capture), args.server_ip, args.server_port, tau)
    except ParameterError as err:
        if err.field == "server_ip":
            raise ParameterError("--server-ip", err.message) from None
        raise
    if args.json:
        print(json.dumps(result))
        return 0
    print(_table(args.capture, result))
    return 0


def _fmt(value: float | None, spec: str) -> str:
    return "—" if value is None else spec.format(value)


def _table(capture: str, r: dict[str, Any]) -> str:
    paper = r["paper"]
    lines = [
        f"{capture}: {r['connections']} connection(s), {r['segments']} server payload segments, "
        f"tau {1e3 * r['tau_s']:.2f} ms",
        f"{'':38}{'measured':>10}{'paper':>10}",
    ]
    lines += [f"{label:38}{_fmt(r[key], fmt):>10}{_fmt(paper[key], fmt):>10}" for key, label, fmt in _ROWS]
    lines.append(
        f"{'flows, interactive / bulk':38}{r['flows_interactive']:>5} / {r['flows_bulk']:<4}"
        f"  paper per 300 s: {paper['flows_interactive_per_300s']} / {paper['flows_bulk_per_300s']}"
    )
    hist = r["gap_histogram"]
    if hist:
        top = max(h["count"] for h in hist)
        lines.append("")
        lines.append("gaps between a connection's payload segments, log10(s) (paper: peaks near -4 and -1)")
        i = 0
        while i < len(hist):
            j = i
            while j < len(hist) and not hist[j]["count"]:
                j += 1
            if j - i >= 3:  # a run of empty bins (the valley) on one line keeps the table short
                lines.append(f"  {hist[i]['log10_gap']:5.1f} .. {hist[j - 1]['log10_gap']:.1f}: none")
                i = j
                continue
            h = hist[i]
            lines.append(
                f"  {h['log10_gap']:5.1f} {h['count']:>7} {'#' * math.ceil(40 * h['count'] / top)}".rstrip()
            )
            i += 1
    return "\n".join(lines)
