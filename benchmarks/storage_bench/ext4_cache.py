"""What a cache drop leaves of ext4's metadata in the client guest (thesis 001, §5.7 amplification).

The thesis read 40 + 92 KiB of ext4 metadata around a 4 KiB iSCSI read and wrote 16 KiB back; the
lab's first single-file runs moved the file's 4 KiB and nothing else. This probe boots the client
guest once, mounts ext4 on a 1 GiB iSCSI LUN (as the ``single`` family's: 4 KiB blocks) over an
unimpaired 100 Mbit/s link and, step by step, reads the block device's own counters
(``/sys/block/<dev>/stat``) and the emulator's bytes around one command, after a given way of
making the client's cache cold:

- a plain ``sync; echo 3 > drop_caches`` (what the benchmark tool did), once or three times,
- a freeze and thaw of the file system first (``fsfreeze``, which commits and checkpoints the
  journal), then one drop or three (the tool's ``--cold-metadata``),
- an unmount and mount.

It first fills an inode table with ``--files`` empty files, as the thesis' LUN held its file sets,
and repeats the steps on ``--repeat`` new files.

    .venv/bin/python benchmarks/storage_bench/ext4_cache.py [--files 3000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import functools
import secrets
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "workers"))

from qoelab.emulation import LinkProfile, emulated_link  # noqa: E402
from qoelab.storage import iobench, mounts  # noqa: E402
from qoelab.storage.guest import client_guest  # noqa: E402
from qoelab.storage.measure import counters  # noqa: E402
from qoelab.storage.scenarios import thesis_tcp  # noqa: E402
from qoelab.storage.targets import cleanup_leftovers, iscsi_target  # noqa: E402

M = mounts.MOUNT_POINT
DROP = "sync; echo 3 > /proc/sys/vm/drop_caches"
DROP3 = f"{DROP}; {DROP}; {DROP}"
FREEZE = f"sync; fsfreeze -f {M}; fsfreeze -u {M}"
REMOUNT = f"umount {M}; mount /dev/{{dev}} {M}"
HOW = {DROP: "one drop", DROP3: "three drops", f"{FREEZE}; {DROP}": "freeze, thaw, one drop",
       f"{FREEZE}; {DROP3}": "freeze, thaw, three drops (`--cold-metadata`)", REMOUNT: "unmount, mount",
       "": "nothing"}  # fmt: skip
# (what is measured, how the cache was made cold before it, the command measured); {d}: this repetition's
STEPS = (
    ("a 4 KiB file written a second ago: read", DROP, "cat {d}/f"),
    ("the cache-clean sync after that read", "", "sync"),
    ("the same file: read", DROP3, "cat {d}/f"),
    ("the same file: read", f"{FREEZE}; {DROP}", "cat {d}/f"),
    ("the same file: read", f"{FREEZE}; {DROP3}", "cat {d}/f"),
    ("the same file: read", REMOUNT, "cat {d}/f"),
    ("stat of a file among --files others", DROP, "stat {m}/f{a}"),
    ("stat of another", f"{FREEZE}; {DROP3}", "stat {m}/f{b}"),
)


def probe(files: int, repeat: int) -> list[tuple[int, str, str, float, float, int]]:
    prefix = "qxc" + secrets.token_hex(3)
    profile = LinkProfile.parse(rate="100mbit", tcp=thesis_tcp())
    work = Path(tempfile.mkdtemp(prefix="qoelab-ext4-cache-"))
    rows = []
    try:
        with emulated_link(profile, prefix=prefix, backend="userspace") as link:
            popen, run = functools.partial(link.popen_in, "s"), functools.partial(link.run_in, "s")
            lun_cm = iscsi_target(popen, run, link.server_ip, work / "srv", prefix, size_bytes=1 << 30)
            with lun_cm as lun, client_guest(link, prefix, work / "vm", tools=[iobench.binary()]) as client:
                sh = client.shell
                dev = mounts.mount_iscsi(sh, lun, link.server_ip)["device"]

                def disk() -> tuple[int, int]:
                    f = sh.run(f"cat /sys/block/{dev}/stat", timeout=30).stdout.split()
                    return int(f[2]) * 512, int(f[6]) * 512  # sectors read, written

                sh.run(f"mkdir -p {M}/many && cd {M}/many && for i in $(seq 1 {files}); do : > f$i; done",
                       timeout=1800)  # fmt: skip
                for rep in range(1, repeat + 1):
                    d, m = f"{M}/d{rep}", f"{M}/many"
                    sh.run(f"mkdir -p {d} && head -c 4096 /dev/urandom > {d}/f && sync", timeout=60)
                    for what, cold, command in STEPS:
                        if cold:
                            sh.run(cold.format(dev=dev), timeout=300)
                        (r0, w0), c0 = disk(), counters(link)
                        sh.run(command.format(d=d, m=m, a=100 * rep, b=100 * rep + 50) + " > /dev/null",
                               timeout=300)  # fmt: skip
                        (r1, w1), c1 = disk(), counters(link)
                        rows.append((rep, what, HOW[cold], (r1 - r0) / 1024, (w1 - w0) / 1024, c1[1] - c0[1]))
                mounts.unmount(sh)
    finally:
        cleanup_leftovers(prefix)
        shutil.rmtree(work, ignore_errors=True)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--files", type=int, default=3000, help="empty files made first (default 3000)")
    ap.add_argument("--repeat", type=int, default=3, help="the steps on this many new files (default 3)")
    args = ap.parse_args()
    print("| # | step | cache made cold by | KiB read | KiB written | link bytes |")
    print("|---|---|---|---|---|---|")
    for rep, what, how, read, written, link_bytes in probe(args.files, args.repeat):
        print(f"| {rep} | {what} | {how} | {read:g} | {written:g} | {link_bytes:,} |")


if __name__ == "__main__":
    main()
