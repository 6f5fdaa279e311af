"""``qoelab storage bench``: one storage benchmark run on this host (thesis 001), a line per round.

The link is the thesis' (an RTT applied as RTT/2 each way, loss and jitter on both directions:
``scenarios``) with its TCP (CUBIC, 16 MiB buffer ceilings, ``tcp_no_metrics_save``; Fig. 3.2) in
the namespaces and the client guest. ``--scenario`` takes a named row of the thesis' tables instead.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import secrets
import shutil
import signal
import sys
import tempfile
from pathlib import Path
from typing import Any

from qoelab.errors import ParameterError

EPILOG = """\
families: metadata (n x mkdir, touch, one ls, unlink, rmdir; notes/seed-storage-bench.md §3.6);
batch (whole-file reads or writes of a file set by a pool of threads, one round per thread count,
the server reheated over the unimpaired link before each read round; §3.3-§3.5); single (one file of
--file-size, one thread; amplification = link bytes / file size; §3.5); unit (one file of --file-size,
default 16mb, read or written in each of --units; Fig. 4.2); postmark (PostMark 1.53, 500 files of
5-512 KiB, --transactions, unbuffered; §4.1); varmail, fileserver (FileBench's personalities,
emulated, preallocated over the unimpaired link, then --seconds; §4.2).
The client is the lab's QEMU guest (make vm-image); the targets run in the server namespace:
nfs-ganesha (NFSv4), tgt (iSCSI, ext4 in the guest) and a Swift all-in-one (rclone mount).

examples:
  qoelab storage bench --target nfs --family metadata --rtt 50ms
  qoelab storage bench --target swift --family metadata --scenario realistic --n 1,10 --json
  qoelab storage bench --target iscsi --family batch --op read --form sync --file-size 1mb --threads 1,8,32
  qoelab storage bench --target iscsi --family single --op write --file-size 4kb --form sync
  qoelab storage bench --target nfs --family unit --op read --units 4kb,64kb,1mb,16mb --rtt 50ms
  qoelab storage bench --target nfs --family postmark --scenario latency --transactions 2500
  qoelab storage bench --target swift --family varmail --scenario realistic --seconds 120
