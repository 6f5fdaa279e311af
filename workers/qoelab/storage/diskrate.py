"""An optional disk rate for the storage targets: the thesis' server disk (``dd`` direct: 110 MiB/s
read, 100 MiB/s write; notes §5.13) mimicked by the block I/O controller of a cgroup holding the
target's server processes (ganesha and fuse2fs, tgtd, the Swift servers).

cgroup v2 sets ``io.max`` (``rbps``/``wbps``) on the disk under the backing store; cgroup v1 (this
lab's hosts) sets blkio's ``throttle.read_bps_device`` and ``throttle.write_bps_device``. Either
limits the I/O the servers issue themselves: reads that miss the page cache, O_DIRECT, and the
writeback an fsync starts. On cgroup v1 the kernel's flusher threads write dirty pages back outside
the cgroup, so buffered writes that are never synced reach the disk unthrottled; v2 charges them to
the cgroup. The disk baseline runs inside the cgroup, so every result records the rate that held.
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from qoelab.errors import ParameterError

MIB = 1 << 20
THESIS = (110, 100)  # MiB/s read, write (Appendix B)
RATE_MAX_MIB_S = 100_000
_V2_ROOT = Path("/sys/fs/cgroup")
_V1_ROOT = Path("/sys/fs/cgroup/blkio")
_SPEC = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(?:/\s*(\d+(?:\.\d+)?))?\s*(?:mib/s)?\s*$", re.IGNORECASE)


class DiskRateError(RuntimeError):
    """The host cannot throttle the backing store (no block I/O controller, no block device)."""


@dataclass(frozen=True)
class DiskRate:
    """Read and write ceilings in bytes per second."""

    read_bps: int
    write_bps: int

    @classmethod
    def parse(cls, text: str, field: str = "disk_rate") -> DiskRate:
        """``thesis`` (110/100), ``R/W`` or one number for both, in MiB/s."""
        if text.strip().lower() == "thesis":
            return cls(THESIS[0] * MIB, THESIS[1] * MIB)
        m = _SPEC.match(text)
        if not m:
            raise ParameterError(
                field, f"must be 'thesis', 'R/W' or one rate in MiB/s (e.g. 110/100), got {text!r}"
            )
        read = float(m.group(1))
        write = float(m.group(2)) if m.group(2) else read
        for name, value in (("read", read), ("write", write)):
            if not 1 <= value <= RATE_MAX_MIB_S:
                raise ParameterError(field, f"{name} rate must be 1..{RATE_MAX_MIB_S} MiB/s, got {value:g}")
        return cls(round(read * MIB), round(write * MIB))

    def describe(self) -> str:
        return f"{self.read_bps / MIB:g}/{self.write_bps / MIB:g} MiB/s"


def controller() -> tuple[str, Path]:
    """("v2", root) or ("v1", blkio's root) where this host can make a throttled cgroup."""
    v2 = _V2_ROOT / "cgroup.controllers"
    if v2.is_file() and "io" in v2.read_text().split():
        if "io" not in (_V2_ROOT / "cgroup.subtree_control").read_text().split():
            raise DiskRateError("cgroup v2's io controller is not enabled for child groups "
                                "(echo +io > /sys/fs/cgroup/cgroup.subtree_control)")  # fmt: skip
        return "v2", _V2_ROOT
    if (_V1_ROOT / "blkio.throttle.read_bps_device").is_file():
        return "v1", _V1_ROOT
    raise DiskRateError("no block I/O controller: neither cgroup v2's io nor v1's blkio is mounted")


def unavailable() -> str:
    """Why disk_rate cannot work on this host, or '' when it can (for the worker's capabilities)."""
    try:
        _, root = controller()
    except (DiskRateError, OSError) as err:
        return str(err)
    return "" if os.access(root, os.W_OK) else f"{root} is not writable (run the worker as root)"


def device_of(path: Path) -> str:
    """``major:minor`` of the whole disk under ``path`` (the throttles take disks, not partitions)."""
    st = os.stat(path)
    major, minor = os.major(st.st_dev), os.minor(st.st_dev)
    sys_dev = Path(f"/sys/dev/block/{major}:{minor}")
    if major == 0 or not sys_dev.exists():
        raise DiskRateError(f"{path} is not on a block device (device {major}:{minor}: tmpfs, overlay?); "
                            "put the work directory on a disk to use disk_rate")  # fmt: skip
    if (sys_dev / "partition").exists():
        return (sys_dev.resolve().parent / "dev").read_text().strip()
    return f"{major}:{minor}"


class Throttle:
    """A cgroup under the block I/O controller; processes added to it share the rate."""

    def __init__(self, path: Path, version: str, device: str, rate: DiskRate) -> None:
        self.path, self.version, self.device, self.rate = path, version, device, rate
        self.added: set[int] = set()

    def limit(self) -> None:
        if self.version == "v2":
            (self.path / "io.max").write_text(
                f"{self.device} rbps={self.rate.read_bps} wbps={self.rate.write_bps}"
            )
        else:
            (self.path / "blkio.throttle.read_bps_device").write_text(f"{self.device} {self.rate.read_bps}")
            (self.path / "blkio.throttle.write_bps_device").write_text(f"{self.device} {self.rate.write_bps}")

    def add(self, pids: Iterable[int]) -> None:
        """Move these processes (all their threads) in; their later children are born inside."""
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, OSError):  # a process that just ended
                (self.path / "cgroup.procs").write_text(str(pid))
                self.added.add(pid)

    def wrap(self, argv: list[str]) -> list[str]:
        """``argv`` run inside the cgroup (a shell joins it, then execs the command)."""
        return ["sh", "-c", 'echo $$ > "$0" && exec "$@"', str(self.path / "cgroup.procs"), *argv]

    def describe(self) -> dict[str, Any]:
        return {
            "rate": self.rate.describe(),
            "read_bps": self.rate.read_bps,
            "write_bps": self.rate.write_bps,
            "mechanism": "cgroup v2 io.max" if self.version == "v2" else "cgroup v1 blkio.throttle",
            "device": self.device,
            "processes": len(self.added),
            "limits": "server-issued I/O: cache misses, O_DIRECT, fsync writeback"
            + (
                "" if self.version == "v2" else "; not the flusher's writeback of buffered writes (cgroup v1)"
            ),
            "label": "a throttle standing in for the thesis' HDD (110/100 MiB/s), not a disk of that speed",
        }


def _release(path: Path) -> None:
    """Move whatever is still inside back to the root group, then remove the group."""
    procs = path / "cgroup.procs"
    with contextlib.suppress(OSError):
        for pid in procs.read_text().split():
            with contextlib.suppress(OSError):
                (path.parent / "cgroup.procs").write_text(pid)
    with contextlib.suppress(OSError):
        path.rmdir()


@contextlib.contextmanager
def throttled(prefix: str, directory: Path, rate: DiskRate) -> Iterator[Throttle]:
    """A cgroup ``qoelab-<prefix>`` limited to ``rate`` on the disk under ``directory``."""
    version, root = controller()
    device = device_of(directory)
    path = root / f"qoelab-{prefix}"
    path.mkdir(exist_ok=True)
    try:
        throttle = Throttle(path, version, device, rate)
        throttle.limit()
        yield throttle
    finally:
        _release(path)


def cleanup_leftovers(prefix: str) -> list[str]:
    """The cgroups a killed run under ``prefix`` left."""
    removed = []
    for root in (_V1_ROOT, _V2_ROOT):
        for path in root.glob(f"qoelab-{prefix}*") if root.is_dir() else ():
            if path.is_dir():
                _release(path)
                removed.append(f"cgroup {path}")
    return removed
