"""What this lab host can do: host facts, capability flags and tool versions for the heartbeat.

``detect()`` is honest rather than optimistic: a capability is True only when a cheap probe shows it
works, and every False carries a reason (``reasons``) the CLI and the worker log print. The
backend routes trials by the boolean flags only.
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

log = logging.getLogger("qoelab.capabilities")

REPO_DIR = Path(__file__).resolve().parent.parent.parent

# capability -> (programs, any of which proves it, Debian package that provides it)
RD_TOOLS: dict[str, tuple[tuple[str, ...], str]] = {
    "rd.desktop": (("Xvfb",), "xvfb"),  # the X displays of both sides
    "rd.input": (("xdotool",), "xdotool"),  # the slow-motion driver's clicks
    "rd.vnc.server": (("x11vnc",), "x11vnc"),  # the default VNC server (docs/rd-benchmark.md)
    "rd.vnc.client": (("xtightvncviewer",), "xtightvncviewer"),
    "rd.spice.server": (("Xspice",), "xserver-xspice"),  # Xorg + spiceqxl, started by qoelab
    "rd.spice.client": (("remote-viewer",), "virt-viewer"),
    "rd.x2go.server": (("x2gostartagent", "x2golistsessions"), "x2goserver"),
    "rd.x2go.client": (("pyhoca-cli", "x2goclient"), "pyhoca-cli"),
}

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


def code_revision() -> str:
    """``git describe`` of the checkout this code runs from, else the package version.

    QOELAB_CODE_REVISION overrides both (container images have no .git).
    """
    override = os.environ.get("QOELAB_CODE_REVISION", "").strip()
    if override:
        return override
    if (REPO_DIR / ".git").exists() and shutil.which("git"):
        try:
            out = subprocess.run(
                ["git", "-c", f"safe.directory={REPO_DIR}", "-C", str(REPO_DIR), "describe", "--always",
                 "--dirty", "--tags"],
                capture_output=True, text=True, timeout=10, check=True,
            )  # fmt: skip
            if out.stdout.strip():
                return out.stdout.strip()
        except (OSError, subprocess.SubprocessError):
            pass
    return f"qoelab {qoelab.__version__}"


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


def _storage_caps(reasons: dict[str, str]) -> dict[str, bool]:
    """Storage APT: a target program per protocol and the block-device layer helper (apt-bdl)."""
    from qoelab.apt.bdl import NOT_BUILT, binary_path

    helper = os.access(binary_path(), os.X_OK)
    caps = {}
    for cap, programs, package in (
        ("apt.nbd", ("nbdkit",), "nbdkit"),
        ("apt.iscsi", ("tgtd", "tgtadm"), "tgt"),
    ):
        missing = [p for p in programs if not (shutil.which(p) or Path("/usr/sbin", p).exists())]
        caps[cap] = helper and not missing
        if missing:
            reasons[cap] = f"{' and '.join(missing)} not installed (Debian package '{package}')"
        elif not helper:
            reasons[cap] = NOT_BUILT
    return caps


def _storage_bench_caps(reasons: dict[str, str], vm_ok: bool) -> dict[str, bool]:
    """Storage benchmark (thesis 001): the client guest (a VM with root's key and the benchmark tool)
    and each target's servers. Without a guest the job type cannot run here: nothing is advertised."""
    from qoelab.storage.iobench import NOT_BUILT, binary
    from qoelab.vm.image import load_image

    caps: dict[str, bool] = {}
    why = ""
    if not vm_ok:
        why = "no QEMU guest can run here (see vm)"
    elif not os.access(binary(), os.X_OK):
        why = NOT_BUILT
    else:
        try:
            if not (load_image().directory / "root-key").is_file():
                why = "the guest image has no root key: rebuild it with 'make vm-image'"
        except Exception as err:  # an unreadable image is a reason, not a crash of the heartbeat
            why = f"the guest image cannot be read: {err}"
    caps["storage.guest"] = not why
    if why:
        reasons["storage.guest"] = why
    for cap, programs, package in (
        ("storage.nfs", ("ganesha.nfsd",), "nfs-ganesha"),
        ("storage.iscsi", ("tgtd", "tgtadm"), "tgt"),
        ("storage.swift", ("swift-proxy-server", "swift-object-server", "memcached"), "swift-proxy"),
    ):
        missing = [p for p in programs if not (shutil.which(p) or Path("/usr/sbin", p).exists())]
        caps[cap] = not missing
        if missing:
            reasons[cap] = f"{' and '.join(missing)} not installed (Debian package '{package}' and its peers)"
    from qoelab.storage.diskrate import unavailable

    why_not = unavailable()
    caps["storage.disk_rate"] = caps["storage.guest"] and not why_not
    if why_not:
        reasons["storage.disk_rate"] = f"disk_rate: {why_not}"
    return caps


def _vose_caps(reasons: dict[str, str]) -> dict[str, bool]:
    """Offload emulation: the vose-pair helper and ethtool; the accelerated instructions a hardware
    run compares against (AES-NI, SHA-NI) as their own flags."""
    from qoelab.vose.pair import NOT_BUILT, binary_path

    helper = os.access(binary_path(), os.X_OK)
    ethtool = bool(shutil.which("ethtool") or Path("/usr/sbin/ethtool").exists())
    caps = {"vose": helper and ethtool}
    if not helper:
        reasons["vose"] = NOT_BUILT
    elif not ethtool:
        reasons["vose"] = "ethtool is not installed (Debian package 'ethtool')"
    try:
        flags = set(next(line for line in Path("/proc/cpuinfo").read_text().splitlines()
                         if line.startswith("flags")).split(":", 1)[1].split())  # fmt: skip
    except (OSError, StopIteration):
        flags = set()
    for cap, flag, name in (("vose.aesni", "aes", "AES-NI"), ("vose.sha_ni", "sha_ni", "SHA-NI")):
        caps[cap] = caps["vose"] and flag in flags
        if not caps[cap]:
            reasons[cap] = reasons.get("vose") or f"this CPU has no {name}"
    return caps


def _thinclient_caps(reasons: dict[str, str]) -> dict[str, bool]:
    """Thin-client TCP: the replay pair (tc-replay); the userspace link is its own capability."""
    from qoelab.thinclient.replay import NOT_BUILT, binary

    ok = os.access(binary(), os.X_OK)
    if not ok:
        reasons["thinclient"] = NOT_BUILT
    return {"thinclient": ok}


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
    # VM server mode (rd_qoe server: vm): QEMU, a built guest image, and KVM or TCG allowed.
    from qoelab.vm.guest import vm_capability

    vm = vm_capability()
    caps["vm"] = bool(vm["available"])
    if not caps["vm"]:
        reasons["vm"] = vm["image_note"] if not vm["image"] else "QEMU missing or neither KVM nor TCG allowed"
    caps.update(_storage_caps(reasons))
    caps.update(_storage_bench_caps(reasons, caps["vm"]))
    caps.update(_vose_caps(reasons))
    caps.update(_thinclient_caps(reasons))
    for cap, (programs, package) in RD_TOOLS.items():
        caps[cap] = any(shutil.which(p) for p in programs)
        if not caps[cap]:
            reasons[cap] = f"{' or '.join(programs)} not installed (Debian package '{package}')"

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
