"""Host checks and process helpers shared by the emulation modules.

Every process we start inside a trial's namespaces carries ``QOELAB_LINK_PREFIX=<prefix>`` in its
environment, so cleanup can find it even after its namespace was unlinked.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import re
import secrets
import shutil
import string
import subprocess
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from qoelab.errors import MissingToolError, PrivilegeError

ENV_MARK = "QOELAB_LINK_PREFIX"
NETNS_DIR = Path("/run/netns")
PREFIX_RE = re.compile(r"^[a-z][a-z0-9]{1,12}$")
_CAP_NET_ADMIN = 12
NET_ADMIN_SENTENCE = (
    "creating network namespaces needs CAP_NET_ADMIN; run the worker as root or with that capability"
)


def new_prefix(base: str = "ql") -> str:
    """A fresh per-trial prefix: ``ql`` + 6 random characters."""
    alphabet = string.ascii_lowercase + string.digits
    return base + "".join(secrets.choice(alphabet) for _ in range(6))


def check_prefix(prefix: str) -> str:
    # Interface names are <prefix>-c and must fit in IFNAMSIZ-1 = 15 characters.
    if not PREFIX_RE.fullmatch(prefix):
        raise ValueError(
            f"prefix must be 2-13 lowercase letters/digits starting with a letter, got {prefix!r}"
        )
    return prefix


def has_net_admin() -> bool:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("CapEff:"):
                return bool(int(line.split()[1], 16) >> _CAP_NET_ADMIN & 1)
    except OSError:
        pass
    return os.geteuid() == 0


def require_net_admin() -> None:
    if not has_net_admin():
        raise PrivilegeError(NET_ADMIN_SENTENCE)


def kill_processes(procs: list[Any], log: Any) -> list[str]:
    """SIGKILL ``procs`` (psutil.Process), wait for them; return what was killed, for the report."""
    import psutil

    killed: list[str] = []
    for proc in procs:
        with contextlib.suppress(psutil.Error):
            desc = f"process {proc.pid} {proc.name()}"
            proc.kill()
            killed.append(desc)
    _gone, alive = psutil.wait_procs(procs, timeout=3)
    for proc in alive:
        log.warning("process %s survived SIGKILL (uninterruptible?)", proc.pid)
    return killed


def find_tool(name: str, package: str | None = None) -> str:
    path = shutil.which(name) or next(
        (str(p) for d in ("/usr/sbin", "/sbin", "/usr/bin") if (p := Path(d) / name).exists()), None
    )
    if path is None:
        raise MissingToolError(name, package)
    return path


def tool_version(name: str) -> str | None:
    """First line of ``name --version`` (``-V`` for ping), or None when the tool is missing."""
    try:
        path = find_tool(name)
    except MissingToolError:
        return None
    flag = "-V" if name == "ping" else "--version"
    try:
        out = subprocess.run([path, flag], capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.TimeoutExpired):
        return None
    text = (out.stdout or out.stderr).strip()
    return text.splitlines()[0] if text else None


def ns_inode(name: str) -> int | None:
    try:
        return (NETNS_DIR / name).stat().st_ino
    except OSError:
        return None


def ns_exec_argv(ns: str, argv: Sequence[str]) -> list[str]:
    return [find_tool("ip", "iproute2"), "netns", "exec", ns, *argv]


def marked_env(prefix: str, extra: dict[str, str] | None = None) -> dict[str, str]:
    env = dict(os.environ)
    env[ENV_MARK] = prefix
    env.setdefault("LC_ALL", "C")
    if extra:
        env.update(extra)
    return env


_libc = ctypes.CDLL(None, use_errno=True)
_CLONE_NEWNET = 0x40000000


def _setns(fd: int) -> None:
    if _libc.setns(fd, _CLONE_NEWNET) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"setns failed: {os.strerror(err)}")


def create_netns(name: str) -> None:
    """``ip netns add``: fork+exec is safe in a threaded process, unlike pyroute2's forked helper."""
    out = subprocess.run([find_tool("ip", "iproute2"), "netns", "add", name], capture_output=True, text=True)
    if out.returncode != 0:
        raise OSError(f"cannot create network namespace {name}: {out.stderr.strip()}")


@contextlib.contextmanager
def in_netns(name: str) -> Iterator[None]:
    """Run the block with this thread (only) in namespace ``name``; sockets made there stay there.

    No fork, so it is safe while other threads (the emulator's output readers, Celery) run.
    """
    own = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
    try:
        target = os.open(NETNS_DIR / name, os.O_RDONLY)
    except FileNotFoundError:
        os.close(own)
        raise OSError(f"network namespace {name} does not exist") from None
    try:
        _setns(target)
        try:
            yield
        finally:
            _setns(own)
    finally:
        os.close(target)
        os.close(own)


@contextlib.contextmanager
def iproute_in(name: str | None = None) -> Iterator[Any]:
    """An IPRoute socket bound to namespace ``name`` (None: this one), opened via :func:`in_netns`."""
    from pyroute2 import IPRoute

    if name is None:
        ipr = IPRoute()
    else:
        with in_netns(name):
            ipr = IPRoute()
    try:
        yield ipr
    finally:
        ipr.close()
