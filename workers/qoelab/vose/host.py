"""Host side of a VOSE trial: what CPU ran it, where the CPU time went, NIC offloads, a CPU quota.

VOSE pins a sender and a receiver to their own cores in two namespaces joined by a veth pair. This
module records the CPU's provenance, samples per-CPU time from /proc/stat and per-thread time from
/proc/<pid>/task, switches the veth's offloads with ethtool, and stands in for a slower CPU with a
cgroup CPU bandwidth quota (time slicing; the clock frequency is not changed).
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import platform
import re
import subprocess
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

from qoelab.emulation.system import check_prefix, find_tool, ns_exec_argv
from qoelab.errors import MissingToolError, ParameterError, QoelabError

log = logging.getLogger("qoelab.vose.host")

CLK_TCK = os.sysconf("SC_CLK_TCK")

# ---------------------------------------------------------------------------------------------------
# CPU provenance

PROVENANCE_FLAGS = (
    "aes",
    "sha_ni",
    "avx",
    "avx2",
    "avx512f",
    "ssse3",
    "pclmulqdq",
    "constant_tsc",
    "nonstop_tsc",
    "rdtscp",
    "tsc_known_freq",
)
CPUFREQ_ABSENT = "not exposed (frequency cannot be changed here)"
SYS_CPU = Path("/sys/devices/system/cpu")


def _first_cpuinfo_block(text: str) -> dict[str, str]:
    info: dict[str, str] = {}
    for line in text.splitlines():
        if not line.strip():
            if info:
                break  # every processor block repeats the model and flags
            continue
        key, sep, value = line.partition(":")
        if sep:
            info.setdefault(key.strip(), value.strip())
    return info


def _cpufreq() -> dict[int, dict[str, Any]] | str:
    found: dict[int, dict[str, Any]] = {}
    for cpu_dir in SYS_CPU.glob("cpu[0-9]*"):
        freq_dir = cpu_dir / "cpufreq"
        if not freq_dir.is_dir():
            continue
        entry: dict[str, Any] = {}
        with contextlib.suppress(OSError, ValueError):
            entry["scaling_cur_freq"] = int((freq_dir / "scaling_cur_freq").read_text())  # kHz
        with contextlib.suppress(OSError):
            entry["governor"] = (freq_dir / "scaling_governor").read_text().strip()
        found[int(cpu_dir.name[3:])] = entry
    return dict(sorted(found.items())) or CPUFREQ_ABSENT


def cpu_provenance() -> dict[str, Any]:
    """Model, crypto/TSC flags, CPU count, kernel and cpufreq state, for a trial's record.

    ``cpufreq`` maps each CPU to ``scaling_cur_freq`` (kHz) and ``governor``, or is the sentence
    :data:`CPUFREQ_ABSENT` where the kernel exposes no cpufreq (typical in VMs).
    """
    info = _first_cpuinfo_block(Path("/proc/cpuinfo").read_text())
    # x86 says "model name" and "flags"; arm64 says "Model"/"CPU part" and "Features".
    model = info.get("model name") or info.get("Model") or info.get("Hardware") or platform.processor()
    present = set((info.get("flags") or info.get("Features") or "").split())
    flags = [f for f in PROVENANCE_FLAGS if f in present]
    return {
        "model": model or "unknown",
        "flags": flags,
        "invariant_tsc": {"constant_tsc", "nonstop_tsc"} <= present,
        "cpus": os.cpu_count(),
        "kernel": platform.release(),
        "cpufreq": _cpufreq(),
    }


# ---------------------------------------------------------------------------------------------------
# Per-CPU time from /proc/stat

# The fields that partition a CPU's time; guest and guest_nice after them are already inside user/nice.
STAT_FIELDS = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")


def parse_proc_stat(text: str) -> dict[int, tuple[int, ...]]:
    """The ``cpuN`` lines of /proc/stat as {N: tick counters}; the all-CPU ``cpu`` line is left out."""
    cpus: dict[int, tuple[int, ...]] = {}
    for line in text.splitlines():
        name, _, rest = line.partition(" ")
        if name.startswith("cpu") and name[3:].isdigit():
            cpus[int(name[3:])] = tuple(int(v) for v in rest.split())
    return cpus


def fractions(before: Sequence[int], after: Sequence[int]) -> dict[str, float]:
    """Fractions of the time between two /proc/stat readings of one CPU, by kind.

    ``user`` includes nice and ``idle`` includes iowait; ``busy`` = 1 - idle - iowait. The
    denominator is the sum of the counters' growth, so the kinds add up to 1 even when a reading
    came late. ``busy_s`` and ``span_s`` are the busy and accounted CPU-seconds (ticks / SC_CLK_TCK).
    An interval in which no tick was accounted gives zeros.
    """
    # iowait is known to step backwards on an idle CPU; a negative growth counts as none.
    d = {name: max(0, a - b) for name, b, a in zip(STAT_FIELDS, before, after, strict=False)}
    total = sum(d.values())
    idle = d.get("idle", 0) + d.get("iowait", 0)
    parts = {
        "user": d.get("user", 0) + d.get("nice", 0),
        "system": d.get("system", 0),
        "irq": d.get("irq", 0),
        "softirq": d.get("softirq", 0),
        "idle": idle,
        "steal": d.get("steal", 0),
        "busy": total - idle,
    }
    out = {k: (v / total if total else 0.0) for k, v in parts.items()}
    out["busy_s"] = (total - idle) / CLK_TCK
    out["span_s"] = total / CLK_TCK
    return out


class CpuSampler:
    """Samples chosen CPUs' /proc/stat counters every ``interval_s`` in a daemon thread.

    ``with CpuSampler([0, 1]) as s: ...`` reads once on entry, every interval, and once on exit;
    afterwards :meth:`series` gives each interval and :meth:`totals` the whole window.
    """

    def __init__(self, cpus: Sequence[int], interval_s: float = 1.0) -> None:
        if interval_s <= 0:
            raise ValueError(f"interval_s must be positive, got {interval_s}")
        self.cpus = tuple(cpus)
        self.interval_s = interval_s
        self._readings: list[tuple[float, dict[int, tuple[int, ...]]]] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._t0 = 0.0

    def _read(self) -> None:
        raw = parse_proc_stat(Path("/proc/stat").read_text())
        t = time.monotonic() - self._t0
        # A CPU taken offline meanwhile drops out of /proc/stat; its intervals are then skipped.
        reading = {cpu: raw[cpu] for cpu in self.cpus if cpu in raw}
        with self._lock:
            self._readings.append((t, reading))

    def _run(self) -> None:
        n = 1
        # Deadlines from the start rather than a wait after each read, so the intervals do not drift.
        while not self._stop.wait(max(0.0, self._t0 + n * self.interval_s - time.monotonic())):
            self._read()
            n += 1

    def __enter__(self) -> CpuSampler:
        online = parse_proc_stat(Path("/proc/stat").read_text())
        missing = [cpu for cpu in self.cpus if cpu not in online]
        if missing:
            raise ValueError(f"CPU {missing[0]} is not online (no cpu{missing[0]} line in /proc/stat)")
        self._readings.clear()
        self._stop.clear()
        self._t0 = time.monotonic()
        self._read()
        self._thread = threading.Thread(target=self._run, name="qoelab-cpu-sampler", daemon=True)
        self._thread.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        self._read()

    def series(self) -> list[dict[str, Any]]:
        """Per interval and CPU: ``t`` (s since start, at the interval's end), ``cpu`` and the fractions."""
        with self._lock:
            readings = list(self._readings)
        rows: list[dict[str, Any]] = []
        for (_, before), (t, after) in zip(readings, readings[1:], strict=False):
            for cpu in self.cpus:
                if cpu not in before or cpu not in after:
                    continue
                f = fractions(before[cpu], after[cpu])
                if f["span_s"] == 0:
                    continue  # e.g. the exit reading right after a periodic one
                rows.append({"t": round(t, 3), "cpu": cpu, **f})
        return rows

    def totals(self, cpu: int) -> dict[str, float]:
        """The fractions over the whole window, from its first and last readings of ``cpu``.

        ``wall_s`` is the wall-clock time between those readings.
        """
        with self._lock:
            seen = [(t, r[cpu]) for t, r in self._readings if cpu in r]
        if not seen:
            raise ValueError(f"CPU {cpu} was not sampled")
        (t_first, first), (t_last, last) = seen[0], seen[-1]
        return {**fractions(first, last), "wall_s": round(t_last - t_first, 3)}


# ---------------------------------------------------------------------------------------------------
# Per-thread time


def parse_task_stat(text: str) -> dict[str, Any]:
    """One /proc/<pid>/task/<tid>/stat line: ``comm``, ``utime`` and ``stime`` (s), ``processor``."""
    # comm is free text (spaces, parentheses), so fields are counted after the last ')'.
    head, _, tail = text.rpartition(")")
    fields = tail.split()  # fields[0] is field 3 of proc(5), "state"
    return {
        "comm": head.partition("(")[2],
        "utime": int(fields[11]) / CLK_TCK,
        "stime": int(fields[12]) / CLK_TCK,
        "processor": int(fields[36]),
    }


def thread_times(pid: int) -> dict[int, dict[str, Any]]:
    """Per thread of ``pid``: {tid: {comm, utime, stime, processor}}; {} when the process is gone.

    ``processor`` is the CPU the thread last ran on.
    """
    task_dir = Path(f"/proc/{pid}/task")
    try:
        tids = os.listdir(task_dir)
    except OSError:
        return {}
    times: dict[int, dict[str, Any]] = {}
    for tid in tids:
        try:
            text = (task_dir / tid / "stat").read_text()
        except OSError:
            continue  # the thread ended between the listing and the read
        times[int(tid)] = parse_task_stat(text)
    return dict(sorted(times.items()))


# ---------------------------------------------------------------------------------------------------
# NIC offloads inside a namespace

OFFLOAD_FEATURES = (
    "tx-checksumming",
    "rx-checksumming",
    "scatter-gather",
    "tcp-segmentation-offload",
    "generic-segmentation-offload",
    "generic-receive-offload",
)
ETHTOOL_TIMEOUT_S = 10


class OffloadError(QoelabError):
    """An interface's offloads could not be read, or a requested setting did not take."""


def parse_offloads(text: str) -> dict[str, bool | list[str]]:
    """``ethtool -k`` output as {feature: on?} for :data:`OFFLOAD_FEATURES`, plus ``fixed``: [names].

    A feature missing from the output is missing from the result. ethtool shows an aggregate
    (tx-checksumming, ...) as on when any of its sub-features is on.
    """
    state: dict[str, bool | list[str]] = {}
    fixed: list[str] = []
    for line in text.splitlines():
        if line[:1].isspace():
            continue  # a sub-feature of the aggregate above it
        name, sep, rest = line.partition(":")
        words = rest.split()
        if not sep or name not in OFFLOAD_FEATURES or not words:
            continue
        state[name] = words[0] == "on"
        if "[fixed]" in rest:
            fixed.append(name)
    state["fixed"] = fixed
    return state


def _ethtool(ns: str, args: Sequence[str]) -> subprocess.CompletedProcess[str]:
    try:
        ethtool = find_tool("ethtool")
    except MissingToolError:
        raise OffloadError("ethtool is not installed (Debian package ethtool)") from None
    try:
        return subprocess.run(
            ns_exec_argv(ns, [ethtool, *args]), capture_output=True, text=True, timeout=ETHTOOL_TIMEOUT_S
        )
    except subprocess.TimeoutExpired:
        raise OffloadError(
            f"ethtool {' '.join(args)} in namespace {ns} did not finish within {ETHTOOL_TIMEOUT_S} s"
        ) from None


def _said(out: subprocess.CompletedProcess[str]) -> str:
    lines = [ln.strip() for ln in (out.stderr or out.stdout).splitlines() if ln.strip()]
    return lines[-1] if lines else f"exit status {out.returncode}"


def read_offloads(ns: str, ifname: str) -> dict[str, bool | list[str]]:
    """The :data:`OFFLOAD_FEATURES` of ``ifname`` in namespace ``ns`` (see :func:`parse_offloads`)."""
    out = _ethtool(ns, ["-k", ifname])
    if out.returncode != 0:
        raise OffloadError(f"cannot read the offloads of {ifname} in namespace {ns}: {_said(out)}")
    return parse_offloads(out.stdout)


def set_offloads(
    ns: str,
    ifname: str,
    *,
    tx_csum: bool,
    rx_csum: bool,
    tso: bool = False,
    gso: bool = False,
    gro: bool = False,
    sg: bool | None = None,
) -> dict[str, bool | list[str]]:
    """Switch ``ifname``'s offloads with ``ethtool -K`` and return them as read back.

    Only the features set here are checked: on a veth, tx off also switches off dependants such as
    TSO, which is the kernel's doing, not a failure. ``sg`` None leaves scatter-gather alone.
    """
    wanted = {
        "tx-checksumming": tx_csum,
        "rx-checksumming": rx_csum,
        "tcp-segmentation-offload": tso,
        "generic-segmentation-offload": gso,
        "generic-receive-offload": gro,
    }
    args = ["-K", ifname]
    for short, value in (("tx", tx_csum), ("rx", rx_csum), ("tso", tso), ("gso", gso), ("gro", gro)):
        args += [short, "on" if value else "off"]
    if sg is not None:
        wanted["scatter-gather"] = sg
        args += ["sg", "on" if sg else "off"]
    # ethtool -K exits 1 when nothing needed changing, too; the read-back is what counts.
    out = _ethtool(ns, args)
    state = read_offloads(ns, ifname)
    for feature, value in wanted.items():
        if feature not in state:
            raise OffloadError(f"ethtool does not report {feature} for {ifname} in namespace {ns}")
        if state[feature] != value:
            why = " (the driver fixes it)" if feature in state["fixed"] else f" (ethtool: {_said(out)})"
            raise OffloadError(
                f"{feature} stayed {'on' if state[feature] else 'off'} on {ifname} in namespace {ns} "
                f"although {'on' if value else 'off'} was asked for{why}"
            )
    return state


# ---------------------------------------------------------------------------------------------------
# CPU bandwidth quota: the stand-in for a slower CPU

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
