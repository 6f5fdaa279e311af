"""Swift's client on the host (``swift_client = host``): rclone in the client namespace, no guest.

The guest is the thesis' client for NFS and iSCSI because this kernel has neither (guest.py), but
Swift's client is a user-space program: in the TCG guest rclone reads 8-10 MiB/s with nothing
emulated in the way, below the 80 % of 100 Mbit/s that "Swift fills the link" needs, so an
impaired Swift below the line says nothing (docs/storage-bench.md, "Swift's client on the host").
Here rclone runs at the host CPU's speed, behind the same emulated link.

The namespace holder (``sleep`` under ``ip netns exec``) gives the run a mount namespace of its
own: the FUSE mount at ``mounts.MOUNT_POINT`` is invisible to the host and to other runs, and ends
with the holder. Commands run in it through ``nsenter``. One page cache serves client and server
here, so the client's cache is not dropped (that would drop the server's too): each measured round
starts on a fresh mount instead (``HostClient.cold``), and each round's link bytes show that every
byte crossed the link (amplification about 1, not 0).
"""

from __future__ import annotations

import contextlib
import logging
import os
import shlex
import shutil
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil

from qoelab.emulation.system import ENV_MARK, find_tool, kill_processes, marked_env
from qoelab.emulation.topology import EmulatedLink
from qoelab.errors import QoelabError
from qoelab.storage import iobench
from qoelab.vm.shell import GuestCommandError

log = logging.getLogger("qoelab.storage.hostclient")
CLIENT_PROGRAMS = ("rclone", "fusermount3")  # Debian packages rclone and fuse3


class NamespaceShell:
    """The ``Shell`` of the client namespace: ``sh -c`` through ``nsenter`` into the
    holder's mount and network namespaces, marked with the run's prefix."""

    def __init__(self, holder_pid: int, prefix: str) -> None:
        self.holder_pid = holder_pid
        self.prefix = prefix

    def prefix_argv(self) -> list[str]:
        """The argv before a command's own words (``iobench`` appends the tool and its arguments)."""
        return [find_tool("nsenter", "util-linux"), "-t", str(self.holder_pid), "-m", "-n"]

    def run(self, command: str, timeout: float = 120, check: bool = True,
            stdin: bytes | None = None) -> subprocess.CompletedProcess[str]:  # fmt: skip
        argv = [*self.prefix_argv(), "sh", "-c", command]
        try:
            res = subprocess.run(argv, input=stdin, capture_output=True, timeout=timeout,
                                 env=marked_env(self.prefix), check=False)  # fmt: skip
        except subprocess.TimeoutExpired:
            raise GuestCommandError(
                f"in the client namespace: {command!r} did not end within {timeout:g} s"
            ) from None
        result = subprocess.CompletedProcess(argv, res.returncode, res.stdout.decode(errors="replace"),
                                             res.stderr.decode(errors="replace"))  # fmt: skip
        if check and result.returncode != 0:
            tail = (result.stderr or result.stdout).strip()[-400:]
            raise GuestCommandError(
                f"in the client namespace: {command!r} exited {result.returncode}: {tail}"
            )
        return result


@dataclass
class HostClient:
    """The families' client when rclone runs on the host: its shell, the tool's path there, and where
    rclone keeps its configuration and log (the run's work directory, not root's home)."""

    shell: NamespaceShell
    link: EmulatedLink
    home: str
    tool: str = field(default_factory=lambda: str(iobench.binary()))
    drops_caches: bool = False  # one page cache with the server: see the module's docstring
    cpu_source: str = "the host's /proc/stat (client, link emulator and servers share its CPUs)"
    remount: Callable[[], object] | None = None  # set once mounted: unmount, then mount the same again

    def cold(self) -> None:
        """A cold client for the next round: rclone mounted afresh, so its HTTP connections are new
        and the kernel keeps nothing of the mount; the server's cache stays warm. Connections kept
        from the reheat over the unimpaired link read 2-4 times slower on the impaired one
        (docs/storage-bench.md, "Connections kept from the reheat")."""
        if self.remount is not None:
            self.remount()

    def mkdir(self, path: str) -> None:
        self.shell.run(f"mkdir -p {shlex.quote(path)}", timeout=120)

    def provenance(self) -> dict[str, Any]:
        return {"role": "storage client", "where": "host, the link's client namespace (swift_client = host)",
                "kernel": os.uname().release, "tcp": self.link.tcp.get("client", {}),
                "accel": None}  # fmt: skip


def unusable() -> str:
    """Why rclone cannot mount on this host ('' when it can)."""
    missing = [p for p in CLIENT_PROGRAMS if not shutil.which(p)]
    if missing:
        return f"{' and '.join(missing)} not installed (Debian packages rclone and fuse3)"
    if not Path("/dev/fuse").exists():
        return "no /dev/fuse on this host"
    return ""


def _which(program: str) -> bool:
    return any(
        os.access(Path(d) / program, os.X_OK) for d in os.environ.get("PATH", "").split(os.pathsep) if d
    )


def _kill_marked_clients(prefix: str) -> None:
    """rclone daemons of this run still alive (a failed unmount): they would hold the mount."""
    ours = []
    for proc in psutil.process_iter():
        with contextlib.suppress(psutil.Error, OSError):
            if proc.name() == "rclone" and (proc.environ().get(ENV_MARK) or "").startswith(prefix):
                ours.append(proc)
    kill_processes(ours, log)


@contextlib.contextmanager
def host_client(
    link: EmulatedLink, prefix: str, workdir: Path, ready_timeout_s: float = 10.0
) -> Iterator[HostClient]:
    """A namespace holder on the link's client side; yields the client and always ends it."""
    why = unusable()
    if why:
        raise QoelabError(f"swift_client = host: {why}")
    workdir.mkdir(parents=True, exist_ok=True)
    holder = link.popen_in("c", ["sleep", "infinity"])
    try:
        # The holder has its namespaces once ``ip netns exec`` has become ``sleep``.
        deadline = time.monotonic() + ready_timeout_s
        while _comm(holder.pid) != "sleep":
            if holder.poll() is not None or time.monotonic() > deadline:
                raise QoelabError(f"the client namespace's holder did not start (exit {holder.poll()})")
            time.sleep(0.02)
        yield HostClient(NamespaceShell(holder.pid, prefix), link, str(workdir))
    finally:
        _kill_marked_clients(prefix)
        holder.kill()
        holder.wait(timeout=10)


def _comm(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""
