"""One guest per trial: copy-on-write overlay, QEMU in the server namespace, readiness, teardown.

The overlay (``qemu-img create -b disk.qcow2``) keeps trials from sharing state; it and the QEMU
process are removed on success, failure, timeout and Ctrl-C. QEMU carries ``QOELAB_VM_PREFIX`` in its
environment and overlays are named ``<prefix>-<token>.qcow2``, so :func:`cleanup_leftovers` finds
what a SIGKILLed worker left. Readiness is the guest's own "QOELAB-READY" line on its second serial
port, written once X runs and the kiosk browser window is mapped, or a check on QEMU's screen; no
fixed sleep. With a :class:`~qoelab.vm.snapshot.Snapshot` the guest is restored from a saved state
(booted and already showing the start page) instead of booted.
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import psutil
from PIL import Image

from qoelab.emulation.system import find_tool, kill_processes, ns_exec_argv
from qoelab.errors import ParameterError, QoelabError
from qoelab.vm import throttle
from qoelab.vm.image import GuestImage, load_image
from qoelab.vm.qemu import (
    DEFAULT_MEMORY_MB,
    TAP_MAC,
    GuestSpec,
    KvmProbe,
    choose_accel,
    guest_timeouts,
    probe_kvm,
    qemu_argv,
    qemu_binary,
    tcg_allowed,
)
from qoelab.vm.reports import READY_MARK, step_not_reached

if TYPE_CHECKING:
    from qoelab.vm.snapshot import Snapshot

log = logging.getLogger("qoelab.vm")

ENV_VM = "QOELAB_VM_PREFIX"
ENV_OVERLAY_DIR = "QOELAB_VM_OVERLAY_DIR"
# The kernel's words when it kills for memory (printed on the console at loglevel 4).
OOM_LINE = re.compile(r"Out of memory|oom-kill|Killed process")
TAP_HOST_ADDR = ("10.213.0.1", 24)  # the guest is 10.213.0.2 (baked into the image)
GUEST_IP = "10.213.0.2"
BOOT_ATTEMPTS = 2  # a boot QEMU dies in (killed by a signal) is tried once more
PAGE_PORT = 8080  # the guest's start page waits for http://10.213.0.1:8080/page1.html (vm-images/build.sh)
_PREFIX_OK = re.compile(r"^[a-z][a-z0-9-]{1,12}$")
_OVERLAY_RE = re.compile(r"^(?P<prefix>[a-z][a-z0-9-]*)-(?P<token>[0-9a-f]{8})\.qcow2$")
QMP_DIR_PREFIX = "qqmp-"  # a QMP socket's short directory in /tmp, named after the trial's prefix


class GuestError(QoelabError):
    """The guest did not start or died; the message carries the tail of its console log."""


class GuestNotReadyError(GuestError):
    """The guest booted (or not) but never reported ready within the timeout."""


def overlay_dir() -> Path:
    return Path(os.environ.get(ENV_OVERLAY_DIR) or "/var/tmp/qoelab-vm")


def snapshot_root() -> Path:
    """Where saved guest states are kept (``qoelab.vm.snapshot``)."""
    return overlay_dir() / "snapshots"


def cleanup_snapshot_leftovers(prefix: str) -> list[str]:
    """Half-saved snapshot directories of trials whose prefix starts with ``prefix``."""
    root = snapshot_root()
    removed = []
    if root.is_dir():
        for d in root.glob(f"{prefix}*.tmp"):
            shutil.rmtree(d, ignore_errors=True)
            removed.append(f"snapshot tmp {d}")
    return removed


def check_prefix(prefix: str) -> str:
    if not _PREFIX_OK.match(prefix):
        raise ParameterError(
            "prefix", f"must match {_PREFIX_OK.pattern} (it names a tap, at most 15 chars), got {prefix!r}"
        )
    return prefix


def overlay_path(prefix: str, token: str | None = None, directory: Path | None = None) -> Path:
    """``<dir>/<prefix>-<8 hex>.qcow2``; the token makes concurrent trials of one prefix distinct."""
    check_prefix(prefix)
    token = token or secrets.token_hex(4)
    if not re.fullmatch(r"[0-9a-f]{8}", token):
        raise ParameterError("token", f"must be 8 lowercase hex digits, got {token!r}")
    return (directory or overlay_dir()) / f"{prefix}-{token}.qcow2"


def overlays_of(prefix: str, directory: Path | None = None) -> list[Path]:
    d = directory or overlay_dir()
    if not d.is_dir():
        return []
    return sorted(
        p for p in d.iterdir() if (m := _OVERLAY_RE.match(p.name)) and m["prefix"].startswith(prefix)
    )


def create_overlay(base: Path, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    argv = [
        find_tool("qemu-img", "qemu-utils"),
        "create",
        "-q",
        "-f",
        "qcow2",
        "-b",
        str(base),
        "-F",
        "qcow2",
        str(path),
    ]
    res = subprocess.run(argv, capture_output=True, text=True, check=False)
    if res.returncode != 0:
        raise GuestError(f"qemu-img create overlay {path} failed: {res.stderr.strip()}")
    return path


PROBE_CACHE = Path("/run/qoelab/kvm-probe.json")


@functools.cache
def _kvm_probe(kernel: str) -> KvmProbe:
    """``probe_kvm``, remembered until the host reboots (Celery children run one trial each, and a
    failing probe costs its full 8 s timeout): /run is cleared at boot, and the boot id is checked."""
    try:
        boot_id = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        boot_id = None
    key = {"boot_id": boot_id, "kernel": kernel, "qemu": qemu_binary()}
    with contextlib.suppress(OSError, ValueError, KeyError, TypeError):
        cached = json.loads(PROBE_CACHE.read_text())
        if boot_id and cached["key"] == key:
            return KvmProbe(bool(cached["usable"]), f"{cached['reason']} (probed at {cached['at']})")
    probe = probe_kvm(Path(kernel))
    with contextlib.suppress(OSError):
        PROBE_CACHE.parent.mkdir(parents=True, exist_ok=True)
        at = time.strftime("%Y-%m-%d %H:%M:%S")
        doc = {"key": key, "usable": probe.usable, "reason": probe.reason, "at": at}
        PROBE_CACHE.write_text(json.dumps(doc))
    return probe


def resolve_accel(requested: str, image: GuestImage) -> tuple[str, str]:
    """The accelerator a guest of ``image`` gets here, and why (KVM probed once per process)."""
    probe = None if requested == "tcg" else _kvm_probe(str(image.kernel))
    return choose_accel(requested, probe, tcg_allowed())


def find_qemu_processes(prefix: str) -> list[psutil.Process]:
    found = []
    for proc in psutil.process_iter():
        with contextlib.suppress(psutil.Error):
            if proc.environ().get(ENV_VM, "").startswith(prefix):
                found.append(proc)
    return found


def cleanup_leftovers(prefix: str) -> list[str]:
    """Kill QEMU processes, remove overlays and half-saved snapshots of trials under ``prefix``."""
    check_prefix(prefix)
    removed = kill_processes(find_qemu_processes(prefix), log)
    for path in overlays_of(prefix):
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
            removed.append(f"overlay {path}")
    for group in throttle.leftover_groups(prefix):
        throttle.release(group)
        removed.append(f"cgroup {group}")
    for d in Path(tempfile.gettempdir()).glob(f"{QMP_DIR_PREFIX}{prefix}*"):
        shutil.rmtree(d, ignore_errors=True)
        removed.append(f"qmp directory {d}")
    return removed + cleanup_snapshot_leftovers(prefix)


# A unix socket's path must fit sockaddr_un's 108 bytes (QEMU refuses a longer one); a trial's work
# directory under a worker's work root can be deeper than that allows.
_SUN_PATH_MAX = 107


def _qmp_socket_path(workdir: Path, stem: str, prefix: str) -> Path:
    """The guest's QMP socket: in its work directory when the path fits a unix socket's, else in a
    short private directory (``/tmp/qqmp-<prefix>-…``, removed with the guest or by the cleanup)."""
    path = workdir / f"{stem}-qmp.sock"
    if len(str(path).encode()) <= _SUN_PATH_MAX:
        return path
    return Path(tempfile.mkdtemp(prefix=f"{QMP_DIR_PREFIX}{prefix}-")) / "qmp.sock"


def _tail(path: Path, n: int = 15) -> str:
    try:
        lines = path.read_text(errors="replace").splitlines()
    except OSError:
        return "(no console output)"
    return "\n".join(lines[-n:]) or "(console empty)"


def _configure_tap(ns: str, tap: str, timeout: float = 10.0) -> None:
    # iproute_in: no forked pyroute2 helper (those inherit our signal handlers; see qoelab/__init__).
    from qoelab.emulation.system import iproute_in

    deadline = time.monotonic() + timeout
    with iproute_in(ns) as ipr:
        while True:
            idx = ipr.link_lookup(ifname=tap)
            if idx:
                break
            if time.monotonic() > deadline:
                raise GuestError(f"QEMU did not create tap {tap} in namespace {ns} within {timeout:.0f} s")
            time.sleep(0.05)
        ipr.link("set", index=idx[0], address=TAP_MAC)
        ipr.addr("add", index=idx[0], address=TAP_HOST_ADDR[0], prefixlen=TAP_HOST_ADDR[1])
        ipr.link("set", index=idx[0], state="up")


@dataclass
class RunningGuest:
    name: str
    pid: int
    accel: str
    accel_reason: str
    overlay: Path
    console_log: Path
    image: GuestImage
    listen_ip: str
    vnc_port: int | None
    spice_port: int | None
    ns: str | None
    boot_to_ready_s: float = 0.0
    kiosk_up_s: float | None = None  # QOELAB-READY seen (X up, browser window mapped), if it was
    guest_uptime_at_ready_s: float | None = None
    teardown_s: float | None = None
    argv: list[str] = field(default_factory=list)
    qmp_socket: Path | None = None
    start: str = "cold"  # or "snapshot": restored from a saved state
    restore_s: float | None = None  # QEMU start to the restored guest running (snapshot start)
    snapshot: dict[str, Any] | None = None
    snapshot_error: str | None = None  # why a requested snapshot start fell back to a cold boot
    crashed_boots: list[str] = field(default_factory=list)  # boots QEMU died in (a signal), each retried
    ready_log: Path | None = None  # the guest's ttyS1
    cpu_quota: float | None = None  # cores QEMU was held to (QOELAB_VM_CPU_QUOTA), None: not held

    def reports(self) -> list[str]:
        """What the guest said on ttyS1 besides its ready line, and the kernel's OOM kills on ttyS0.

        The image's scripts report browser restarts and ended X2Go session browsers there
        (vm-images/build.sh); a trial's error carries these lines.
        """
        lines: list[str] = []
        for path, keep in ((self.ready_log, lambda line: not line.startswith(READY_MARK)),
                           (self.console_log, lambda line: bool(OOM_LINE.search(line)))):  # fmt: skip
            if path is None:
                continue
            with contextlib.suppress(OSError):
                lines += [line.strip() for line in path.read_text(errors="replace").splitlines()
                          if line.strip() and keep(line)]  # fmt: skip
        return lines

    def qmp(self, command: str, **arguments: Any) -> Any:
        """One QMP command (QEMU's JSON monitor) on the guest's socket; returns its "return" value.

        Each request carries an id and only the reply echoing it counts. A connection that gave up
        while QEMU was busy (loading a saved state can block its main loop past the timeout) can
        leave a reply that QEMU then writes to the next connection; without ids that stale reply
        was taken for the answer (a ``query-status`` that "returned" ``{}``).
        """
        if self.qmp_socket is None:
            raise GuestError("this guest has no QMP socket")
        with socket.socket(socket.AF_UNIX) as s:
            s.settimeout(30)
            s.connect(str(self.qmp_socket))
            f = s.makefile("rwb")
            tag = secrets.token_hex(4)
            for n, (cmd, args) in enumerate((("qmp_capabilities", {}), (command, arguments))):
                request_id = f"qoelab-{tag}-{n}"
                f.write(json.dumps({"execute": cmd, "arguments": args, "id": request_id}).encode() + b"\n")
                f.flush()
                while True:  # skip the greeting, events and any stale reply
                    line = f.readline()
                    if not line:
                        raise GuestError(f"QMP {cmd}: QEMU closed the monitor connection")
                    reply = json.loads(line)
                    if reply.get("id") == request_id:
                        break
                if "error" in reply:
                    raise GuestError(f"QMP {cmd} failed: {reply['error'].get('desc')}")
            return reply.get("return")

    def screendump(self, path: Path) -> Path:
        """The guest's screen as seen by QEMU (PPM), without a VNC/SPICE client."""
        self.qmp("screendump", filename=str(path))
        return path

    def provenance(self) -> dict[str, Any]:
        return {
            "server": "vm",
            "hypervisor": "qemu",
            "accel": self.accel,
            "accel_reason": self.accel_reason,
            "start": self.start,
            "restore_s": None if self.restore_s is None else round(self.restore_s, 2),
            "snapshot": self.snapshot,
            "snapshot_error": self.snapshot_error,
            "crashed_boots": self.crashed_boots,
            "boot_to_ready_s": round(self.boot_to_ready_s, 2),
            "boot_to_kiosk_s": None if self.kiosk_up_s is None else round(self.kiosk_up_s, 2),
            "guest_uptime_at_ready_s": self.guest_uptime_at_ready_s,
            "teardown_s": None if self.teardown_s is None else round(self.teardown_s, 2),
            "cpu_quota": self.cpu_quota,
            **self.image.provenance(),
        }


def page_painted(img: Image.Image) -> bool:
    """The kiosk page is on screen: no single colour covers 99.5 % of it (a blank window does).

    Chromium maps its window seconds before the first paint under TCG; workload pages always hold
    text, images and the link block, so they never pass as one flat colour.
    """
    colors = img.getcolors(maxcolors=1 << 16)
    if colors is None:  # more colours than that: certainly painted
        return True
    return max(colors)[0] < 0.995 * img.width * img.height


def _ready_line(ready_log: Path) -> float | None:
    """Guest uptime from its ``QOELAB-READY <uptime>`` line, -1.0 if the line has none; None if absent."""
    with contextlib.suppress(FileNotFoundError):
        for line in ready_log.read_text(errors="replace").splitlines():
            if line.startswith(READY_MARK):
                with contextlib.suppress(IndexError, ValueError):
                    return float(line.split()[1])
                return -1.0
    return None


def _lines(path: Path) -> list[str]:
    with contextlib.suppress(OSError):
        return [line.strip() for line in path.read_text(errors="replace").splitlines() if line.strip()]
    return []


def _wait_ready(
    guest: RunningGuest,
    proc: subprocess.Popen,
    ready_log: Path,
    start: float,
    timeout: float,
    check: Callable[[Image.Image], bool] | None,
) -> None:
    """Until the screen passes ``check`` (QMP screendump, each second) or the deadline.

    Without ``check``: the guest's ready line plus :func:`page_painted`. With one (e.g. "the
    workload's link is on screen"), the screen alone decides: the guest's line is recorded when
    seen, but a guest whose window watcher misses its window still counts once the page is there.
    """
    shot = guest.console_log.parent / f"{guest.name}-screen.ppm"
    deadline = start + timeout
    try:
        while True:
            if proc.poll() is not None:
                raise GuestError(
                    f"QEMU exited with status {proc.returncode} before the guest was ready; "
                    f"console:\n{_tail(guest.console_log)}"
                )
            if guest.guest_uptime_at_ready_s is None:
                uptime = _ready_line(ready_log)
                if uptime is not None:
                    guest.guest_uptime_at_ready_s = uptime
                    guest.kiosk_up_s = time.monotonic() - start
            if check is not None or guest.guest_uptime_at_ready_s is not None:
                with contextlib.suppress(GuestError, OSError):  # QMP socket not up yet
                    guest.screendump(shot)
                    with Image.open(shot) as img:
                        if (check or page_painted)(img):
                            return
            if time.monotonic() > deadline:
                lines = _lines(ready_log)
                page = f"page server {TAP_HOST_ADDR[0]}:{PAGE_PORT}" if check is not None else None
                restored = guest.start == "snapshot"
                raise GuestNotReadyError(
                    f"guest not ready within {timeout:.0f} s: {step_not_reached(lines, page, restored)} "
                    f"(the guest reported: {'; '.join(lines) or 'nothing'}; last screen at "
                    f"{shot.with_suffix('.png')}); console log {guest.console_log}:\n"
                    f"{_tail(guest.console_log)}"
                )
            time.sleep(1.0)
    finally:
        with contextlib.suppress(OSError), Image.open(shot) as img:
            img.save(shot.with_suffix(".png"))
        with contextlib.suppress(FileNotFoundError):
            shot.unlink()


def _stop(proc: subprocess.Popen, timeout: float = 5.0) -> None:
    if proc.poll() is not None:
        return
    # The overlay is thrown away, so there is nothing to flush: SIGTERM (QEMU quits at once), then KILL.
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=timeout)


