"""Storage targets for BDL-APT trials: an NBD target (nbdkit) and an iSCSI target (tgt's tgtd).

Both serve a device that costs no disk (nbdkit's ``memory``/``null`` plugin, tgt's ``null``
backing store) on one ``ip:port``, and are started through a caller-given ``popen`` so that a
trial can run them in its server namespace (``functools.partial(link.popen_in, "s")``); tgtadm goes
through ``run`` the same way (``functools.partial(link.run_in, "s")``, or :func:`run_local`).
Every process carries ``QOELAB_LINK_PREFIX=<prefix>``, so cleanup by prefix finds leftovers, and
readiness is a condition (nbdkit's pid file, tgtadm answering), never a fixed sleep.

What the targets allow (tgt 1.0.85, nbdkit 1.32):

- tgt has no per-target session limit (the check in ``iscsid.c`` is commented out and tgtadm
  rejects ``MaxSessions``; it took 1024 sessions, apt-bdl's maximum); each session's command window
  is ``MaxQueueCmd=128``. A portal tgtd cannot bind is only logged (and it listens on *:3260
  instead), so readiness also checks that tgtadm lists our portal.
- tgt's null backing store always has 1 TiB (``NULL_BS_DEV_SIZE``), whatever was asked for.
- The target's ``MaxBurstLength`` is raised to the protocol maximum 16777215; libiscsi offers
  262144 and cannot be told otherwise, so 262144 is what a libiscsi session negotiates.
- nbdkit has no connection limit unless ``max_connections`` adds its ``limit`` filter; the memory
  plugin reports ``can_multi_conn`` (apt-bdl prints what it saw in its ``ready`` line).
"""

from __future__ import annotations

import contextlib
import secrets
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO, Any

from qoelab.emulation.system import check_prefix, find_tool, marked_env
from qoelab.errors import ParameterError, QoelabError

Popen = Callable[..., subprocess.Popen]
Run = Callable[..., subprocess.CompletedProcess]

IQN_BASE = "iqn.2026-11.org.qoelab"
TGT_NULL_SIZE = 1 << 40  # tgt's bs_null.c: NULL_BS_DEV_SIZE
TGT_IPC_DIR = Path("/var/run/tgtd")  # tgtd's control socket: <dir>/socket.<control port>
ISCSI_MAX_BURST = 16777215  # 2**24 - 1, the largest MaxBurstLength iSCSI allows
NBDKIT_PLUGINS = ("memory", "null")


class TargetError(QoelabError):
    """A storage target could not be started or configured."""


def run_local(argv: Sequence[str], timeout: float = 30) -> subprocess.CompletedProcess[str]:
    """``run`` for targets in this namespace: text output captured, never raises on failure."""
    return subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout, check=False)


def _hostport(ip: str, port: int) -> str:
    return f"[{ip}]:{port}" if ":" in ip else f"{ip}:{port}"


def _check_port(field: str, port: int, hi: int = 65535) -> int:
    if not isinstance(port, int) or not 1 <= port <= hi:
        raise ParameterError(field, f"must be an integer from 1 to {hi}, got {port!r}")
    return port


def _tail(path: Path, lines: int = 3, about: Sequence[str] = ()) -> str:
    """The log's last lines, or its last lines that mention one of ``about`` if any do."""
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return ""
    found = [x.strip() for x in text.splitlines() if x.strip()]
    relevant = [x for x in found if any(word in x for word in about)]
    return "; ".join((relevant or found)[-lines:])


class Target:
    """A running storage target: ``uri`` for apt-bdl, ``stop()`` (idempotent), a context manager."""

    protocol = ""

    def __init__(
        self, proc: subprocess.Popen, uri: str, address: str, size_bytes: int, workdir: Path, log_path: Path
    ) -> None:
        self.proc = proc
        self.uri = uri
        self.address = address
        self.size_bytes = size_bytes
        self.workdir = workdir  # private, removed by stop()
        self.log_path = log_path  # the target's stdout and stderr
        self.info: dict[str, Any] = {}

    @property
    def pid(self) -> int:
        return self.proc.pid

    def log_text(self) -> str:
        with contextlib.suppress(OSError):
            return self.log_path.read_text(errors="replace")
        return ""

    def _end_process(self, sig: int, timeout: float) -> None:
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def stop(self) -> None:
        self._end_process(signal.SIGTERM, 5.0)
        shutil.rmtree(self.workdir, ignore_errors=True)

    def __enter__(self) -> Target:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