"""


def register(subparsers: Any) -> None:
    st = subparsers.add_parser("storage", help="storage benchmarking of thesis 001 (NFS, iSCSI, Swift)")
    sub = st.add_subparsers(dest="storage_command", metavar="COMMAND", required=True)
    b = sub.add_parser(
        "bench",
        help="one benchmark run: a target across the emulated link, the client in the guest",
        description="Run one storage benchmark here (needs root, the guest image and KVM or TCG).",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    b.add_argument("--target", required=True, help="nfs, iscsi or swift")
    b.add_argument("--family", default="metadata", help="what to run (default metadata)")
    b.add_argument("--scenario", help="ideal, latency, loss or realistic (the thesis' rows)")
    b.add_argument("--rate", default="100mbit", help="link rate (default 100mbit)")
    b.add_argument("--rtt", default="0ms", help="round-trip time, applied as RTT/2 each way")
    b.add_argument("--loss", default="0%", help="random loss on each direction")
    b.add_argument("--jitter", default="0ms", help="normal jitter (sigma) on each direction")
    b.add_argument("--n", default="1,10,100", help="metadata: operations per kind, comma-separated")
    b.add_argument("--scheduler", default="mq-deadline", help="iSCSI: the guest's scheduler (bfq for CFQ)")
    b.add_argument("--op", default="read", help="batch: read or write")
    b.add_argument("--form", help="batch: direct or sync (NFS, iSCSI; default direct), default (Swift)")
    b.add_argument("--file-size", help="batch, single: bytes per file = access unit (default 1mb); "
                   "unit: the file (default 16mb)")  # fmt: skip
    b.add_argument("--set-size", default="64mb", help="batch: the file set (thesis: 2gb; default 64mb)")
    b.add_argument("--threads", default="1,4,16", help="batch: thread counts, one round each")
    b.add_argument("--limit", default="90s", help="batch, single, unit: per-round time limit (default 90s)")
    b.add_argument("--units", default="4kb,64kb,1mb,16mb", help="unit: access units, one round each")
    b.add_argument("--transactions", default="25000", help="postmark: transactions (thesis: 25000)")
    b.add_argument("--seconds", default="120s", help="varmail, fileserver: run phase (thesis: 120s)")
    b.add_argument("--files", help="postmark, varmail, fileserver: files (default 500, 1000, 10000)")
    b.add_argument("--disk-rate", help="throttle the target's disk, MiB/s read/write: thesis (110/100), R/W")
    b.add_argument("--capture", metavar="PCAP", help="keep a capture of the link's server side (headers) "
                   "here; metadata: each kind's requests decoded from it")  # fmt: skip
    b.add_argument("--guest-start", default="snapshot", help="the client guest: snapshot (restored from "
                   "the host's saved state, made once) or cold (booted)")  # fmt: skip
    b.add_argument(
        "--swift-client",
        default="guest",
        help="Swift: rclone in the guest, or host (in the "
        "link's client namespace, free of the guest's CPU ceiling: batch, single, unit)",
    )
    b.add_argument("--json", action="store_true", help="print the result as JSON")
    b.set_defaults(func=cmd_bench)


def bench_params(args: argparse.Namespace) -> tuple[Any, Any]:
    """The options as a ``storage_bench`` trial's parameters (validated as the dashboard validates
    them), and the engine's run with the CLI's lists of n, thread counts and units put back."""
    from qoelab.jobs.storage_bench import StorageBenchParams, storage_run
    from qoelab.params import validate_params
    from qoelab.storage.scenarios import scenario
    from qoelab.units import parse_bytes

    counts, threads = _counts("--n", args.n), _counts("--threads", args.threads)
    units = tuple(parse_bytes(u, "--units") for u in args.units.split(","))
    if args.scenario:
        link = scenario(args.scenario).job_params(args.rate)
    else:
        link = {"rate": args.rate, "rtt": args.rtt, "loss": args.loss, "jitter": args.jitter}
    point = {
        **link, "target": args.target, "family": args.family, "scheduler": args.scheduler, "op": args.op,
        "form": args.form, "file_size": args.file_size or ("16mb" if args.family == "unit" else "1mb"),
        "set_size": args.set_size, "time_limit": args.limit, "transactions": args.transactions,
        "seconds": args.seconds, "files": args.files, "disk_rate": args.disk_rate, "verify_duration": 0,
        "guest_start": args.guest_start, "swift_client": args.swift_client,
        # the lists' largest values meet the job's upper bounds; the engine checks every value
        "meta_n": max(counts), "threads": max(threads), "unit": max(units),
    }  # fmt: skip
    params = validate_params(StorageBenchParams, point)
    run = storage_run(params)
    capture = Path(args.capture).resolve() if args.capture else None
    run = dataclasses.replace(run, meta_n=counts, threads=threads, capture_path=capture,
                              units=units if args.family == "unit" else run.units)  # fmt: skip
    return params, run


def _client_line(guest: dict[str, Any]) -> str:
    if guest.get("accel") is None and guest.get("where"):
        return "rclone on the host"
    return f"{guest.get('accel')} guest"


def cmd_bench(args: argparse.Namespace) -> int:
    from qoelab.storage.trial import run_storage

    params, run = bench_params(args)
    if os.geteuid() != 0:
        print("qoelab storage bench: needs root (namespaces, the guest's tap, mounts)", file=sys.stderr)
        return 2
    rtt_ms = float(params.rtt) * 1e3

    def on_row(row: dict[str, Any]) -> None:
        if not args.json and row.get("family") in ("batch", "single", "unit"):
            amp = "—" if row["amplification"] is None else f"{row['amplification']:.2f}"
            limit = ", time limit hit" if row["time_limit_hit"] else ""
            what = f"unit={row['unit']:<9}" if row["family"] == "unit" else f"threads={row['threads']:<3}"
            cpu = "" if row.get("cpu_client") is None else f"; guest CPU {row['cpu_client']:.0%}"
            print(
                f"{what} {row['op']} {row['form']} {row['files']} x {row['file_size']}: "
                f"{row['mib_s']:8.2f} MiB/s  {row['serviced']} done, {row['failed']} failed{limit}; "
                f"amplification {amp}{cpu}",
                flush=True,
            )
        elif not args.json:
            kb = "—" if row["bytes"] is None else f"{row['bytes'] / 1e3:.1f} kB"
            print(
                f"n={row['n']:<5} {row['op']:<6} {row['seconds']:8.3f} s  {row['per_op_ms']:8.1f} ms/op  "
                f"{row['packets'] if row['packets'] is not None else '—':>6} packets  {kb}",
                flush=True,
            )

    workdir = Path(tempfile.mkdtemp(prefix="qoelab-storage-run-"))
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # unwind through the teardown
    try:
        # Not "ql": a worker starting on this host cleans every ql* trial it finds.
        out = run_storage(run, "qsb" + secrets.token_hex(3), workdir, on_row=on_row)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    if args.json:
        ops = [
            {
                k: r.get(k)
                for k in (
                    "op",
                    "n",
                    "seconds",
                    "per_op_ms",
                    "packets",
                    "bytes",
                    "failed",
                    "requests",
                    "request_ops",
                )
            }  # fmt: skip
            for r in out.ops
        ]
        result = {"target": params.target, "rtt_ms": rtt_ms, "ops": ops, "rounds": out.rounds,
                  "link": out.link, "mount": out.mount, "guest": out.guest, "target_config": out.target,
                  "macro": out.macro, "cpu": out.cpu}  # fmt: skip
        print(json.dumps(result, default=str))
    else:
        if out.macro:
            print(macro_line(out.macro), flush=True)
        print(
            f"{params.target} at RTT {rtt_ms:g} ms; client: {_client_line(out.guest)}, "
            f"kernel {out.guest.get('kernel')}; mount {out.mount.get('fstype')} {out.mount.get('options')}"
        )
    return 0


def macro_line(m: dict[str, Any]) -> str:
    """PostMark's time and TPS, or a FileBench personality's IOPS in total and per flowop."""
    cpu = m.get("cpu") or {}
    tail = "" if not cpu else f"; guest CPU {cpu['cpu_client']:.0%}, server {cpu['cpu_server']:.1f} CPU s"
    if m["benchmark"] == "postmark":
        tps = "—" if m.get("tps") is None else m["tps"]
        return f"postmark: {m['transactions']} transactions, {m['seconds']} s total, {tps} per second{tail}"
    ops = ", ".join(f"{k} {v}" for k, v in m["ops"].items())
    return f"{m['benchmark']} (emulated): {m['iops']:.1f} IOPS over {m['seconds']:.1f} s ({ops}){tail}"


def _counts(option: str, text: str) -> tuple[int, ...]:
    try:
        return tuple(int(x) for x in text.split(","))
    except ValueError:
        raise ParameterError(option, f"takes comma-separated counts such as 1,10,100, got {text!r}") from None
