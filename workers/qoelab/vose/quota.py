"""A cgroup CPU bandwidth quota per end: the lab's stand-in for the thesis' lower CPU frequency.

Time slicing, not a slower clock: with a quota of 0.5 the end runs at full speed for half of every
period. cgroup v2 ``cpu.max`` where the unified hierarchy has the cpu controller, else cgroup v1
``cpu.cfs_quota_us``.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import re
import time
from pathlib import Path
from types import TracebackType
from typing import Any

from qoelab.emulation.system import check_prefix
from qoelab.errors import ParameterError, QoelabError

log = logging.getLogger("qoelab.vose.quota")

CGROUP_ROOT = Path("/sys/fs/cgroup")
CGROUP_V1_CPU = CGROUP_ROOT / "cpu"
QUOTA_NOTE = "a CPU bandwidth quota (time slicing), not a lower clock frequency"
KIND_V1 = "cgroup v1 cpu.cfs_quota_us"
KIND_V2 = "cgroup v2 cpu.max"
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
RMDIR_TIMEOUT_S = 5.0


class QuotaError(QoelabError):
    """No writable cgroup CPU controller, or a quota's cgroup could not be made or removed."""


def _v2_has_cpu() -> bool:
    try:
        return "cpu" in (CGROUP_ROOT / "cgroup.controllers").read_text().split()
    except OSError:
        return False


def _v1_has_cpu() -> bool:
    # On a pure v2 host /sys/fs/cgroup/cpu could be an ordinary cgroup that someone named "cpu".
    return (CGROUP_V1_CPU / "cpu.cfs_quota_us").exists()


def _write(path: Path, text: str) -> None:
    # One write(2) per value: cgroup files act on each write, and buffering could split or merge them.
    fd = os.open(path, os.O_WRONLY)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)


def _pids(cgroup: Path) -> list[int]:
    try:
        return [int(p) for p in (cgroup / "cgroup.procs").read_text().split()]
    except FileNotFoundError:
        return []


def _remove_cgroup(cgroup: Path, timeout_s: float = RMDIR_TIMEOUT_S) -> None:
    """Move ``cgroup``'s processes to its parent, then rmdir it once its cgroup.procs is empty."""
    deadline = time.monotonic() + timeout_s
    while True:
        pids = _pids(cgroup)
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):  # it exited meanwhile
                _write(cgroup.parent / "cgroup.procs", str(pid))
        if not _pids(cgroup):
            try:
                cgroup.rmdir()
                return
            except FileNotFoundError:
                return
            except OSError as err:
                # EBUSY lasts while an exiting task is still being unlinked from the cgroup.
                if err.errno != errno.EBUSY:
                    raise QuotaError(f"cannot remove cgroup {cgroup}: {err.strerror}") from None
        if time.monotonic() > deadline:
            raise QuotaError(f"cgroup {cgroup} is still busy after {timeout_s:g} s (processes {pids})")
        time.sleep(0.02)