class NbdTarget(Target):
    protocol = "nbd"


class IscsiTarget(Target):
    protocol = "iscsi"

    def __init__(self, *args: Any, control_port: int, iqn: str) -> None:
        super().__init__(*args)
        self.control_port = control_port
        self.iqn = iqn
        self.owns_socket = False  # never remove the socket of a tgtd that was there first

    def stop(self) -> None:
        # tgtd's SIGTERM handler does nothing and a clean exit needs every target deleted first;
        # the sessions' TCP connections are closed by the kernel either way.
        self._end_process(signal.SIGKILL, 5.0)
        for path in _tgt_socket_paths(self.control_port) if self.owns_socket else []:
            with contextlib.suppress(FileNotFoundError):
                path.unlink()  # tgtd never removes them itself
        shutil.rmtree(self.workdir, ignore_errors=True)


def _workdir(prefix: str, kind: str) -> Path:
    return Path(tempfile.mkdtemp(prefix=f"qoelab-{prefix}-{kind}-"))


def _start(popen: Popen, argv: list[str], prefix: str, log: IO[bytes]) -> subprocess.Popen:
    return popen(
        argv, stdin=subprocess.DEVNULL, stdout=log, stderr=log, env=marked_env(prefix), close_fds=True
    )


def _wait(condition: Callable[[], bool], proc: subprocess.Popen, timeout: float) -> bool:
    """Poll ``condition`` until it holds (True), the process exits or the time is up (False)."""
    deadline = time.monotonic() + timeout
    delay = 0.01
    while time.monotonic() < deadline:
        if condition():
            return True
        if proc.poll() is not None:
            return False
        time.sleep(delay)
        delay = min(delay * 2, 0.2)
    return condition()


def nbd_target(
    popen: Popen | None,
    ip: str,
    port: int,
    size_bytes: int,
    plugin: str = "memory",
    *,
    prefix: str,
    threads: int = 16,
    max_connections: int | None = None,
    rate_bps: int | None = None,
    log_path: Path | None = None,
    ready_timeout_s: float = 15.0,
) -> NbdTarget:
    """nbdkit serving a ``plugin`` device of ``size_bytes`` on ``ip:port`` (export name "").

    ``threads`` is nbdkit's per-connection thread count (parallel requests per session);
    ``max_connections`` adds nbdkit's ``limit`` filter, which refuses sessions beyond it;
    ``rate_bps`` its ``rate`` filter, which caps the target's total rate (a slower storage device,
    or a light test on loopback). nbdkit's output goes to ``log_path`` (kept), else to a file
    in the target's private directory (removed by ``stop()``).
    """
    check_prefix(prefix)
    _check_port("port", port)
    if plugin not in NBDKIT_PLUGINS:
        raise ParameterError("plugin", f"must be one of {', '.join(NBDKIT_PLUGINS)}, got {plugin!r}")
    if not isinstance(size_bytes, int) or size_bytes < 512:
        raise ParameterError("size_bytes", f"must be an integer of at least 512, got {size_bytes!r}")
    if max_connections is not None and max_connections < 1:
        raise ParameterError("max_connections", f"must be at least 1, got {max_connections!r}")
    if rate_bps is not None and rate_bps < 8000:
        raise ParameterError("rate_bps", f"must be at least 8000 bit/s, got {rate_bps!r}")
    nbdkit = find_tool("nbdkit", "nbdkit")
    workdir = _workdir(prefix, "nbd")
    pidfile = workdir / "nbdkit.pid"  # the path names the prefix, so the argv does too
    argv = [nbdkit, "-f", "--exit-with-parent", "-i", ip, "-p", str(port), "-P", str(pidfile)]
    argv += ["--threads", str(threads)]
    params = [f"size={size_bytes}"]
    if max_connections is not None:
        argv.append("--filter=limit")
        params.append(f"limit={max_connections}")
    if rate_bps is not None:
        argv.append("--filter=rate")
        params.append(f"rate={rate_bps}")
    argv += [plugin, *params]
    log_path = log_path or workdir / "target.log"
    with open(log_path, "ab") as log:
        proc = _start(popen or subprocess.Popen, argv, prefix, log)
    address = _hostport(ip, port)
    target = NbdTarget(proc, f"nbd://{address}", address, size_bytes, workdir, log_path)
    target.info = {
        "server": "nbdkit",
        "plugin": plugin,
        "threads": threads,
        "max_connections": max_connections,
        "rate_bps": rate_bps,
    }
    # nbdkit writes its pid file once it accepts connections.
    if not _wait(lambda: pidfile.exists() and pidfile.read_text().strip() != "", proc, ready_timeout_s):
        exited = proc.poll() is not None
        detail = _tail(log_path) or f"exit code {proc.poll()}"
        target.stop()
        if exited:
            raise TargetError(f"nbdkit could not serve on {address}: {detail}")
        raise TargetError(f"nbdkit did not start serving on {address} within {ready_timeout_s:g} s: {detail}")
    return target


