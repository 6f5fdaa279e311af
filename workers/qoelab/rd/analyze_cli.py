"""``qoelab rd analyze CAPTURE``: the slow-motion analysis of any capture, as a table or JSON.

The ``rd`` command group is shared with other modules (``rd bench``): each registers its
subcommands through :func:`get_or_create_rd_parser`, whichever runs first creates the group.
Run stand-alone with ``python -m qoelab.rd.analyze_cli analyze X.pcap``.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence

from qoelab.errors import QoelabError
from qoelab.rd.analysis import AnalysisResult, analyze, parse_endpoint
from qoelab.rd.clicks import load_clicks
from qoelab.units import parse_duration

_RD_SUBPARSERS = "_qoelab_rd_subparsers"


def get_or_create_rd_parser(subparsers: argparse._SubParsersAction) -> argparse._SubParsersAction:
    """The sub-command table of ``rd`` under ``subparsers``, creating the ``rd`` group if needed."""
    rd = subparsers.choices.get("rd")
    if rd is None:
        rd = subparsers.add_parser(
            "rd",
            help="remote-desktop QoE (slow-motion benchmarking)",
            description="Remote-desktop QoE: slow-motion benchmarking of VNC, SPICE and X2Go (thesis ch. 4).",
        )
        table = rd.add_subparsers(dest="rd_command", metavar="COMMAND", required=True)
        setattr(rd, _RD_SUBPARSERS, table)
    return getattr(rd, _RD_SUBPARSERS)


def _duration(field: str):
    def parse(text: str) -> float:
        try:
            value = parse_duration(text, field=field)
        except QoelabError as err:
            raise argparse.ArgumentTypeError(str(err)) from None
        if value <= 0:
            raise argparse.ArgumentTypeError(f"{field}: must be more than 0, got {text!r}")
        return value

    return parse


def _server(text: str):
    try:
        return parse_endpoint(text, field_name="--server")
    except QoelabError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def register_analyze(rd_subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    p = rd_subparsers.add_parser(
        "analyze",
        help="measure screen updates (T, X, X/T) in a packet capture",
        description=(
            "Measure each screen update in a pcap/pcapng capture taken on the client side: "
            "T = last server→client payload packet − last client→server input packet, X = server→client "
            "payload bytes in between. Anchored on the driver's clicks with --clicks, otherwise segmented "
            "by quiet periods. See docs/rd-analysis.md."
        ),
    )
    p.add_argument("capture", metavar="CAPTURE", help="pcap or pcapng file")
    p.add_argument("--clicks", metavar="CLICKS.json", help="click times recorded by the driver")
    p.add_argument(
        "--quiet",
        type=_duration("--quiet"),
        default=0.5,
        metavar="DURATION",
        help="server silence that ends an update (default 500ms)",
    )
    p.add_argument(
        "--timeout",
        type=_duration("--timeout"),
        default=None,
        metavar="DURATION",
        help="an update not finished this long after its input timed out (default: none)",
    )
    p.add_argument(
        "--server",
        type=_server,
        default=None,
        metavar="HOST[:PORT]",
        help="the server end (default: the side sending the most payload)",
    )
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.set_defaults(func=run_analyze)
    return p


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``rd analyze`` to a top-level ``qoelab`` sub-command table."""
    register_analyze(get_or_create_rd_parser(subparsers))


def _fmt(value: float | None, spec: str) -> str:
    return "—" if value is None else format(value, spec)


def print_table(result: AnalysisResult, console=None) -> None:
    from rich.console import Console
    from rich.table import Table

    if console is None:
        probe = Console()
        # Piped output would wrap at 80 columns and truncate the numbers; a log line may be long.
        console = probe if probe.is_terminal else Console(width=160)
    console.print(
        f"{result.capture.path}: {len(result.updates)} updates ({result.mode}), "
        f"server {result.server}, client {result.client}",
        soft_wrap=True,
        highlight=False,
    )
    with_page = any(u.page is not None or u.ratio is not None for u in result.updates)
    columns = ["#", *(["page", "ratio"] if with_page else []), "T ms", "X B", "Mbit/s", "up B"]
    table = Table(padding=(0, 1))
    for name in (*columns, "pkt ↓/↑", "rtx ↓/↑", "conn"):
        table.add_column(name, justify="right", no_wrap=True)
    table.add_column("status", no_wrap=True)
    for u in result.updates:
        page = ["" if u.page is None else str(u.page), "" if u.ratio is None else f"{u.ratio:g}"]
        table.add_row(
            str(u.index),
            *(page if with_page else []),
            _fmt(u.T_ms, ".3f"),
            str(u.bytes_down),
            _fmt(None if u.rate_bps is None else u.rate_bps / 1e6, ".3f"),
            str(u.bytes_up),
            f"{u.packets_down}/{u.packets_up}",
            f"{u.retransmissions_down}/{u.retransmissions_up}",
            str(u.connections),
            "[red]timed out[/red]" if u.timed_out else "ok",
        )
    console.print(table)
    s = result.summary
    t, x, r = s.T_s.scaled(1e3), s.bytes_down, s.rate_bps.scaled(1e-6)
    console.print(
        f"n={s.n} timed out={s.n_timed_out}  "
        f"T ms: mean {_fmt(t.mean, '.3f')} ± {_fmt(t.ci95, '.3f')} (95 % CI), "
        f"median {_fmt(t.median, '.3f')}, "
        f"p95 {_fmt(t.p95, '.3f')}  |  X bytes: mean {_fmt(x.mean, '.0f')}, "
        f"median {_fmt(x.median, '.0f')}  |  "
        f"X/T Mbit/s: mean {_fmt(r.mean, '.3f')} ± {_fmt(r.ci95, '.3f')}"
    )
    for u in result.updates:
        if u.timed_out:
            console.print(f"update {u.index} timed out: {u.reason}", highlight=False)
    for w in result.warnings:
        console.print(f"[yellow]warning:[/yellow] {w}")


def run_analyze(args: argparse.Namespace) -> int:
    try:
        clicks = load_clicks(args.clicks) if args.clicks else None
        result = analyze(args.capture, clicks, server=args.server, quiet_s=args.quiet, timeout_s=args.timeout)
    except QoelabError as err:
        print(f"qoelab rd analyze: {err}", file=sys.stderr)
        return 2
    if args.json:
        json.dump(result.to_json(), sys.stdout, indent=1)
        sys.stdout.write("\n")
    else:
        print_table(result)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="qoelab rd", description="Remote-desktop QoE tools (stand-alone).")
    register_analyze(parser.add_subparsers(dest="rd_command", metavar="COMMAND", required=True))
    args = parser.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
