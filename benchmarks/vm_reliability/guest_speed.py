"""How fast a guest runs: a fixed workload timed in the guest, restored from the saved state.

    sudo .venv/bin/python benchmarks/vm_reliability/guest_speed.py [--quota 0.6] [--reps 5] [--out FILE]
    sudo .venv/bin/python benchmarks/vm_reliability/guest_speed.py --calibrate SECONDS

The slowed condition of the reliability benchmark was first "QEMU held to 0.6 of a core", but the
same quota made a guest 2.7 times slower on one machine than on another (docs/vm.md). A condition
that means the same everywhere is a guest *speed*: this restores the host's saved desktop state in a
private namespace (no page server: the guest stays on its start page, as trials find it before
their page server answers), logs in as root over ssh and times ``WORKLOAD`` (a fixed amount of
SHA-256 in the guest's coreutils) ``reps`` times from the host, less an empty command's time over
the same connection. ``--calibrate`` finds the CPU quota at which that time is the target, within
``TOLERANCE``, probing a few quotas (the time goes as 1 / quota while the quota is the limit).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "workers"))

WORKLOAD = "head -c 160M /dev/zero | sha256sum >/dev/null"
TOLERANCE = 0.15  # a found quota gives the target within 15 % (medians of 5 differed by 12 %)
MAX_PROBES = 6
QUOTA_RANGE = (0.1, 4.0)  # cores; beyond the top a quota holds nothing on a 2-core host


def measure(quota: float | None, reps: int = 5) -> dict[str, Any]:
    """The workload's time in a guest restored with QEMU held to ``quota`` cores (None: not held)."""
    from pyroute2 import netns

    from qoelab.emulation.system import create_netns
    from qoelab.vm.guest import resolve_accel, running_guest
    from qoelab.vm.image import load_image
    from qoelab.vm.qemu import DEFAULT_MEMORY_MB
    from qoelab.vm.shell import GuestShell, wait_for_ssh
    from qoelab.vm.snapshot import get_snapshot

    if quota is None:
        os.environ.pop("QOELAB_VM_CPU_QUOTA", None)
    else:
        os.environ["QOELAB_VM_CPU_QUOTA"] = f"{quota:.3f}"
    image = load_image()
    accel, _ = resolve_accel("auto", image)
    prefix = "qgs" + str(int(time.time() * 1000) % 1000000)
    ns = f"{prefix}v"
    with tempfile.TemporaryDirectory(prefix="qoelab-speed-") as tmp:
        # The saved state first: making it (none on this host yet) takes the namespace <prefix>v
        # for its own boot and removes it after.
        snap = get_snapshot(image, accel, prefix, DEFAULT_MEMORY_MB, Path(tmp) / "snapshot")
    create_netns(ns)
    try:
        with tempfile.TemporaryDirectory(prefix="qoelab-speed-") as tmp:
            shell = GuestShell(ns, image.directory / "root-key", prefix)
            guest_cm = running_guest(
                prefix, Path(tmp) / "vm", ns=ns, accel=accel, vnc_display=None, spice_port=None,
                snapshot=snap, ready=lambda guest, proc, deadline: wait_for_ssh(shell, guest, proc, deadline),
            )  # fmt: skip
            try:
                with guest_cm as guest:
                    empty = [_timed(shell, "true") for _ in range(3)]
                    times = [_timed(shell, WORKLOAD) for _ in range(reps)]
                    start = guest.start
            finally:
                shell.close()
    finally:
        netns.remove(ns)
        os.environ.pop("QOELAB_VM_CPU_QUOTA", None)
    overhead = statistics.median(empty)
    net = [round(t - overhead, 3) for t in times]
    return {"quota": quota, "start": start, "accel": accel, "ssh_overhead_s": round(overhead, 3),
            "workload_s": net, "median_s": round(statistics.median(net), 3)}  # fmt: skip


def _timed(shell: Any, command: str) -> float:
    t0 = time.monotonic()
    shell.run(command, timeout=600)
    return time.monotonic() - t0


def calibrate(
    target_s: float,
    first_quota: float = 0.6,
    reps: int = 5,
    probe: Callable[[float | None, int], Any] = measure,
) -> dict[str, Any]:
    """The quota at which the workload takes ``target_s`` here, with every probe that found it.

    ``quota`` is None when the guest is that slow or slower without a quota (the host is slower than
    the condition: it runs unheld, and ``slower_than_target`` says so). ``probe`` is ``measure``.
    """
    unheld = probe(None, reps)
    probes = [unheld]
    if unheld["median_s"] >= target_s * (1 - TOLERANCE):
        return {"target_s": target_s, "quota": None, "slower_than_target": True, "probes": probes}
    quota = first_quota
    for _ in range(MAX_PROBES):
        found = probe(quota, reps)
        probes.append(found)
        ratio = found["median_s"] / target_s
        if abs(ratio - 1) <= TOLERANCE:
            return {"target_s": target_s, "quota": quota, "slower_than_target": False, "probes": probes}
        low, high = QUOTA_RANGE
        quota = round(min(high, max(low, quota * ratio)), 3)
    raise RuntimeError(f"no quota gave {target_s:g} s within {TOLERANCE:.0%} after {MAX_PROBES} probes: "
                       + ", ".join(f"{p['quota']}: {p['median_s']} s" for p in probes))  # fmt: skip


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quota", type=float, default=None, help="cores QEMU is held to (default: none)")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument(
        "--calibrate", type=float, metavar="SECONDS", help="find the quota for this workload time"
    )
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    if os.geteuid() != 0:
        print("needs root (namespaces, taps, cgroups)", file=sys.stderr)
        return 2
    from qoelab.hostfacts import run_facts

    doc = calibrate(args.calibrate, reps=args.reps) if args.calibrate else measure(args.quota, args.reps)
    doc = {"workload": WORKLOAD, **doc, "host": run_facts()}
    print(json.dumps({k: v for k, v in doc.items() if k != "host"}, indent=1))
    if args.out:
        args.out.write_text(json.dumps(doc, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