def _wait_incoming(guest: RunningGuest, proc: subprocess.Popen, timeout: float) -> None:
    """Until the saved state is loaded (QEMU leaves the guest paused, as it was saved), then run it."""
    deadline = time.monotonic() + timeout
    while True:
        if proc.poll() is not None:
            raise GuestError(f"QEMU exited with status {proc.returncode} while loading the saved state")
        with contextlib.suppress(GuestError, OSError):  # QMP socket not up yet
            status = guest.qmp("query-status")["status"]
            if status in ("paused", "postmigrate", "prelaunch"):
                guest.qmp("cont")
                return
            if status == "running":
                return
        if time.monotonic() > deadline:
            raise GuestError(f"the saved state was not loaded within {timeout:.0f} s")
        time.sleep(0.05)


@contextlib.contextmanager
def running_guest(
    prefix: str,
    workdir: Path,
    *,
    ns: str | None = None,
    listen_ip: str = "127.0.0.1",
    image: GuestImage | None = None,
    accel: str = "auto",
    vnc_display: int | None = 0,
    spice_port: int | None = 5930,
    ready_timeout: float | None = None,
    memory_mb: int = DEFAULT_MEMORY_MB,
    ready_check: Callable[[Image.Image], bool] | None = None,
    spice_options: dict[str, str] | None = None,
    vnc_options: dict[str, str] | None = None,
    snapshot: Snapshot | None = None,
    extra_append: Sequence[str] = (),
    ready: Callable[[RunningGuest, subprocess.Popen, float], None] | None = None,
) -> Iterator[RunningGuest]:
    """Boot (or restore) a guest for one trial and yield it once ready; always stop it and drop its overlay.

    With ``ns`` QEMU runs inside that network namespace (VNC/SPICE listen on ``listen_ip`` there) and
    the guest's NIC is a tap in it, 10.213.0.1/24 on the host side, guest 10.213.0.2. Ready means
    ``ready_check`` accepts QEMU's screen, or without one: the guest said so on ttyS1 and the page
    is painted (see :func:`_wait_ready`). With ``snapshot`` the guest resumes from that saved state;
    if that fails the guest is booted instead and ``snapshot_error`` says why. ``ready(guest, proc,
    deadline)`` replaces that wait (a headless guest: ``extra_append`` masks the kiosk, and the
    caller waits for what it needs, e.g. sshd); it raises GuestNotReadyError past the deadline.
    """
    check_prefix(prefix)
    image = image or load_image()
    qemu = qemu_binary()
    chosen, reason = resolve_accel(accel, image)
    cpu_quota = throttle.cpu_quota_from_env()  # a benchmark's slowed condition; None: not held
    group: Path | None = None
    timeouts = guest_timeouts(chosen, cpu_quota)
    if ready_timeout is None:
        ready_timeout = timeouts.boot_ready_s
    if snapshot is not None and not snapshot.usable_for(chosen):
        snapshot = None  # a state saved under another accelerator does not load here
    workdir.mkdir(parents=True, exist_ok=True)
    proc: subprocess.Popen | None = None
    guest: RunningGuest | None = None
    overlay = overlay_path(prefix)
    qmp_sock = _qmp_socket_path(workdir, overlay.stem, prefix)
    snapshot_error: str | None = None
    crashed_boots: list[str] = []
    try:
        # A snapshot start falls back to a boot; a boot that QEMU itself dies in gets one more.
        for restore in ([snapshot] if snapshot is not None else []) + [None] * BOOT_ATTEMPTS:
            console_log = workdir / f"{overlay.stem}{'-restore' if restore else ''}-console.log"
            ready_log = workdir / f"{overlay.stem}-ready.log"
            tap = f"{prefix}t" if ns else None
            spec = GuestSpec(
                name=overlay.stem, accel=chosen, overlay=overlay, kernel=image.kernel, initrd=image.initrd,
                console_log=console_log, ready_log=ready_log, listen_ip=listen_ip, vnc_display=vnc_display,
                qmp_socket=qmp_sock, spice_port=spice_port, tap=tap, extra_append=list(extra_append),
                memory_mb=restore.memory_mb if restore else memory_mb,
                incoming=restore.state if restore else None,
                **({"spice_options": spice_options} if spice_options is not None else {}),
                **({"vnc_options": vnc_options} if vnc_options is not None else {}),
            )  # fmt: skip
            argv = qemu_argv(spec, qemu)
            if ns:
                argv = ns_exec_argv(ns, argv)
            create_overlay(restore.disk if restore else image.disk, overlay)
            start = time.monotonic()
            env = {**os.environ, ENV_VM: prefix}
            err_path = workdir / f"{overlay.stem}-qemu.err"
            with open(err_path, "ab") as err_file:
                proc = subprocess.Popen(
                    argv, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err_file,
                    start_new_session=True,
                )  # fmt: skip
            if cpu_quota is not None:
                group = throttle.hold(proc.pid, cpu_quota, overlay.stem)
            guest = RunningGuest(
                name=overlay.stem, pid=proc.pid, accel=chosen, accel_reason=reason, overlay=overlay,
                console_log=console_log, image=image, listen_ip=listen_ip,
                vnc_port=None if vnc_display is None else 5900 + vnc_display, spice_port=spice_port,
                ns=ns, argv=argv, qmp_socket=qmp_sock, snapshot_error=snapshot_error, ready_log=ready_log,
                crashed_boots=list(crashed_boots), cpu_quota=cpu_quota,
            )  # fmt: skip
            try:
                if ns and tap:
                    _configure_tap(ns, tap)
                if restore is not None:
                    _wait_incoming(guest, proc, timeout=timeouts.restore_s)
                    guest.start, guest.snapshot = "snapshot", restore.provenance()
                    guest.restore_s = time.monotonic() - start
                    # The ready line was written before the state was saved.
                    guest.guest_uptime_at_ready_s, guest.kiosk_up_s = restore.uptime_at_ready_s, 0.0
                if ready is not None:
                    ready(guest, proc, start + ready_timeout)
                else:
                    _wait_ready(guest, proc, ready_log, start, ready_timeout, ready_check)
            except GuestError as err:
                qemu_err = _tail(err_path, 5)
                # QEMU killed by a signal while booting (under TCG an assertion in its MSI-X
                # emulation aborted it once in CI): the emulator failed, not the guest or the trial.
                crashed = proc.poll() is not None and proc.returncode < 0
                if restore is None and not (crashed and len(crashed_boots) + 1 < BOOT_ATTEMPTS):
                    raise type(err)(f"{err}\nqemu stderr:\n{qemu_err}") from None
                why = f"{err} (qemu: {qemu_err.strip()[-300:]})"
                if restore is None:
                    crashed_boots.append(why)
                    log.warning("guest %s: QEMU died while booting, booting once more: %s", overlay.stem, why)
                else:
                    snapshot_error = why
                    log.warning("guest %s: snapshot start failed, booting: %s", overlay.stem, why)
                _stop(proc)
                overlay.unlink(missing_ok=True)
                qmp_sock.unlink(missing_ok=True)
                continue
            break
        assert guest is not None and proc is not None
        guest.boot_to_ready_s = time.monotonic() - start
        log.info("guest %s ready in %.1f s (%s, %s)", guest.name, guest.boot_to_ready_s, chosen, guest.start)
        yield guest
    finally:
        t0 = time.monotonic()
        # Unlink first: QEMU keeps its open file, and a second Ctrl-C during the stop below cannot
        # leave the overlay behind any more.
        for leftover in (overlay, qmp_sock):
            with contextlib.suppress(FileNotFoundError):
                leftover.unlink()
        if qmp_sock.parent.name.startswith(QMP_DIR_PREFIX):
            shutil.rmtree(qmp_sock.parent, ignore_errors=True)
        if proc is not None:
            _stop(proc)
        if group is not None:
            throttle.release(group)
        if guest is not None:
            guest.teardown_s = time.monotonic() - t0
