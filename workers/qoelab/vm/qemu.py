"""QEMU for the guest: which accelerator really runs guests here, and the command line.

``/dev/kvm`` existing is not enough: on this lab's host it is a paravirtual KVM (kvm_pvm) whose
guests never run. So the probe boots the guest kernel for real with ``-accel kvm`` and waits for it
to print on the serial port; only then is KVM used, TCG otherwise (unless TCG is disabled).
"""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import subprocess
import tempfile
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Literal

from qoelab.emulation.system import find_tool
from qoelab.errors import ParameterError, QoelabError

Accel = Literal["kvm", "tcg"]
ENV_ALLOW_TCG = "QOELAB_VM_ALLOW_TCG"  # "0" refuses to fall back to (slow) TCG
KERNEL_BANNER = b"Linux version"
GUEST_MAC = "52:54:00:71:0e:02"
TAP_MAC = "52:54:00:71:0e:01"
DEFAULT_MEMORY_MB = 1536  # two chromiums (the kiosk and an X2Go session's) fit without swapping
KVM_DEVICE = "/dev/kvm"


class AcceleratorError(QoelabError):
    """No accelerator the caller allows can run the guest."""


@dataclass(frozen=True)
class KvmProbe:
    usable: bool
    reason: str
    seconds: float = 0.0


def qemu_binary() -> str:
    return find_tool("qemu-system-x86_64", "qemu-system-x86")


def probe_kvm(kernel: Path, timeout: float = 8.0, device: str = KVM_DEVICE) -> KvmProbe:
    """Boot ``kernel`` under KVM without a root disk; usable if it prints its banner in time.

    ``device``: the KVM device checked before QEMU is started (a test points it at a file).
    """
    if not os.path.exists(device):
        return KvmProbe(False, f"{device} does not exist")
    if not os.access(device, os.R_OK | os.W_OK):
        return KvmProbe(False, f"{device} is not read-writable by this user")
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="qoelab-kvm-probe-") as tmp:
        serial = Path(tmp) / "serial.log"
        argv = [
            qemu_binary(), "-accel", "kvm", "-nodefaults", "-no-user-config", "-display", "none",
            "-m", "256", "-no-reboot", "-kernel", str(kernel), "-append", "console=ttyS0 panic=-1",
            "-serial", f"file:{serial}",
        ]  # fmt: skip
        proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        try:
            while time.monotonic() - start < timeout:
                if serial.exists() and KERNEL_BANNER in serial.read_bytes():
                    return KvmProbe(True, "guest kernel booted under KVM", time.monotonic() - start)
                if proc.poll() is not None:
                    err = proc.stderr.read().decode(errors="replace").strip() if proc.stderr else ""
                    return KvmProbe(False, f"qemu -accel kvm exited {proc.returncode}: {err[-300:]}")
                time.sleep(0.1)
            return KvmProbe(
                False,
                f"KVM guest printed nothing within {timeout:.0f} s (KVM present but not running guests)",
            )
        finally:
            if proc.poll() is None:
                proc.kill()
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=5)


def choose_accel(requested: str, probe: KvmProbe | None, allow_tcg: bool = True) -> tuple[Accel, str]:
    """The accelerator to use and why. ``probe`` may be None when requested == "tcg"."""
    if requested not in ("auto", "kvm", "tcg"):
        raise ParameterError("accel", f"must be auto, kvm or tcg, got {requested!r}")
    if requested == "tcg":
        if not allow_tcg:
            raise AcceleratorError(f"accel tcg requested but TCG is disabled ({ENV_ALLOW_TCG}=0)")
        return "tcg", "TCG requested"
    assert probe is not None
    if probe.usable:
        return "kvm", probe.reason
    if requested == "kvm":
        raise AcceleratorError(f"accel kvm requested but KVM cannot run guests here: {probe.reason}")
    if not allow_tcg:
        raise AcceleratorError(
            f"KVM cannot run guests here ({probe.reason}) and TCG is disabled ({ENV_ALLOW_TCG}=0)"
        )
    return "tcg", f"KVM unusable ({probe.reason}); falling back to TCG"


def tcg_allowed() -> bool:
    return os.environ.get(ENV_ALLOW_TCG, "1") != "0"


