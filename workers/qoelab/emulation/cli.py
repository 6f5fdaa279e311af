"""``qoelab link check``, ``qoelab link cleanup`` and ``qoelab link trace info|make``.

The top-level ``qoelab`` command calls :func:`register`; ``python -m qoelab.emulation.cli link ...``
works on its own too.
"""

from __future__ import annotations

import argparse
import json
import logging
import signal
import sys
from typing import Any

from qoelab.errors import QoelabError


def register(subparsers: Any) -> None:
    """Add ``link`` with ``check`` and ``cleanup`` to an argparse subparsers object."""
    link = subparsers.add_parser("link", help="build, verify and clean up emulated links")
    sub = link.add_subparsers(dest="link_command", required=True)

    check = sub.add_parser("check", help="build a link, measure what it really does, tear it down")
    check.add_argument("--rate", help="bottleneck rate both ways, e.g. 10mbit (default: unshaped)")
    check.add_argument("--delay", default="0ms", help="one-way delay, e.g. 25ms")
    check.add_argument("--jitter", default="0ms", help="delay variation, e.g. 5ms")
    check.add_argument("--jitter-dist", choices=("uniform", "normal"), default="uniform")
    check.add_argument("--reorder", action="store_true", help="let jittered packets overtake")
    check.add_argument("--loss", default="0%", help="random loss per packet, e.g. 0.5%%")
    check.add_argument("--gemodel", help="Gilbert-Elliott loss 'p,r,1-h,1-k' in %%, e.g. 1%%,30%%")
    check.add_argument("--limit", help="queue limit: 100pkt or 64kb")
    check.add_argument("--up-rate", help="client -> server rate if it differs")
    check.add_argument("--up-delay", help="client -> server delay if it differs")
    check.add_argument("--up-loss", help="client -> server loss if it differs")
    check.add_argument(
        "--trace",
        help="a Mahimahi trace (library name or file) as the down capacity "
        "instead of --rate; the check then measures the trace (docs/emulation.md)",
    )
    check.add_argument("--up-trace", help="the client -> server direction's trace")
    check.add_argument("--queue", choices=("fifo", "drophead", "codel", "pie", "prio"), default="fifo",
                       help="the queue in front of the rate (docs/emulation.md)")  # fmt: skip
    check.add_argument("--queue-target", help="CoDel's target or PIE's reference delay, e.g. 5ms")
    check.add_argument("--queue-interval", help="CoDel's interval or PIE's update period, e.g. 100ms")
    check.add_argument("--queue-max-burst", help="PIE's burst allowance, e.g. 150ms")
    outage = check.add_mutually_exclusive_group()
    outage.add_argument("--outage", help="periodic ON/OFF (4s/1s) or windows (10s-12s, 30s-35s)")
    outage.add_argument(
        "--outage-file", help="outage windows, one START END per line (seconds or 12s), # comments"
    )
    check.add_argument("--mtu", type=int, default=1500)
    check.add_argument("--seed", type=int, default=1)
    check.add_argument(
        "--offload", action="store_true", help="userspace link: segmentation offload, batched writes"
    )
    add_tcp_arguments(check)
    check.add_argument("--backend", choices=("auto", "netem", "userspace"), default="auto")
    check.add_argument("--duration", type=float, default=None,
                       help="seconds per TCP test (default 5); with a trace, of the trace check "
                       "(default one period, at most 120)")  # fmt: skip
    check.add_argument("--prefix", help="name prefix for namespaces (default: ql + 6 random chars)")
    check.add_argument("--json", action="store_true", help="print the verification as JSON")
    check.set_defaults(func=cmd_check)

    cleanup = sub.add_parser("cleanup", help="remove namespaces, devices and processes left by trials")
    cleanup.add_argument(
        "--prefix",
        action="append",
        help="name prefix to clean; repeatable (default: every qoelab trial on this host, ql* and qw*)",
    )
    cleanup.add_argument("--dry-run", action="store_true", help="only list what would be removed")
    cleanup.set_defaults(func=cmd_cleanup)
    _register_trace(sub)


