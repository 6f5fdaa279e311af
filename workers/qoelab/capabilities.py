"""What this lab host can do: host facts, capability flags and tool versions for the heartbeat.

``detect()`` is honest rather than optimistic: a capability is True only when a cheap probe shows it
works, and every False carries a reason (``reasons``) the CLI and the worker log print. The
backend routes trials by the boolean flags only.

This module probes what every job type stands on (the link, namespaces, TCP algorithms, QEMU,
KVM); each job type's own flags come from the probes it declares (``JobType.probes``).
"""

from __future__ import annotations

import functools
import logging
import os
import platform
import re
import shutil
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import qoelab
from qoelab.hostfacts import code_revision
from qoelab.jobtype import HostProbe, resolve

log = logging.getLogger("qoelab.capabilities")


# tool -> argv that prints its version on the first non-empty line (stdout or stderr)
VERSION_COMMANDS: dict[str, list[str]] = {
    "iperf3": ["iperf3", "--version"],
    "tshark": ["tshark", "--version"],
    "tc": ["tc", "-V"],
    "ip": ["ip", "-V"],
    "qemu-system-x86_64": ["qemu-system-x86_64", "--version"],
    "Xvnc": ["Xvnc", "-version"],
    "x11vnc": ["x11vnc", "-version"],
    "xtightvncviewer": ["xtightvncviewer", "-h"],
    "remote-viewer": ["remote-viewer", "--version"],
    "pyhoca-cli": ["pyhoca-cli", "--version"],
}

EMULATION_CAPS = ("netns", "netem", "userspace_link", "link")

# ioctl numbers from <linux/kvm.h> (x86_64)
_KVM_GET_API_VERSION = 0xAE00
_KVM_CREATE_VM = 0xAE01
_KVM_GET_VCPU_MMAP_SIZE = 0xAE04
_KVM_CREATE_VCPU = 0xAE41
_KVM_SET_USER_MEMORY_REGION = 0x4020AE46
_KVM_SET_REGS = 0x4090AE82
_KVM_GET_SREGS = 0x8138AE83
_KVM_SET_SREGS = 0x4138AE84
_KVM_RUN = 0xAE80
_KVM_EXIT_HLT = 5


def _env_bool(name: str) -> bool | None:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return None
    value = raw.strip().lower()
    if value in ("1", "true"):
        return True
    if value in ("0", "false"):
        return False
    raise ValueError(f"{name} must be 'true' or 'false', got {raw!r}")


@functools.cache
def tool_version(tool: str) -> str | None:
    """First line the tool prints about its version, or None if it is not installed."""
    argv = VERSION_COMMANDS.get(tool, [tool, "--version"])
    if not shutil.which(argv[0]):
        return None
    try:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=10, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.SubprocessError) as err:
        return f"installed (version unknown: {err})"
    for line in (out.stdout + "\n" + out.stderr).splitlines():
        line = line.strip()
        if line and re.search(r"\d", line):
            return line[:200]
    return "installed (version unknown)"