@dataclass(frozen=True)
class GuestTimeouts:
    """How long each step of a guest's trial may take under one accelerator: ceilings, not sleeps.

    Every wait polls for its condition and returns as soon as it holds; these only bound how long a
    guest that will never get there is waited for (a stalled guest costs the whole ceiling).
    """

    accel: Accel
    boot_ready_s: float  # QEMU start to the page on the guest's screen (cold boot or restore)
    restore_s: float  # QEMU start to a saved state loaded (``-incoming``), before the guest runs
    client_setup_s: float  # VNC/SPICE: the viewer shows the guest's page, calibration (host side)
    x2go_setup_s: float  # X2Go: login, nxagent and the session's browser in the guest, calibration

    cpu_quota: float | None = None  # the quota these ceilings were scaled for, None: QEMU not held

    def setup_s(self, protocol: str) -> float:
        """The client side's setup ceiling for ``protocol`` (qoelab.vm.bench)."""
        return self.x2go_setup_s if protocol == "x2go" else self.client_setup_s

    def held_to(self, cpu_quota: float | None) -> GuestTimeouts:
        """These ceilings for a QEMU held to ``cpu_quota`` cores (``QOELAB_VM_CPU_QUOTA``).

        A guest held to a share of one core does everything that much slower, so every ceiling is
        divided by that share: at 0.4 cores a TCG cold boot may take 750 s. Without this, the slowed
        reliability runs measured cold boots 12.5 s inside the unscaled 300 s (docs/vm.md), and a
        slower host under the same quota would have failed by timeout rather than by anything the
        benchmark looks for. A quota of a core or more leaves the ceilings as they are.
        """
        if cpu_quota is None or cpu_quota >= 1.0:
            return self
        factor = 1.0 / cpu_quota
        return replace(
            self, boot_ready_s=self.boot_ready_s * factor, restore_s=self.restore_s * factor,
            client_setup_s=self.client_setup_s * factor, x2go_setup_s=self.x2go_setup_s * factor,
            cpu_quota=cpu_quota,
        )  # fmt: skip


# TCG: the values measured and used on this lab's hosts (docs/vm.md): a cold boot takes 45-71 s to
# the page (300 s leaves room for a loaded host), an X2Go session 3-5 min (nxagent and a second
# chromium emulated), loading a saved state 0.7-3.4 s (120 s: an 850 MB file on a busy disk).
TCG_TIMEOUTS = GuestTimeouts("tcg", boot_ready_s=300.0, restore_s=120.0, client_setup_s=60.0,
                             x2go_setup_s=600.0)  # fmt: skip
# KVM: the guest runs at native speed, so a boot reaches its page in ~5-10 s and the X2Go session's
# browser starts in seconds. A third of TCG's ceilings is still 10x what KVM needs, and a stalled
# guest fails minutes sooner; never below 60 s for anything: a boot or a restore also waits for
# disk I/O (the 850 MB state is read at the same speed under both), and the VNC/SPICE setup is
# host-side client work that KVM does not speed up, so it keeps TCG's 60 s.
KVM_TIMEOUTS = GuestTimeouts(
    "kvm",
    boot_ready_s=max(60.0, TCG_TIMEOUTS.boot_ready_s / 3),
    restore_s=max(60.0, TCG_TIMEOUTS.restore_s / 3),
    client_setup_s=TCG_TIMEOUTS.client_setup_s,
    x2go_setup_s=max(60.0, TCG_TIMEOUTS.x2go_setup_s / 3),
)


def guest_timeouts(accel: str, cpu_quota: float | None = None) -> GuestTimeouts:
    """The one place where a guest's timeouts follow its accelerator (a chosen one: kvm or tcg),
    and the CPU quota its QEMU is held to, if any (``qoelab.vm.throttle.cpu_quota_from_env``)."""
    if accel == "kvm":
        return KVM_TIMEOUTS.held_to(cpu_quota)
    if accel == "tcg":
        return TCG_TIMEOUTS.held_to(cpu_quota)
    raise ParameterError("accel", f"timeouts exist for a chosen accelerator, kvm or tcg, got {accel!r}")


def vnc_options_for(adaptive: bool) -> dict[str, str]:
    """QEMU ``-vnc`` options: lossy (JPEG allowed), and whether the tight encoder is adaptive.

    Adaptive (QEMU's default) means JPEG only for areas that change often: at quality 5 an area
    updated less than 0.1 times per second goes lossless (``tight_jpeg_conf`` in QEMU's
    ui/vnc-enc-tight.c). Slow-motion clicks, seconds apart, are exactly such updates, so their
    images travel zlib-compressed, not as JPEG (measured in docs/vm.md). ``non-adaptive=on``
    lets every suitable area use JPEG, as libvncserver (x11vnc) does.
    """
    return {"lossy": "on", **({} if adaptive else {"non-adaptive": "on"})}


