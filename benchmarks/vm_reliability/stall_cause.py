"""The guest browser's stall on purpose: cold boots with Chromium's own 15 s child timeout, or the image's.

A guest is booted (TCG, in a private namespace, the kiosk on its start page, no trial) with QEMU
held to ``--cpu-quota`` cores, alternately with ``qoelab.ipc_timeout=15`` on the kernel command
line (Chromium's default ``--ipc-connection-timeout``, as the image had before the fix) and without
it (the image's 600 s). For each boot: whether and when the console browser showed its page
(``QOELAB-PAGE-SHOWN``), its restarts and whether it gave up (ttyS1), and how many of its child
processes ended themselves ("Terminating current process after N seconds with no connection") in
the browser log of its last start (read over ssh as root with the image's key).

    sudo .venv/bin/python benchmarks/vm_reliability/stall_cause.py --boots 3 --cpu-quota 0.6 \
        --out benchmarks/vm_reliability/stall-cause.json
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from run import host_facts  # noqa: E402  (this folder's benchmark runner)

NO_CONNECTION = "seconds with no connection"
WAIT_S = 900  # per boot: QEMU start to page shown, or the browser giving up


def guest_ssh(ns: str, key: Path, command: str) -> str:
    from qoelab.vm.guest import GUEST_IP

    options = [
        "-o",
        "StrictHostKeyChecking=no",
        "-o",
        "UserKnownHostsFile=/dev/null",
        "-o",
        "ConnectTimeout=10",
    ]
    argv = ["ip", "netns", "exec", ns, "ssh", "-q", "-i", str(key), *options, f"root@{GUEST_IP}", command]
    res = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)
    return res.stdout


def one_boot(ipc_timeout: int | None, workdir: Path) -> dict[str, Any]:
    from qoelab.emulation.system import create_netns
    from qoelab.vm.guest import GuestNotReadyError, running_guest
    from qoelab.vm.image import load_image

    image = load_image()
    ns = "qvs" + os.urandom(3).hex()
    create_netns(ns)
    row: dict[str, Any] = {"ipc_timeout": ipc_timeout or 600}
    t0 = time.monotonic()

    def until_shown_or_given_up(guest: Any, proc: Any, deadline: float) -> None:
        while time.monotonic() < deadline and proc.poll() is None:
            log = guest.ready_log
            lines = log.read_text(errors="replace").splitlines() if log.exists() else []
            if any(line.startswith(("QOELAB-PAGE-SHOWN console", "QOELAB-BROWSER-GAVE-UP console"))
                   for line in lines):  # fmt: skip
                return
            time.sleep(1)
        raise GuestNotReadyError(f"neither shown nor given up within {WAIT_S} s")

    extra = [f"qoelab.ipc_timeout={ipc_timeout}"] if ipc_timeout else []
    try:
        booted = running_guest(
            ns, workdir, ns=ns, image=image, accel="tcg", vnc_display=None, spice_port=None,
            extra_append=extra, ready=until_shown_or_given_up, ready_timeout=WAIT_S,
        )  # fmt: skip
        with booted as g:
            lines = g.ready_log.read_text(errors="replace").splitlines()
            shown = next((line for line in lines if line.startswith("QOELAB-PAGE-SHOWN console")), None)
            row |= {
                "shown": shown is not None,
                "shown_at_uptime_s": float(shown.split()[3]) if shown else None,
                "qemu_start_to_shown_s": round(time.monotonic() - t0, 1) if shown else None,
                "restarts": sum(line.startswith("QOELAB-BROWSER-RESTART console") for line in lines),
                "gave_up": any(line.startswith("QOELAB-BROWSER-GAVE-UP console") for line in lines),
                "ttyS1": lines,
                "cpu_quota": g.cpu_quota,
            }
            log = guest_ssh(ns, image.directory / "root-key", "cat /tmp/qoelab-chromium.log")
            row["children_ended_without_connection"] = log.count(NO_CONNECTION)
            row["log_lines"] = [line[:300] for line in log.splitlines() if NO_CONNECTION in line
                                or "Network service crashed" in line][:10]  # fmt: skip
    except GuestNotReadyError as err:
        row |= {"shown": False, "error": str(err)[:600]}
    finally:
        subprocess.run(["ip", "netns", "del", ns], check=False)
    return row


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--boots", type=int, default=3, help="per setting")
    ap.add_argument("--cpu-quota", type=float, default=0.6)
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args(argv)
    os.environ["QOELAB_VM_CPU_QUOTA"] = str(args.cpu_quota)
    from qoelab.vm.throttle import cpu_quota_from_env

    doc: dict[str, Any] = {"host": host_facts(cpu_quota_from_env()), "boots": []}
    for i in range(args.boots):
        for ipc in (15, None):
            with tempfile.TemporaryDirectory(prefix="qoelab-stall-") as tmp:
                row = one_boot(ipc, Path(tmp)) | {"boot": i}
            doc["boots"].append(row)
            args.out.write_text(json.dumps(doc, indent=1) + "\n")
            print(f"[{i}] ipc timeout {row['ipc_timeout']} s: shown {row['shown']} after "
                  f"{row.get('qemu_start_to_shown_s')} s, restarts {row.get('restarts')}, gave up "
                  f"{row.get('gave_up')}, children ended {row.get('children_ended_without_connection')}",
                  flush=True)  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
