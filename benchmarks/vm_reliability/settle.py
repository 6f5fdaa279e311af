"""How busy a guest restored from a saved state is: QEMU's CPU use, second by second, after the restore.

    sudo .venv/bin/python benchmarks/vm_reliability/settle.py SNAPSHOT_DIR [--seconds 90] [--out FILE]

Made to test whether a state saved while the guest was still busy (boot-time jobs, a page being laid
out) brings that work into every trial restored from it: it does not, a guest on its start page uses
about one core either way (docs/vm.md, "A busy saved state? No."). This restores the state in a
private namespace with no page server and no CPU quota (the guest stays on its start page, as it was
saved) and samples QEMU's user + system time each second; the JSON has the samples and the host.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "workers"))

import psutil  # noqa: E402

from qoelab.hostfacts import run_facts  # noqa: E402
from qoelab.vm.guest import running_guest  # noqa: E402
from qoelab.vm.snapshot import Snapshot  # noqa: E402


def sample(snapshot_dir: Path, seconds: float) -> dict:
    from pyroute2 import netns

    from qoelab.emulation.system import create_netns

    snap = Snapshot(snapshot_dir, json.loads((snapshot_dir / "meta.json").read_text()))
    prefix = "qst" + str(int(time.time()) % 100000)
    ns = f"{prefix}v"
    create_netns(ns)
    samples: list[list[float]] = []
    try:
        with tempfile.TemporaryDirectory(prefix="qoelab-settle-") as tmp:
            t0 = time.monotonic()
            guest_cm = running_guest(
                prefix, Path(tmp), ns=ns, accel=snap.meta["accel"], vnc_display=None, spice_port=None,
                snapshot=snap, ready=lambda guest, proc, deadline: None,
            )  # fmt: skip
            with guest_cm as guest:
                proc = psutil.Process(guest.pid)
                last_t, last = time.monotonic(), sum(proc.cpu_times()[:2])
                while time.monotonic() - t0 < seconds:
                    time.sleep(1.0)
                    now, spent = time.monotonic(), sum(proc.cpu_times()[:2])
                    samples.append([round(now - t0, 1), round((spent - last) / (now - last_t), 3)])
                    last_t, last = now, spent
                start = guest.start
    finally:
        netns.remove(ns)
    return {"snapshot": {k: snap.meta.get(k) for k in ("key", "created_at", "boot_to_ready_s",
                                                      "guest_uptime_at_ready_s", "settled", "settle_s")},
            "start": start, "host": run_facts(), "samples": samples}  # fmt: skip


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("snapshot", type=Path, help="a saved state's directory (meta.json, state.bin, disk.qcow2)")
    p.add_argument("--seconds", type=float, default=90.0)
    p.add_argument("--out", type=Path)
    args = p.parse_args()
    doc = sample(args.snapshot, args.seconds)
    cores = [c for _, c in doc["samples"]]
    for lo in range(0, len(cores), 10):
        chunk = cores[lo : lo + 10]
        print(f"{lo:4d}-{lo + len(chunk):3d} s after QEMU started: {sum(chunk) / len(chunk):.2f} cores")
    if args.out:
        args.out.write_text(json.dumps(doc, indent=1) + "\n")


if __name__ == "__main__":
    main()
