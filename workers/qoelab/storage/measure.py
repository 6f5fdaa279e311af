"""What every storage family measures beside its own numbers: the link's counters and the CPU of
the client and the server (notes §3.1: the author collected interface counters and CPU usage).

``counters(link)``: packets and bytes the emulator took in, both directions (what a capture at the
link sees). ``CpuProbe``: the guest's CPU busy fraction over a phase, from its ``/proc/stat`` before
and after (read over the guest shell), and the CPU seconds the target's server processes used
(psutil: the processes marked ``QOELAB_LINK_PREFIX=<prefix>`` that are storage servers, the target's
own processes and their children). The thesis found the CPU below 10 % in most experiments; here the
guest runs under TCG, so its busy fraction says when the client, not the network, set the pace.
``disk_baseline``: the backing store's ``dd`` speed (the thesis' Appendix B baseline).
"""

from __future__ import annotations

import contextlib
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil

from qoelab.emulation.system import find_tool
from qoelab.emulation.topology import EmulatedLink
from qoelab.storage.targets import find_servers
from qoelab.vm.shell import Shell

GUEST_TOOL = "/usr/local/bin/storage-iobench"


def counters(link: EmulatedLink) -> tuple[int, int]:
    """Packets and bytes the emulator has taken in, both directions (what a capture at the link sees)."""
    stats = link.emulator.stats()
    return (
        sum(stats[d]["rx_packets"] for d in ("up", "down")),
        sum(stats[d]["rx_bytes"] for d in ("up", "down")),
    )


def parse_proc_stat(text: str) -> tuple[int, int, int]:
    """(total, idle, iowait) jiffies from the aggregate ``cpu`` line of /proc/stat.

    Total excludes guest/guest_nice (already counted in user/nice)."""
    for line in text.splitlines():
        parts = line.split()
        if parts and parts[0] == "cpu":
            v = [int(x) for x in parts[1:]]
            v += [0] * (8 - len(v))
            return sum(v[:8]), v[3], v[4]
    raise ValueError("no aggregate cpu line in /proc/stat")


def busy_fraction(before: tuple[int, int, int], after: tuple[int, int, int]) -> tuple[float, float]:
    """(busy, iowait) fractions of all CPUs between two /proc/stat samples; idle and iowait are not busy."""
    total = after[0] - before[0]
    if total <= 0:
        return 0.0, 0.0
    idle, iowait = after[1] - before[1], after[2] - before[2]
    return max(0.0, (total - idle - iowait) / total), max(0.0, iowait / total)


@dataclass
class CpuProbe:
    """Samples the guest's /proc/stat and the server processes' CPU times; ``phase()`` around a phase."""

    shell: Shell
    prefix: str
    target: Any = None
    client_source: str = "the guest's /proc/stat (all vCPUs; idle and iowait not busy)"
    last: dict[str, Any] = field(default_factory=dict)

    def _guest(self) -> tuple[int, int, int]:
        return parse_proc_stat(self.shell.run("head -1 /proc/stat", timeout=30).stdout)

    def _server_procs(self) -> list[psutil.Process]:
        procs: dict[int, psutil.Process] = {p.pid: p for p in find_servers(self.prefix)}
        for popen in getattr(self.target, "processes", {}).values():
            with contextlib.suppress(psutil.Error, OSError):
                procs.setdefault(popen.pid, psutil.Process(popen.pid))
        for proc in list(procs.values()):
            with contextlib.suppress(psutil.Error, OSError):
                for child in proc.children(recursive=True):
                    procs.setdefault(child.pid, child)
        return list(procs.values())

    def _server(self) -> dict[int, tuple[float, float, float]]:
        """pid -> (create time, user s, system s), the reaped children's times included."""
        out: dict[int, tuple[float, float, float]] = {}
        for proc in self._server_procs():
            with contextlib.suppress(psutil.Error, OSError):
                t = proc.cpu_times()
                out[proc.pid] = (proc.create_time(), t.user + t.children_user, t.system + t.children_system)
        return out

    def start(self) -> tuple[Any, ...]:
        return self._guest(), self._server(), time.monotonic()

    def stop(self, mark: tuple[Any, ...]) -> dict[str, Any]:
        guest0, server0, t0 = mark
        guest1, server1 = self._guest(), self._server()
        busy, iowait = busy_fraction(guest0, guest1)
        user = system = 0.0
        for pid, (created, u, s) in server1.items():
            before = server0.get(pid)
            if before is not None and before[0] == created:
                u, s = u - before[1], s - before[2]
            user, system = user + max(0.0, u), system + max(0.0, s)
        self.last = {
            "cpu_client": round(busy, 4),
            "client_iowait": round(iowait, 4),
            "cpu_server": round(user + system, 3),
            "server_user_s": round(user, 3),
            "server_system_s": round(system, 3),
            "server_processes": len(server1),
            "wall_s": round(time.monotonic() - t0, 3),
            "client_source": self.client_source,
            "server_source": "psutil: the target's server processes and their children",
        }
        return self.last

    @contextlib.contextmanager
    def phase(self) -> Iterator[dict[str, Any]]:
        """``with probe.phase() as cpu:`` — ``cpu`` is filled when the block ends (not on failure)."""
        result: dict[str, Any] = {}
        mark = self.start()
        yield result
        result.update(self.stop(mark))


@contextlib.contextmanager
def maybe_phase(probe: CpuProbe | None) -> Iterator[dict[str, Any]]:
    """``probe.phase()``, or an empty dict when there is no probe."""
    if probe is None:
        yield {}
    else:
        with probe.phase() as cpu:
            yield cpu


def disk_baseline(directory: Path, size_mib: int = 64,
                  wrap: Callable[[list[str]], list[str]] | None = None) -> dict[str, Any]:  # fmt: skip
    """The backing store's own speed, as the thesis' Appendix B measured its server's disk: ``dd``
    with O_DIRECT in 1 MiB blocks, written (with a final fsync) then read, in ``directory``; inside
    the disk-rate cgroup when ``wrap`` puts it there (``diskrate.Throttle.wrap``)."""
    path = Path(directory) / ".qoelab-dd-baseline"
    dd = find_tool("dd", "coreutils")
    out: dict[str, Any] = {
        "tool": "dd, O_DIRECT, 1 MiB blocks",
        "bytes": size_mib << 20,
        "path": str(directory),
    }
    try:
        for name, argv in (
            ("write", [dd, "if=/dev/zero", f"of={path}", "bs=1M", f"count={size_mib}", "oflag=direct",
                       "conv=fsync"]),
            ("read", [dd, f"if={path}", "of=/dev/null", "bs=1M", "iflag=direct"]),
        ):  # fmt: skip
            t0 = time.monotonic()
            res = subprocess.run(
                wrap(argv) if wrap else argv, capture_output=True, text=True, timeout=300, check=False
            )
            seconds = time.monotonic() - t0
            if res.returncode != 0:  # e.g. a file system without O_DIRECT: say so, the run goes on
                out[f"{name}_error"] = res.stderr.strip()[-200:]
                break
            out[f"{name}_mib_s"] = round(size_mib / seconds, 1)
    finally:
        path.unlink(missing_ok=True)
    return out