def _tgt_socket_paths(control_port: int) -> list[Path]:
    return [TGT_IPC_DIR / f"socket.{control_port}", TGT_IPC_DIR / f"socket.{control_port}.lock"]


def iscsi_target(
    popen: Popen | None,
    run: Run | None,
    ip: str,
    port: int,
    size_bytes: int | None,
    prefix: str,
    control_port: int,
    *,
    log_path: Path | None = None,
    ready_timeout_s: float = 15.0,
    backing_file: Path | None = None,
    block_size: int | None = None,
    target_params: dict[str, int | str] | None = None,
) -> IscsiTarget:
    """tgtd with one target ``iqn.2026-11.org.qoelab:<prefix>``, LUN 1 on the null store (or a file).

    ``control_port`` picks tgtd's control socket (``/var/run/tgtd/socket.<port>``): concurrent
    trials must each use their own. ``size_bytes`` must not exceed the null store's fixed 1 TiB,
    which is the LUN's size whatever is asked for (``size_bytes`` of the result says so).
    tgtd's output goes to ``log_path`` (kept), else to the target's private directory.

    ``backing_file`` serves an existing file through tgt's ``rdwr`` store instead (the LUN has the
    file's size; ``size_bytes`` is then ignored); ``block_size`` sets the LUN's logical block size
    (tgt's default is 512); ``target_params`` are iSCSI target parameters set with ``tgtadm --op
    update`` after ours (e.g. ``MaxRecvDataSegmentLength``; a ``MaxBurstLength`` there replaces the
    default one). All three are optional: without them the target is the APT one, unchanged.
    """
    check_prefix(prefix)
    _check_port("port", port)
    _check_port("control_port", control_port, 32767)  # tgtd keeps it in a short
    if backing_file is not None:
        if not Path(backing_file).is_file():
            raise ParameterError("backing_file", f"must be an existing file, got {str(backing_file)!r}")
        size_bytes = Path(backing_file).stat().st_size
    elif size_bytes is not None and not 512 <= size_bytes <= TGT_NULL_SIZE:
        raise ParameterError("size_bytes", f"tgt's null backing store has 1 TiB; got {size_bytes!r}")
    if block_size is not None and block_size not in (512, 1024, 2048, 4096):
        raise ParameterError("block_size", f"must be 512, 1024, 2048 or 4096, got {block_size!r}")
    params = {"MaxBurstLength": ISCSI_MAX_BURST, **(target_params or {})}
    tgtd = find_tool("tgtd", "tgt")
    tgtadm = find_tool("tgtadm", "tgt")
    run = run or run_local

    def adm(*args: str) -> subprocess.CompletedProcess[str]:
        return run([tgtadm, "-C", str(control_port), "--lld", "iscsi", *args], timeout=10)

    if adm("--op", "show", "--mode", "sys").returncode == 0:
        raise TargetError(f"tgtd control port {control_port} is in use by another tgtd; choose another one")
    workdir = _workdir(prefix, "iscsi")
    log_path = log_path or workdir / "target.log"
    address = _hostport(ip, port)
    argv = [tgtd, "-f", "-C", str(control_port), "--iscsi", f"portal={address}"]
    with open(log_path, "ab") as log:
        proc = _start(popen or subprocess.Popen, argv, prefix, log)
    iqn = f"{IQN_BASE}:{prefix}"
    target = IscsiTarget(
        proc,
        f"iscsi://{address}/{iqn}/1",
        address,
        TGT_NULL_SIZE if backing_file is None else int(size_bytes or 0),
        workdir,
        log_path,
        control_port=control_port,
        iqn=iqn,
    )
    store = ("null", f"null-{prefix}") if backing_file is None else ("rdwr", str(backing_file))
    target.info = {"server": "tgtd", "backing_store": store[0], "control_port": control_port, "iqn": iqn}
    if backing_file is not None:
        target.info["backing_file"] = store[1]
    lun_options = () if block_size is None else ("--blocksize", str(block_size))
    (workdir / "control_port").write_text(str(control_port))  # for cleanup_leftovers after a crash
    try:
        # tgtd answers its control socket only from its event loop, i.e. after the portal listens.
        if not _wait(lambda: adm("--op", "show", "--mode", "sys").returncode == 0, proc, ready_timeout_s):
            detail = _tail(log_path) or f"exit code {proc.poll()}"
            raise TargetError(f"tgtd could not serve iSCSI on {address}: {detail}")
        target.owns_socket = True
        # A portal that cannot be bound is only logged, and tgtd listens on *:3260 instead.
        if f"Portal: {address}," not in adm("--op", "show", "--mode", "portal").stdout:
            detail = _tail(log_path, about=("portal", "bind")) or "it does not list the portal"
            raise TargetError(f"tgtd could not serve iSCSI on {address}: {detail}")
        steps = [
            ("--op", "new", "--mode", "target", "--tid", "1", "-T", iqn),
            ("--op", "new", "--mode", "logicalunit", "--tid", "1", "--lun", "1",
             "--bstype", store[0], "--backing-store", store[1], *lun_options),
            *(("--op", "update", "--mode", "target", "--tid", "1", "-n", name, "-v", str(value))
              for name, value in params.items()),
            ("--op", "bind", "--mode", "target", "--tid", "1", "-I", "ALL"),
        ]  # fmt: skip
        for step in steps:
            out = adm(*step)
            if out.returncode != 0:
                detail = (out.stderr or out.stdout).strip() or f"exit code {out.returncode}"
                raise TargetError(
                    f"tgtadm could not set up the iSCSI target ({' '.join(step[:4])}): {detail}"
                )
        if proc.poll() is not None:  # another tgtd on our control port would have answered instead
            raise TargetError(f"tgtd exited while being set up: {_tail(log_path)}")
    except BaseException:
        target.stop()
        raise
    target.info["max_burst_length"] = int(params["MaxBurstLength"])
    if target_params:
        target.info["target_params"] = dict(params)
    if block_size is not None:
        target.info["block_size"] = block_size
    return target