def _register_trace(sub: Any) -> None:
    trace = sub.add_parser("trace", help="describe or make Mahimahi-format link traces")
    tsub = trace.add_subparsers(dest="trace_command", required=True)
    info = tsub.add_parser("info", help="lines, period, mean capacity and checksum of traces")
    info.add_argument(
        "traces", nargs="*", metavar="TRACE",
        help="a file or a library name, e.g. Verizon-LTE-short.down (default: all)",
    )  # fmt: skip
    info.add_argument("--json", action="store_true")
    info.set_defaults(func=cmd_trace_info)
    make = tsub.add_parser("make", help="write a synthetic trace")
    make.add_argument("kind", choices=("constant", "steps", "sawtooth", "onoff", "csv"))
    make.add_argument("--rate", help="constant and onoff: the rate, e.g. 10mbit")
    make.add_argument("--rates", help="steps: comma-separated rates, e.g. 1mbit,5mbit,2mbit")
    make.add_argument("--low", help="sawtooth: the lowest rate")
    make.add_argument("--high", help="sawtooth: the highest rate")
    make.add_argument("--period", default="1s", help="constant and sawtooth: the loop's length (default 1s)")
    make.add_argument(
        "--step", default="1s", help="steps and csv: each rate's length (default 1s; csv 100ms)"
    )
    make.add_argument("--on", help="onoff: how long the link is up, e.g. 4s")
    make.add_argument("--off", help="onoff: how long the outage lasts, e.g. 1s")
    make.add_argument("--from", dest="source", help="csv: a file of time_s,rate_bps rows")
    make.add_argument("--out", required=True, help="the trace file to write")
    make.set_defaults(func=cmd_trace_make)


def cmd_trace_info(args: argparse.Namespace) -> int:
    from qoelab.emulation import traces

    try:
        found = [traces.load(t) for t in args.traces] if args.traces else traces.library()
    except QoelabError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    rows = [t.describe() for t in found]
    if args.json:
        print(json.dumps(rows, indent=1))
        return 0
    for r in rows:
        print(f"{r['name']}: {r['lines']} lines, period {r['period_s']:.3f} s, "
              f"mean {r['mean_bps'] / 1e6:.2f} Mbit/s, sha256 {str(r['sha256'])[:12]}")  # fmt: skip
    return 0


def cmd_trace_make(args: argparse.Namespace) -> int:
    from pathlib import Path

    from qoelab.emulation import traces
    from qoelab.units import parse_duration, parse_rate

    def need(field: str) -> str:
        value = getattr(args, field)
        if not value:
            raise QoelabError(f"--{field}: needed for a {args.kind} trace")
        return value

    def ms(field: str) -> int:
        return max(1, round(parse_duration(need(field), field) * 1000))

    try:
        if args.kind == "constant":
            made = traces.make_constant(parse_rate(need("rate"), "rate"), ms("period"))
        elif args.kind == "steps":
            rates = [parse_rate(r.strip(), "rates") for r in need("rates").split(",") if r.strip()]
            made = traces.make_steps(rates, ms("step"))
        elif args.kind == "sawtooth":
            made = traces.make_sawtooth(
                parse_rate(need("low"), "low"), parse_rate(need("high"), "high"), ms("period")
            )
        elif args.kind == "onoff":
            made = traces.make_onoff(parse_rate(need("rate"), "rate"), ms("on"), ms("off"))
        else:
            source = Path(need("source"))
            step = ms("step") if args.step != "1s" else 100
            made = traces.make_from_csv(source.read_text(), step, source.name)
        Path(args.out).write_text(made.text())
    except (QoelabError, OSError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    d = made.describe()
    mean = float(d["mean_bps"]) / 1e6  # type: ignore[arg-type]
    print(f"wrote {args.out}: {d['lines']} lines, period {d['period_s']:.3f} s, mean {mean:.2f} Mbit/s")
    return 0


def add_tcp_arguments(parser: argparse.ArgumentParser) -> None:
    """The trial's TCP in both namespaces (``qoelab.emulation.tcp``), as ``LinkParams`` has it."""
    parser.add_argument("--tcp-cc", default="cubic", help="congestion control, e.g. reno (default cubic)")
    parser.add_argument("--tcp-sack", choices=("on", "off"), default="on", help="selective ACKs (default on)")
    parser.add_argument("--tcp-rmem-max", help="receive buffer ceiling, e.g. 512kb (default: 2 x BDP)")
    parser.add_argument("--tcp-wmem-max", help="send buffer ceiling, e.g. 512kb (default: 2 x BDP)")
    parser.add_argument("--rto-min", help="minimum RTO on the routes, e.g. 50ms (default: kernel's 200ms)")


def tcp_from_args(args: argparse.Namespace) -> Any:
    """Validated ``TcpSettings`` from the flags; a bad value names the flag's field and the bound."""
    from qoelab.emulation.linkparams import LinkParams
    from qoelab.params import validate_params

    raw = {"tcp_cc": args.tcp_cc, "tcp_sack": args.tcp_sack == "on", "tcp_rmem_max": args.tcp_rmem_max,
           "tcp_wmem_max": args.tcp_wmem_max, "rto_min": args.rto_min}  # fmt: skip
    return validate_params(LinkParams, raw).tcp_settings()  # type: ignore[attr-defined]


def _sigterm_to_exit() -> None:
    # SIGTERM must unwind through the link's teardown like Ctrl-C does.
    def handler(signum: int, _frame: Any) -> None:
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, handler)


