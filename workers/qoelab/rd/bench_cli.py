"""``qoelab rd bench``: one slow-motion remote-desktop trial on this machine, as a table or JSON.

Same code path as the ``rd_qoe`` job type (its parameter model validates the flags, its ``run``
builds the link, verifies it and runs the session), with a throw-away work directory. Registered
under the shared ``rd`` group by :func:`register`; stand-alone:
``python -m qoelab.rd.bench_cli bench --protocol vnc --rate 1mbit``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import secrets
import shutil
import signal
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from qoelab.emulation.reuse import measured_or_reused
from qoelab.errors import QoelabError
from qoelab.rd.analyze_cli import get_or_create_rd_parser

# Flags -> rd_qoe parameters (the parameter model checks values, units and bounds).
PARAM_FLAGS = {
    "server": "namespace (default) or vm: the desktop in a QEMU guest (make vm-image first)",
    "vm_start": "with --server vm: snapshot (default; made once per host) or cold (boot every trial)",
    "rate": "bottleneck rate, both directions (e.g. 1mbit; default: unshaped)",
    "delay": "one-way delay (e.g. 10ms)",
    "loss": "random loss per packet (e.g. 0.5%%)",
    "jitter": "delay variation (e.g. 2ms)",
    "pages": "screen updates (clicks), default 3",
    "seed": "workload pages and link PRNG seed, default 1",
    "workload": "pages (default: click through pages) or typing (keystrokes into an editor page)",
    "keystrokes": "with --workload typing: keys typed, default 40",
    "typing_gap": "with --workload typing: mean gap between keys, default 270ms (paper 002's t_II)",
    "quiet": "Q: server silence that ends an update, default 500ms",
    "pause": "P: pause after each update, default 500ms",
    "update_timeout": "an update not finished after this long is a timeout, default 30s",
    "verify_duration": "seconds per TCP test of the link verification, default 2s",
    "vnc_server": "x11vnc (default) or tigervnc",
    "vnc_compresslevel": "TightVNC viewer compression level 0-9, default 9",
    "vnc_quality": "TightVNC viewer JPEG quality 0-9, default 5",
    "vnc_qemu_adaptive": "with --server vm: QEMU's adaptive tight encoding, true (default) or false",
    "spice_image_compression": "SPICE image compression, default auto_glz",
    "x2go_link": "X2Go link quality modem|isdn|adsl|wan|lan, default adsl",
    "x2go_pack": "X2Go compression method, default 16m-jpeg-9",
    "x2go_irlimit": "nxagent -irlimit kB/s, default 1000000 (0 = stock nxagent, see docs/rd-benchmark.md)",
    "tcp_cc": "TCP congestion control in both namespaces, default cubic (the thesis')",
    "tcp_sack": "TCP selective ACKs true|false, default true",
    "tcp_rmem_max": "receive buffer ceiling, e.g. 512kb (default: twice the path's BDP)",
    "tcp_wmem_max": "send buffer ceiling, e.g. 512kb (default: twice the path's BDP)",
    "rto_min": "minimum retransmission timeout on the routes, e.g. 50ms (default: the kernel's 200ms)",
}
INT_PARAMS = {"pages", "seed", "keystrokes", "vnc_compresslevel", "vnc_quality", "x2go_irlimit"}


def register_bench(rd_subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    p = rd_subparsers.add_parser(
        "bench",
        help="run one slow-motion trial locally (VNC, SPICE or X2Go over an emulated link)",
        description=(
            "Build an emulated link, verify it, run a real remote-desktop session across it, click "
            "through workload pages one update at a time and print per update the response time T, the "
            "bytes X and X/T (thesis ch. 4). Needs root. See docs/rd-benchmark.md."
        ),
    )
    p.add_argument("--protocol", required=True, help="vnc, spice or x2go")
    for name, help_text in PARAM_FLAGS.items():
        p.add_argument(
            f"--{name.replace('_', '-')}", dest=name, default=None, metavar="VALUE", help=help_text
        )
    p.add_argument("--keep", metavar="DIR", help="keep the trial's files (pcap, clicks.json, logs) in DIR")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.set_defaults(func=run_bench_cli)
    return p


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``rd bench`` to a top-level ``qoelab`` sub-command table."""
    register_bench(get_or_create_rd_parser(subparsers))


