#!/usr/bin/env python3
"""Swift reads at the realistic row through connections kept from the reheat, or on a fresh mount.

The batch family reheats the server by reading the set over the unimpaired link right before each
round (the thesis switched its emulator off for that). rclone keeps its HTTP connections, so the
round then runs on connections opened and grown on a 0 ms link. This measures what that does to
Swift on the host client (``swift_client = host``): per round, the set is reheated over the
unimpaired link with 32 threads, then read at 50 ms, 0.1 % loss, ±10 ms jitter (the thesis'
realistic row, reordering as WANem did) either on the same mount (``kept``) or after mounting
afresh (``fresh``, what ``HostClient.cold`` does before every round), for two set sizes.
Rows go to ``results/carryover.jsonl`` (one per round, with the host's CPU); docs/storage-bench.md
("Connections kept from the reheat") has the table.

    .venv/bin/python benchmarks/storage_bench/carryover.py --rounds 2
"""

from __future__ import annotations

import argparse
import json
import secrets
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "workers"))

from qoelab.emulation.topology import emulated_link  # noqa: E402
from qoelab.hostfacts import run_facts  # noqa: E402
from qoelab.jobs.storage_bench import StorageBenchParams  # noqa: E402
from qoelab.storage import iobench, mounts  # noqa: E402
from qoelab.storage.hostclient import host_client  # noqa: E402
from qoelab.storage.swift import swift_target  # noqa: E402
from qoelab.storage.targets import cleanup_leftovers  # noqa: E402

OUT = Path(__file__).with_name("results") / "carryover.jsonl"
MIB = 1 << 20
HOST = run_facts()  # the machine and the code revision of every row


def measure(files: int, threads: int, mode: str, rounds: int) -> list[dict]:
    params = StorageBenchParams(target="swift", family="batch", rtt="50ms", loss="0.1%", jitter="10ms",
                                swift_client="host")  # fmt: skip
    prefix = "qco" + secrets.token_hex(3)
    work = Path(tempfile.mkdtemp(prefix="qoelab-carryover-"))
    rows = []
    try:
        with emulated_link(params.to_profile(), prefix=prefix, backend="userspace") as link:
            (work / "server").mkdir()
            popen, runner = (lambda argv, **kw: link.popen_in("s", argv, **kw),
                             lambda argv, **kw: link.run_in("s", argv, **kw))  # fmt: skip
            with swift_target(popen, runner, link.server_ip, work / "server", prefix) as target, \
                    host_client(link, prefix, work / "client") as client:  # fmt: skip
                mount = lambda: mounts.mount_swift(client.shell, target, home=client.home)  # noqa: E731
                mount()
                where = f"{mounts.MOUNT_POINT}/set"
                run = {"prefix": client.shell.prefix_argv(), "tool": client.tool, "timeout": 900}
                with link.switched(link.profile.unimpaired(), "read set"):
                    iobench.prepare(iobench.PrepareSpec(dir=where, size=MIB, files=files), **run)
                for r in range(rounds):
                    with link.switched(link.profile.unimpaired(), "reheat"):
                        iobench.micro(iobench.MicroSpec(dir=where, op="read", size=MIB, files=files,
                                                        threads=32), **run)  # fmt: skip
                    if mode == "fresh":
                        mounts.unmount(client.shell)
                        mount()
                    res = iobench.micro(iobench.MicroSpec(dir=where, op="read", size=MIB, files=files,
                                                          threads=threads, limit_s=45.0), **run)  # fmt: skip
                    rows.append({"mode": mode, "files": files, "set_mib": files, "threads": threads,
                                 "round": r + 1, "mib_s": res.mib_s, "share": res.mib_s * MIB * 8 / 1e8,
                                 "time_limit_hit": res.time_limit_hit, "rclone": "swift_client=host",
                                 "link": "100 Mbit/s, RTT 50 ms, loss 0.1 %, jitter 10 ms (reordering)",
                                 "tcp": link.tcp.get("client", {}).get("cc"), "host": HOST})  # fmt: skip
                    print(json.dumps(rows[-1]), flush=True)
                mounts.unmount(client.shell)
    finally:
        cleanup_leftovers(prefix)
        shutil.rmtree(work, ignore_errors=True)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=2, help="rounds per mode, set size and thread count")
    args = ap.parse_args()
    OUT.parent.mkdir(exist_ok=True)
    for files in (64, 256):
        for threads in (16, 32):
            for mode in ("kept", "fresh"):
                with OUT.open("a") as f:
                    for row in measure(files, threads, mode, args.rounds):
                        f.write(json.dumps(row) + "\n")


if __name__ == "__main__":
    main()