def cmd_check(args: argparse.Namespace) -> int:
    from qoelab.emulation.outages import read_outage_file
    from qoelab.emulation.profile import LinkProfile

    try:
        profile = LinkProfile.parse(
            rate=args.rate,
            delay=args.delay,
            jitter=args.jitter,
            loss=args.loss,
            jitter_dist=args.jitter_dist,
            reorder=args.reorder,
            gemodel=args.gemodel,
            limit=args.limit,
            up_rate=args.up_rate,
            up_delay=args.up_delay,
            up_loss=args.up_loss,
            trace=args.trace,
            up_trace=args.up_trace,
            queue=args.queue,
            queue_target=args.queue_target,
            queue_interval=args.queue_interval,
            queue_max_burst=args.queue_max_burst,
            outage=read_outage_file(args.outage_file) if args.outage_file else args.outage,
            mtu=args.mtu,
            seed=args.seed,
            offload=args.offload,
            tcp=tcp_from_args(args),
        )
        if args.duration is not None and not 1 <= args.duration <= 600:
            print(f"error: duration: must be between 1 and 600 s, got {args.duration:g}", file=sys.stderr)
            return 2
        from qoelab.emulation.topology import emulated_link

        _sigterm_to_exit()
        with emulated_link(profile, prefix=args.prefix, backend=args.backend) as link:
            result = _measure(link, args.duration, traced=bool(args.trace or args.up_trace))
            result["emulator_stats"] = None
        result["emulator_stats"] = link.emulator_stats or None
    except QoelabError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    except (RuntimeError, ValueError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("interrupted; the link was removed", file=sys.stderr)
        return 130
    if args.json:
        print(json.dumps(result, indent=2, default=str))
    else:
        print_table(result)
    return 0 if result["ok"] else 1


def _measure(link: Any, duration_s: float | None, traced: bool) -> dict[str, Any]:
    """The standard verification, or for a trace link the trace check (what a trace link's rate
    means is the trace: TCP and paced probes over it measure TCP, not the emulator)."""
    if not traced:
        from qoelab.emulation.verify import verify_link

        return verify_link(link, duration_s=duration_s or 5.0)
    from qoelab.emulation.trace_check import check_traces

    checked = check_traces(link, duration_s)
    return {"backend": link.backend, "link": link.describe(), "configured": link.profile.summary(),
            "trace_check": checked, "ok": checked["ok"]}  # fmt: skip


def _fmt_rate(v: float | None) -> str:
    return "-" if v is None else f"{v / 1e6:.3f} Mbit/s"


def _fmt_ms(v: float | None) -> str:
    return "-" if v is None else f"{v:.2f} ms"


def _fmt_pct(v: float | None) -> str:
    return "-" if v is None else f"{v:.3f} %"


def print_trace_table(result: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    checked = result["trace_check"]
    table = Table(title=f"trace check: {result['backend']} backend ({result['link']['prefix']})")
    for col in ("direction", "trace", "window", "expected", "delivered", "ratio", "series r", "ok"):
        table.add_column(col, justify="left" if col in ("direction", "trace") else "right")
    for name in ("down", "up"):
        d = checked.get(name)
        if d:
            table.add_row(
                name, d["trace"], f"{d['window_s']:g} s", _fmt_rate(d["expected_bps"]),
                _fmt_rate(d["delivered_bps"]), f"{d['delivered_ratio']:.4f}" if d["delivered_ratio"] else "-",
                f"{d['series_corr']:.4f}" if d["series_corr"] is not None else "-",
                "[green]yes[/]" if d["ok"] else "[red]NO[/]",
            )  # fmt: skip
    Console().print(table)


def print_table(result: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    if "trace_check" in result:
        print_trace_table(result)
        return
    conf, meas, exp = result["configured"], result["measured"], result["expected"]
    table = Table(title=f"link check: {result['backend']} backend ({result['link']['prefix']})")
    table.add_column("quantity")
    table.add_column("configured", justify="right")
    table.add_column("expected", justify="right")
    table.add_column("measured", justify="right")
    table.add_column("ok", justify="center")
    ok = {c["name"]: c["ok"] for c in result["checks"]}
    mark = {True: "[green]yes[/]", False: "[red]NO[/]", None: ""}
    table.add_row(
        "TCP down (s->c)",
        _fmt_rate(conf["rate_bps"]),
        _fmt_rate(exp["tcp_down_bps"]),
        _fmt_rate(meas["tcp_down_bps"]),
        mark[ok.get("tcp_down_bps")],
    )
    table.add_row(
        "TCP up (c->s)",
        _fmt_rate(conf["up_rate_bps"]),
        _fmt_rate(exp["tcp_up_bps"]),
        _fmt_rate(meas["tcp_up_bps"]),
        mark[ok.get("tcp_up_bps")],
    )
    table.add_row(
        "RTT idle (median)", _fmt_ms(conf["rtt_ms"]), "", _fmt_ms(meas["rtt_ms"]), mark[ok.get("rtt_ms")]
    )
    table.add_row("RTT loaded (median)", "", "", _fmt_ms(meas["rtt_loaded_ms"]), "")
    for key, conf_key, label in (
        ("loss_down", "loss_pct", "loss down"),
        ("loss_up", "up_loss_pct", "loss up"),
    ):
        probe = meas[key]
        lo, hi = probe["ci95_pct"]
        table.add_row(
            f"{label} ({probe['packets']} UDP)",
            _fmt_pct(conf[conf_key]),
            "",
            f"{_fmt_pct(probe['loss_pct'])} [{lo:.2f}, {hi:.2f}]",
            mark[ok.get(key + "_pct")],
        )
    if result.get("mathis_bps"):
        table.add_row("TCP model (Mathis)", "", _fmt_rate(result["mathis_bps"]), "", "")
    console = Console()
    console.print(table)
    tcp = result["link"].get("tcp") or {}
    if tcp:
        rto = tcp["rto_min_ms"]
        console.print(
            f"TCP in both namespaces (read back): {tcp['cc']}, SACK {'on' if tcp['sack'] else 'off'}, "
            f"buffer ceilings rmem {tcp['rmem_max']} B / wmem {tcp['wmem_max']} B, rto_min {rto:g} ms",
            highlight=False,
        )
    if result.get("mathis_bps"):
        console.print(
            f"Lossy link: the Mathis et al. model (MSS/RTT * sqrt(3/2) / sqrt(p)) predicts "
            f"{_fmt_rate(result['mathis_bps'])} for standard (Reno) TCP at this loss and RTT. A TCP "
            "figure below the rate but near that prediction is TCP reacting to loss, not the emulator "
            "(CUBIC with SACK often does better than the model)."
        )
    tools = ", ".join(f"{v}" for v in result["tools"].values() if v)
    console.print(
        f"tools: {tools}; took {result['elapsed_s']:.1f} s; "
        f"all checks {'passed' if result['ok'] else 'FAILED'}"
    )


# Trials of `qoelab link check` / `rd bench` are named ql…, trials run by a worker qw….
DEFAULT_CLEANUP_PREFIXES = ("ql", "qw")


def cmd_cleanup(args: argparse.Namespace) -> int:
    from qoelab.emulation.cleanup import leftovers
    from qoelab.runner import cleanup_prefix

    prefixes = args.prefix or list(DEFAULT_CLEANUP_PREFIXES)
    removed: list[str] = []
    try:
        if args.dry_run:
            print(json.dumps({p: leftovers(p) for p in prefixes}, indent=2))
            return 0
        for prefix in prefixes:
            removed += cleanup_prefix(prefix)
    except (QoelabError, ValueError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    for item in removed:
        print(f"removed {item}")
    if not removed:
        print(f"nothing to clean for prefix {', '.join(prefixes)}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="qoelab")
    parser.add_argument("-v", "--verbose", action="store_true")
    sub = parser.add_subparsers(dest="command", required=True)
    register(sub)
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING, format="%(name)s: %(message)s"
    )
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
