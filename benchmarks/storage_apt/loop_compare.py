"""apt-bdl's client CPU per bit with its earlier ppoll loop and its epoll loop, side by side.

The ppoll build is built from the commit before the epoll loop (fc44c87~1) into a temporary file;
NBD at the job type's defaults, APT and fixed N = 64 (64 sessions open either way), no warm-up,
the builds alternating. One JSON line per trial to loop-compare.jsonl.

    .venv/bin/python benchmarks/storage_apt/loop_compare.py --reps 2
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
PPOLL_COMMIT = "fc44c87~1"
SOURCES = ("bdl.c", "bdl.h", "session.c")


def build_ppoll(workdir: Path) -> Path:
    for name in SOURCES:
        spec = f"{PPOLL_COMMIT}:workers/qoelab/apt/csrc/{name}"
        shown = subprocess.run(
            ["git", "-C", str(REPO), "show", spec], capture_output=True, text=True, check=True
        )
        (workdir / name).write_text(shown.stdout)
    flags = subprocess.run(["pkg-config", "--cflags", "--libs", "libnbd", "libiscsi"], capture_output=True,
                           text=True, check=True).stdout.split()  # fmt: skip
    binary = workdir / "apt-bdl-ppoll"
    subprocess.run(["gcc", "-O2", "-std=gnu11", "-o", str(binary), str(workdir / "bdl.c"),
                    str(workdir / "session.c"), *flags], check=True)  # fmt: skip
    return binary


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=2)
    args = parser.parse_args()
    sys.path.insert(0, str(HERE))
    from run import run_one

    log = logging.getLogger("qoelab.apt.loop_compare")
    points = ({"transport": "nbd", "mode": "apt"}, {"transport": "nbd", "mode": "fixed", "sessions": 64})
    with tempfile.TemporaryDirectory() as tmp, (HERE / "loop-compare.jsonl").open("a") as out:
        builds = {"ppoll": build_ppoll(Path(tmp)), "epoll": REPO / "workers" / "build" / "apt-bdl"}
        for _ in range(args.reps):
            for name, binary in builds.items():
                os.environ["QOELAB_APT_BDL"] = str(binary)
                for point in points:
                    raw = {"rate": "200mbit", "delay": "20ms", "steady": "15s", "warmup": "0s", **point}
                    row = {"build": name, "point": point, **run_one(raw, log)}
                    out.write(json.dumps(row) + "\n")
                    out.flush()
                    s = row.get("summary") or {}
                    goodput = s.get("goodput_steady_bps", 0) / 1e6
                    ticks = s.get("cpu_ticks_per_bit_client", 0) * 1e9
                    print(
                        f"{name} {point}: {goodput:.1f} Mbit/s, {ticks:.1f} client ticks/Gbit",
                        row.get("error") or "",
                    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