@dataclass(frozen=True)
class GuestSpec:
    """Everything the QEMU command line depends on."""

    name: str
    accel: Accel
    overlay: Path
    kernel: Path
    initrd: Path
    console_log: Path
    ready_log: Path
    listen_ip: str
    qmp_socket: Path | None = None
    vnc_display: int | None = 0  # port 5900 + n
    # lossy=on: QEMU honours the client's JPEG quality (tight encoding); its default ignores it, and
    # the thesis' VNC setting is "JPEG quality 5" against QEMU's own server. See vnc_options_for.
    vnc_options: dict[str, str] = field(default_factory=lambda: vnc_options_for(adaptive=True))
    spice_port: int | None = 5930
    tap: str | None = None
    memory_mb: int = DEFAULT_MEMORY_MB
    cpus: int = 2
    extra_append: list[str] = field(default_factory=list)
    incoming: Path | None = None  # a saved VM state (qoelab.vm.snapshot) to restore instead of booting
    # QEMU -spice options beyond port/addr/ticketing (names as QEMU spells them).
    spice_options: dict[str, str] = field(default_factory=lambda: {"image-compression": "auto_glz"})

    def __post_init__(self) -> None:
        if not 256 <= self.memory_mb <= 16384:
            raise ParameterError("memory_mb", f"must be 256..16384, got {self.memory_mb}")
        if not 1 <= self.cpus <= 16:
            raise ParameterError("cpus", f"must be 1..16, got {self.cpus}")
        if self.vnc_display is not None and not 0 <= self.vnc_display <= 99:
            raise ParameterError("vnc_display", f"must be 0..99, got {self.vnc_display}")
        if self.spice_port is not None and not 1024 <= self.spice_port <= 65535:
            raise ParameterError("spice_port", f"must be 1024..65535, got {self.spice_port}")
        for name, options in (("spice", self.spice_options), ("vnc", self.vnc_options)):
            for key, value in options.items():
                if not re.fullmatch(r"[a-z-]+", key) or not re.fullmatch(r"[A-Za-z0-9_]+", str(value)):
                    raise ParameterError(
                        f"{name}_options.{key}", f"not a QEMU -{name} option=value: {key}={value!r}"
                    )


def kernel_append(spec: GuestSpec) -> str:
    # loglevel=4 keeps boot chatter off the (slow, emulated) serial port but errors on it.
    return " ".join(
        [
            "root=/dev/vda",
            "rw",
            "console=ttyS0",
            "loglevel=4",
            "video=800x600",
            *spec.extra_append,
        ]
    )


def qemu_argv(spec: GuestSpec, qemu: str = "qemu-system-x86_64") -> list[str]:
    """The QEMU command line: direct kernel boot, overlay disk, ttyS0 console log, ttyS1 readiness.

    Everything that is part of the machine (devices, memory, kernel command line) depends only on
    accel, memory and CPUs, so one saved state restores under any trial's VNC/SPICE/tap options.
    """
    argv = [
        qemu, "-name", spec.name, "-accel", spec.accel, "-nodefaults", "-no-user-config",
        "-machine", "q35", "-cpu", "host" if spec.accel == "kvm" else "max",
        "-m", str(spec.memory_mb), "-smp", str(spec.cpus),
        "-kernel", str(spec.kernel), "-initrd", str(spec.initrd), "-append", kernel_append(spec),
        "-drive", f"file={spec.overlay},format=qcow2,if=virtio,cache=unsafe",
        "-vga", "std", "-display", "none",
        "-serial", f"file:{spec.console_log}",
        "-chardev", f"file,id=ready,path={spec.ready_log}", "-serial", "chardev:ready",
        "-device", "virtio-rng-pci",  # chromium and sshd want entropy early
        # An absolute pointer: VNC/SPICE clicks land where the client clicked (a PS/2 mouse is relative).
        "-device", "qemu-xhci,id=xhci", "-device", "usb-tablet,bus=xhci.0",
    ]  # fmt: skip
    if spec.qmp_socket is not None:
        argv += ["-qmp", f"unix:{spec.qmp_socket},server=on,wait=off"]
    if spec.vnc_display is not None:
        opts = "".join(f",{k}={v}" for k, v in spec.vnc_options.items())
        argv += ["-vnc", f"{spec.listen_ip}:{spec.vnc_display}{opts}"]
    if spec.spice_port is not None:
        opts = ",".join(f"{k}={v}" for k, v in spec.spice_options.items())
        spice = f"port={spec.spice_port},addr={spec.listen_ip},disable-ticketing=on,{opts}".rstrip(",")
        argv += ["-spice", spice]
    if spec.tap is not None:
        # QEMU creates the tap itself (non-persistent): it vanishes with the process, nothing to leak.
        # Fixed MACs: a guest restored from a snapshot keeps its ARP entry for the tap's side.
        argv += [
            "-netdev", f"tap,id=net0,ifname={spec.tap},script=no,downscript=no",
            "-device", f"virtio-net-pci,netdev=net0,mac={GUEST_MAC}",
        ]  # fmt: skip
    else:
        argv += ["-nic", "none"]
    if spec.incoming is not None:
        argv += ["-incoming", f"exec:cat {shlex.quote(str(spec.incoming))}"]
    return argv