def cleanup_leftovers(prefix: str) -> list[str]:
    """Remove the work dirs and tgtd control sockets of targets under ``prefix`` (a killed trial's).

    Their processes carry the prefix marker and go with the link's cleanup; this is the files.
    """
    removed = []
    for workdir in Path(tempfile.gettempdir()).glob(f"qoelab-{prefix}*-*"):
        if not workdir.is_dir() or workdir.name.rsplit("-", 2)[-2] not in ("nbd", "iscsi"):
            continue
        with contextlib.suppress(OSError, ValueError):
            for path in _tgt_socket_paths(int((workdir / "control_port").read_text())):
                with contextlib.suppress(FileNotFoundError):
                    path.unlink()
                    removed.append(str(path))
        shutil.rmtree(workdir, ignore_errors=True)
        removed.append(str(workdir))
    return removed


def free_port(ip: str = "127.0.0.1") -> int:
    """A TCP port nobody listens on right now (for tests and local runs)."""
    import socket

    family = socket.AF_INET6 if ":" in ip else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as s:
        s.bind((ip, 0))
        return int(s.getsockname()[1])


def free_control_port() -> int:
    """A tgtd control port whose socket does not exist yet (random, 20000-32767)."""
    for _ in range(100):
        port = 20000 + secrets.randbelow(12768)
        if not any(p.exists() for p in _tgt_socket_paths(port)):
            return port
    raise TargetError(f"no free tgtd control port found in {TGT_IPC_DIR}")


__all__ = [
    "IscsiTarget",
    "NbdTarget",
    "Target",
    "TargetError",
    "cleanup_leftovers",
    "free_control_port",
    "free_port",
    "iscsi_target",
    "nbd_target",
    "run_local",
]