class CpuQuota:
    """A cgroup CPU bandwidth quota of ``fraction`` of one core: the stand-in for a slower CPU.

    It is time slicing (the group runs at full clock for ``fraction`` of every ``period_us``, then
    waits), not a lower clock frequency. Uses cgroup v2 ``cpu.max`` at /sys/fs/cgroup/<name> when the
    unified hierarchy has the cpu controller, else cgroup v1 ``cpu.cfs_quota_us`` at
    /sys/fs/cgroup/cpu/<name>. ``fraction`` 1.0 sets no limit but still makes the cgroup, so every
    trial is accounted the same way. On exit the remaining processes go to the parent cgroup.
    """

    def __init__(self, name: str, fraction: float, period_us: int = 100_000) -> None:
        if not _NAME_RE.fullmatch(name):
            raise ParameterError("name", f"a cgroup name is letters, digits, '_', '.', '-', got {name!r}")
        if not 0 < fraction <= 1:
            raise ParameterError("fraction", f"must be in (0, 1] of one core, got {fraction}")
        if not 1000 <= period_us <= 1_000_000:
            raise ParameterError(
                "period_us", f"must be 1000 to 1000000 (the kernel's bounds), got {period_us}"
            )
        quota_us = -1 if fraction == 1 else round(fraction * period_us)
        if 0 <= quota_us < 1000:
            raise ParameterError(
                "fraction",
                f"{fraction} of a {period_us} µs period is below the kernel's least quota, 1000 µs",
            )
        self.name = name
        self.fraction = fraction
        self.period_us = period_us
        self.quota_us = quota_us
        self.kind: str | None = None
        self.path: Path | None = None
        self._active = False
        self._final_stat: dict[str, int] = {}

    def _require_active(self) -> Path:
        if not self._active or self.path is None:
            raise RuntimeError("the CpuQuota is not entered")
        return self.path

    def __enter__(self) -> CpuQuota:
        if _v2_has_cpu() and os.access(CGROUP_ROOT, os.W_OK):
            kind, base = KIND_V2, CGROUP_ROOT
        elif _v1_has_cpu() and os.access(CGROUP_V1_CPU, os.W_OK):
            kind, base = KIND_V1, CGROUP_V1_CPU
        else:
            raise QuotaError(
                "no writable cgroup cpu controller (cgroup v2 cpu.max or v1 cpu.cfs_quota_us) on this host; "
                "the CPU quota needs root and a mounted cpu controller"
            )
        if kind == KIND_V2:
            control = base / "cgroup.subtree_control"
            if "cpu" not in control.read_text().split():
                try:
                    _write(control, "+cpu")
                except OSError as err:
                    raise QuotaError(
                        f"cannot enable the cpu controller in {control}: {err.strerror}"
                    ) from None
        path = base / self.name
        try:
            path.mkdir()
        except FileExistsError:
            raise QuotaError(
                f"cgroup {path} already exists (a previous run's? remove_leftover_quotas removes it)"
            ) from None
        except OSError as err:
            raise QuotaError(f"cannot create cgroup {path}: {err.strerror}") from None
        try:
            if kind == KIND_V2:
                _write(path / "cpu.max", f"{'max' if self.quota_us < 0 else self.quota_us} {self.period_us}")
            else:
                # Period first: the kernel checks a new quota against the period in force.
                _write(path / "cpu.cfs_period_us", str(self.period_us))
                _write(path / "cpu.cfs_quota_us", str(self.quota_us))
        except OSError as err:
            with contextlib.suppress(OSError):
                path.rmdir()
            raise QuotaError(f"cannot set the CPU quota in {path}: {err.strerror}") from None
        self.kind, self.path, self._active = kind, path, True
        self._final_stat = {}
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        path = self._require_active()
        # Keep the last accounting: throttle() and usage_s() still answer after the cgroup is gone.
        self._final_stat = self._stat()
        self._active = False
        try:
            _remove_cgroup(path)
        except QuotaError as err:
            if exc_type is None:
                raise
            log.warning("%s", err)  # do not hide the error that ended the block

    def add(self, pid: int) -> None:
        """Move process ``pid`` (all its threads) into the quota."""
        _write(self._require_active() / "cgroup.procs", str(pid))

    def pids(self) -> list[int]:
        """The processes in the quota now."""
        return _pids(self._require_active())

    def describe(self) -> dict[str, Any]:
        """What was set, for a trial's record."""
        return {
            "kind": self.kind,
            "fraction": self.fraction,
            "period_us": self.period_us,
            "quota_us": self.quota_us,
            "path": str(self.path) if self.path else None,
            "note": QUOTA_NOTE,
        }

    def _stat(self) -> dict[str, int]:
        if not self._active or self.path is None:
            return dict(self._final_stat)
        stat: dict[str, int] = {}
        with contextlib.suppress(OSError):
            for line in (self.path / "cpu.stat").read_text().splitlines():
                key, _, value = line.partition(" ")
                with contextlib.suppress(ValueError):
                    stat[key] = int(value)
        # Where cpu and cpuacct share a v1 mount, the group's CPU time is there too.
        with contextlib.suppress(OSError, ValueError):
            stat["cpuacct.usage"] = int((self.path / "cpuacct.usage").read_text())
        return stat

    def throttle(self) -> dict[str, float]:
        """``nr_periods``, ``nr_throttled`` and ``throttled_s`` (time spent waiting for the quota)."""
        stat = self._stat()
        # v1 counts throttled_time in ns, v2 throttled_usec in µs.
        throttled_s = (
            stat["throttled_usec"] / 1e6 if "throttled_usec" in stat else stat.get("throttled_time", 0) / 1e9
        )
        return {
            "nr_periods": stat.get("nr_periods", 0),
            "nr_throttled": stat.get("nr_throttled", 0),
            "throttled_s": throttled_s,
        }

    def usage_s(self) -> float | None:
        """CPU seconds the group used (v2 usage_usec, or v1 cpuacct.usage if co-mounted), else None."""
        stat = self._stat()
        if "usage_usec" in stat:
            return stat["usage_usec"] / 1e6
        if "cpuacct.usage" in stat:
            return stat["cpuacct.usage"] / 1e9
        return None


def remove_leftover_quotas(prefix: str) -> list[str]:
    """Remove cgroups named ``<prefix>...`` from the v2 and v1 cpu locations; return their paths.

    Their processes move to the parent cgroup first (they are not killed).
    """
    check_prefix(prefix)  # an empty or odd prefix must not reach other users' cgroups
    bases = []
    if (CGROUP_ROOT / "cgroup.controllers").exists():
        bases.append(CGROUP_ROOT)
    if _v1_has_cpu():
        bases.append(CGROUP_V1_CPU)
    removed: list[str] = []
    failed: list[str] = []
    for base in bases:
        for path in sorted(base.glob(prefix + "*")):
            if not (path / "cgroup.procs").exists():
                continue
            try:
                _remove_cgroup(path)
            except QuotaError as err:
                failed.append(str(err))
                continue
            removed.append(str(path))
    if failed:
        raise QuotaError("; ".join(failed))
    return removed