def raw_params(args: argparse.Namespace) -> dict[str, Any]:
    raw: dict[str, Any] = {"protocol": args.protocol, "pages": 3}
    for name in PARAM_FLAGS:
        value = getattr(args, name)
        if value is None:
            continue
        if name in INT_PARAMS:
            # Not an integer: the model names the field and says what it wants.
            with contextlib.suppress(ValueError):
                value = int(value)
        raw[name] = value
    return raw


def _fmt(value: float | None, spec: str) -> str:
    return "—" if value is None else format(value, spec)


def print_table(doc: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console()
    if not console.is_terminal:
        console = Console(width=160)
    link = doc["link"]
    meas = link.get("measured", {})
    # A short check (pings) leans on an earlier full run of the same condition: its TCP figure
    # is that run's, and the line says so rather than printing a throughput nobody measured.
    down_bps = measured_or_reused(link, "tcp_down_bps")
    down = _fmt(None if down_bps is None else down_bps / 1e6, ".2f")
    reused = link.get("reused")
    source = f" (full check {reused['age_s']:.0f} s ago)" if reused else ""
    console.print(
        f"{doc['protocol']} over {doc['link_profile']}: link measured TCP down "
        f"{down} Mbit/s{source}, RTT {_fmt(meas.get('rtt_ms'), '.1f')} ms, "
        f"TCP {link.get('link', {}).get('tcp', {}).get('cc')} "
        f"(checks {'ok' if link.get('ok') else 'NOT ok'})",
        highlight=False,
        soft_wrap=True,
    )
    table = Table(padding=(0, 1))
    for col in ("#", "page", "ratio", "T ms", "pixel ms", "X B", "X/T Mbit/s", "up B", "pkt ↓/↑", "rtx",
                "status"):  # fmt: skip
        table.add_column(col, justify="left" if col == "status" else "right", no_wrap=True)
    for u in doc["updates"]:
        status = "[red]timed out[/red]" if u["timed_out"] else "ok"
        if u["disagree"]:
            status += " [yellow]pixel≠packet[/yellow]"
        if u["extended_to_pixels"]:
            status += " (extended)"
        table.add_row(
            str(u["index"]),
            repr(u["key"]) if "key" in u else "" if u["page"] is None else str(u["page"]),
            "" if u.get("ratio") is None else f"{u['ratio']:g}",
            _fmt(u["T_ms"], ".1f"),
            _fmt(u["pixel_ms"], ".1f"),
            str(u["bytes_down"]),
            _fmt(None if u["rate_bps"] is None else u["rate_bps"] / 1e6, ".3f"),
            str(u["bytes_up"]),
            f"{u['packets_down']}/{u['packets_up']}",
            str(u["retransmissions"]),
            status,
        )
    console.print(table)
    s = doc["summary"]
    t_mean, t_median, x_mean = (
        _fmt(s.get("T_ms"), ".1f"),
        _fmt(s.get("T_ms_median"), ".1f"),
        _fmt(s.get("bytes_down"), ".0f"),
    )
    console.print(
        f"n={int(s.get('n', 0))} timed out={int(s.get('n_timed_out', 0))}  T ms: mean {t_mean}, "
        f"median {t_median}  |  X bytes: mean {x_mean}  |  "
        f"X/T Mbit/s: mean {_fmt((s['rate_bps'] / 1e6) if 'rate_bps' in s else None, '.3f')}  |  "
        f"setup {_fmt(s.get('setup_s'), '.1f')} s, teardown {_fmt(s.get('teardown_s'), '.1f')} s",
        highlight=False,
        soft_wrap=True,
    )
    tc = doc.get("provenance", {}).get("thinclient_classify") or {}
    if tc.get("error"):
        console.print(f"paper 002's flow rule: no classification ({tc['error']})", highlight=False)
    elif tc:
        paper = tc.get("paper") or {}
        values = ", ".join(
            f"{k} {_fmt(tc.get(k), '.2f')} (paper {_fmt(paper.get(k), '.2f')})"
            for k in ("alpha", "beta", "p_I", "c_B")
        )
        port = tc.get("server_port")  # None in VM mode: every port of the server's address
        where = f"port {port}" if port else "every port of the server"
        console.print(
            f"paper 002's flow rule (tau {tc['tau_s'] * 1e3:.2f} ms) on {where}: "
            f"{tc['flows_interactive']} interactive, {tc['flows_bulk']} bulk flows; {values}",
            highlight=False,
            soft_wrap=True,
        )
    if "echo_ms" in s:
        console.print(
            f"keystroke echo ms (key to first answer): mean {_fmt(s['echo_ms'], '.1f')}, "
            f"median {_fmt(s.get('echo_ms_median'), '.1f')}",
            highlight=False,
        )
    vm = doc.get("provenance", {}).get("vm")
    if vm:
        restore = f", restore {vm['restore_s']} s" if vm.get("restore_s") is not None else ""
        console.print(
            f"guest: {vm['accel']} ({vm['accel_reason']}), {vm['start']} start{restore}, ready after "
            f"{vm['boot_to_ready_s']} s, teardown {vm['teardown_s']} s"
            + (f"; snapshot not used: {vm['snapshot_error']}" if vm.get("snapshot_error") else ""),
            highlight=False,
            soft_wrap=True,
        )
    if doc.get("kept"):
        console.print(f"files kept in {doc['kept']}", highlight=False)


def bench(raw: dict[str, Any], workdir: Path, log: logging.Logger | None = None) -> dict[str, Any]:
    """Run one trial through the job type; return ``{updates, summary, link, ...}``."""
    from qoelab import jobs
    from qoelab.jobtype import TrialContext
    from qoelab.params import validate_params

    job = jobs.get("rd_qoe")
    params = validate_params(job.params, raw)
    # Not "ql": a worker starting on this host cleans every ql* trial it finds.
    prefix = "qrb" + secrets.token_hex(3)
    ctx = TrialContext(trial_id="bench", workdir=workdir, prefix=prefix,
                       log=log or logging.getLogger("qoelab.rd.bench_cli"))  # fmt: skip
    result = job.run(params, ctx)
    # Typing: one "keystroke" sample per key, shown like an update (its key in the page column).
    updates = [{"index": s.index, **s.values} for s in result.samples if s.kind in ("update", "keystroke")]
    return {
        "protocol": params.protocol,
        "params": params.model_dump(mode="json"),
        "link_profile": params.to_profile(seed=params.seed).down.describe(),
        "updates": updates,
        "summary": result.summary,
        "link": result.link,
        "provenance": result.provenance,
        "artifacts": [str(a.path) for a in ctx.artifacts],
    }


def run_bench_cli(args: argparse.Namespace) -> int:
    if os.geteuid() != 0:
        print(
            "qoelab rd bench: needs root (network namespaces, X servers); run it with sudo", file=sys.stderr
        )
        return 2
    workdir = Path(tempfile.mkdtemp(prefix="qoelab-rd-bench-"))
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    # Ctrl-C and SIGTERM unwind through the link's and the session's teardown.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    try:
        doc = bench(raw_params(args), workdir)
        if args.keep:
            dest = Path(args.keep)
            shutil.copytree(workdir, dest, dirs_exist_ok=True)
            doc["kept"] = str(dest)
    except QoelabError as err:
        print(f"qoelab rd bench: {err}", file=sys.stderr)
        return 2
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    if args.json:
        out = {k: doc[k] for k in ("updates", "summary", "link", "protocol", "params", "provenance")}
        json.dump(out, sys.stdout, indent=1, default=str)
        sys.stdout.write("\n")
    else:
        print_table(doc)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="qoelab rd", description="Remote-desktop QoE tools (stand-alone).")
    register_bench(parser.add_subparsers(dest="rd_command", metavar="COMMAND", required=True))
    args = parser.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
