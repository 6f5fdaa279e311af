"""How fast the block-device layer reads when the network is not in the way (issue 12's "it must not
be the bottleneck"): apt-bdl against nbdkit's memory plugin (and tgtd's null LUN) on loopback, N
active sessions, goodput over a few seconds after a warm-up.

    .venv/bin/python benchmarks/apt_bdl/run.py                      # nbd, N = 1 2 4 8, 5 s each
    .venv/bin/python benchmarks/apt_bdl/run.py --protocols nbd iscsi --sessions 8 --seconds 5
    .venv/bin/python benchmarks/apt_bdl/run.py --out benchmarks/apt_bdl/results.jsonl   # the committed rows

Each result is printed as a JSON line; ``--out`` also appends it, with the machine and code that
measured it, to a file (docs/storage-apt.md quotes benchmarks/apt_bdl/results.jsonl).

Run it on a quiet host: both sides and the helper share its cores.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import time
from pathlib import Path

from qoelab.apt import targets
from qoelab.apt.bdl import BlockDeviceLayer, goodput_bps
from qoelab.hostfacts import run_facts


def measure(protocol: str, sessions: int, seconds: float, warmup: float = 1.0) -> dict:
    prefix = "qlbb" + secrets.token_hex(3)
    port = targets.free_port()
    if protocol == "nbd":
        target = targets.nbd_target(None, "127.0.0.1", port, 1 << 30, "memory", prefix=prefix)
        initiator = None
    else:
        target = targets.iscsi_target(
            None, None, "127.0.0.1", port, None, prefix, targets.free_control_port()
        )
        initiator = f"iqn.2026-11.org.qoelab:{prefix}-initiator"
    with target, BlockDeviceLayer(protocol, target.uri, sessions, sessions, initiator=initiator,
                                  prefix=prefix) as layer:  # fmt: skip
        layer.read_reports(time.monotonic() + warmup)
        first = layer.latest
        last = layer.read_reports(time.monotonic() + seconds)[-1]
    return {"protocol": protocol, "sessions": sessions, "seconds": round(last.t - first.t, 2),
            "goodput_mbps": round(goodput_bps(first, last) / 1e6, 1)}  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--protocols", nargs="+", default=["nbd"], choices=["nbd", "iscsi"])
    parser.add_argument("--sessions", nargs="+", type=int, default=[1, 2, 4, 8])
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--out", type=Path, help="also append each result (with host facts) to this file")
    args = parser.parse_args()
    print(f"# {os.cpu_count()} cores, {time.strftime('%Y-%m-%d')}")
    facts = run_facts()
    for protocol in args.protocols:
        for n in args.sessions:
            row = measure(protocol, n, args.seconds)
            print(json.dumps(row), flush=True)
            if args.out is not None:
                at = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
                with args.out.open("a") as fh:
                    fh.write(json.dumps({**row, "host": facts, "at": at}) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