def kvm_probe() -> tuple[bool, str]:
    """Can this host run a KVM guest? Runs a one-instruction (``hlt``) real-mode guest.

    Opening /dev/kvm is not enough: the API version must be 12, a VM and a vCPU must be created and
    the guest must actually execute. Hosts with the ``kvm_pvm`` module (pagetable-based
    virtualisation, no VMX/SVM) pass that test but boot only PVM-aware guest kernels, so ordinary
    images do not run there; we report that as False.
    """
    override = _env_bool("QOELAB_KVM")
    if override is False:
        return False, "disabled by QOELAB_KVM=0"
    if not os.path.exists("/dev/kvm"):
        return False, "/dev/kvm does not exist"
    # A wedged KVM_RUN must not hang the worker: probe in a child process with a timeout.
    try:
        out = subprocess.run(
            [sys.executable, "-c", "from qoelab.capabilities import _kvm_guest_runs; _kvm_guest_runs()"],
            capture_output=True, text=True, timeout=15,
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        return False, "a test guest did not finish within 15 s"
    if out.returncode != 0:
        last = (out.stderr.strip().splitlines() or ["unknown error"])[-1]
        return False, f"a test guest could not run: {last}"
    if Path("/sys/module/kvm_pvm").exists() and override is not True:
        return False, (
            "the host's KVM is kvm_pvm (no VMX/SVM): only PVM-enabled guest kernels boot; "
            "set QOELAB_KVM=1 to claim KVM anyway"
        )
    return True, "a test guest ran (KVM_RUN exited on hlt)"


def _kvm_guest_runs() -> None:
    """Child-process body of :func:`kvm_probe`; exits non-zero with the reason on stderr."""
    import ctypes
    import fcntl
    import mmap
    import struct

    fd = os.open("/dev/kvm", os.O_RDWR | os.O_CLOEXEC)
    api = fcntl.ioctl(fd, _KVM_GET_API_VERSION)
    if api != 12:
        sys.exit(f"KVM API version {api}, expected 12")
    vm = fcntl.ioctl(fd, _KVM_CREATE_VM, 0)
    mem = mmap.mmap(-1, 0x10000)
    mem[0x1000:0x1001] = b"\xf4"  # hlt
    addr = ctypes.addressof(ctypes.c_char.from_buffer(mem))
    fcntl.ioctl(vm, _KVM_SET_USER_MEMORY_REGION, struct.pack("IIQQQ", 0, 0, 0, 0x10000, addr))
    vcpu = fcntl.ioctl(vm, _KVM_CREATE_VCPU, 0)
    run = mmap.mmap(vcpu, fcntl.ioctl(fd, _KVM_GET_VCPU_MMAP_SIZE), mmap.MAP_SHARED)
    sregs = bytearray(312)
    fcntl.ioctl(vcpu, _KVM_GET_SREGS, sregs, True)
    struct.pack_into("QIH", sregs, 0, 0, 0xFFFF, 0)  # cs: base 0, selector 0 (real mode)
    fcntl.ioctl(vcpu, _KVM_SET_SREGS, bytes(sregs))
    regs = [0] * 18
    regs[16], regs[17] = 0x1000, 0x2  # rip, rflags
    fcntl.ioctl(vcpu, _KVM_SET_REGS, struct.pack("18Q", *regs))
    fcntl.ioctl(vcpu, _KVM_RUN, 0)
    reason = struct.unpack_from("I", run, 8)[0]
    if reason != _KVM_EXIT_HLT:
        sys.exit(f"guest exited with reason {reason}, expected {_KVM_EXIT_HLT} (hlt)")


def _emulation_caps() -> tuple[dict[str, bool], dict[str, str]]:
    caps = dict.fromkeys(EMULATION_CAPS, False)
    reasons: dict[str, str] = {}
    try:
        from qoelab import emulation

        found = emulation.detect()
    except (ImportError, AttributeError) as err:
        reason = f"the emulation module is not available ({err})"
        return caps, dict.fromkeys(EMULATION_CAPS, reason)
    except Exception as err:  # a probe crash must not stop the heartbeat; report it instead
        reason = f"emulation.detect() failed: {type(err).__name__}: {err}"
        return caps, dict.fromkeys(EMULATION_CAPS, reason)
    found = dict(found)
    given_reasons = found.pop("reasons", None)
    given_reasons = given_reasons if isinstance(given_reasons, dict) else {}
    # Accept {cap: bool} (+ "reasons": {cap: why}), {cap: (bool, reason)} or {cap: obj with .ok/.reason};
    # other entries (e.g. "backend": "netem") are facts, not capabilities.
    for name, value in found.items():
        ok, reason = value, str(given_reasons.get(name, ""))
        if isinstance(value, bool):
            pass
        elif isinstance(value, tuple | list):
            ok, reason = bool(value[0]), str(value[1]) if len(value) > 1 else ""
        elif hasattr(value, "ok"):
            ok, reason = bool(value.ok), str(getattr(value, "reason", "") or "")
        else:
            continue
        caps[name] = bool(ok)
        if not ok:
            reasons[name] = reason or "not available"
    return caps, reasons


def detect(probe_kvm: bool = True) -> dict[str, Any]:
    """Host facts, ``capabilities`` {name: bool}, ``reasons`` {name: why False}, ``versions``."""
    caps, reasons = _emulation_caps()
    for tool, package in (("iperf3", "iperf3"), ("tshark", "tshark"), ("nft", "nftables")):
        caps[tool] = shutil.which(tool) is not None
        if not caps[tool]:
            reasons[tool] = f"{tool} is not installed (Debian package '{package}')"
    if probe_kvm:
        caps["kvm"], why = kvm_probe()
        if not caps["kvm"]:
            reasons["kvm"] = why
    # One flag per congestion control algorithm the kernel offers: trials route by tcp_cc.<name>.
    from qoelab.emulation import tcp

    caps.update(tcp.capabilities())
    caps["qemu_tcg"] = shutil.which("qemu-system-x86_64") is not None
    if not caps["qemu_tcg"]:
        reasons["qemu_tcg"] = "qemu-system-x86_64 is not installed (Debian package 'qemu-system-x86')"
    # Each job type's own flags (qoelab.jobtype.HostProbe), each probe once, in the order listed.
    from qoelab import jobs

    found = HostProbe(caps, reasons)
    for ref in dict.fromkeys(ref for job in jobs.REGISTRY.values() for ref in job.probes):
        resolve(ref)(found)

    import celery

    versions: dict[str, str] = {
        "qoelab": qoelab.__version__,
        "code_revision": code_revision(),
        "python": platform.python_version(),
        "celery": celery.__version__,
    }
    for tool in VERSION_COMMANDS:
        v = tool_version(tool)
        if v is not None:
            versions[tool] = v
    uname = platform.uname()
    return {
        "hostname": socket.gethostname(),
        "kernel": f"{uname.system} {uname.release} {uname.machine}",
        "python": platform.python_version(),
        "code_revision": versions["code_revision"],
        "capabilities": caps,
        "reasons": reasons,
        "versions": versions,
    }
