"""Host side of a VOSE trial: where the CPU time went.

VOSE pins a sender and a receiver to their own cores in two namespaces joined by a veth pair. This
module samples per-CPU time from /proc/stat and per-thread time from /proc/<pid>/task. The CPU's
provenance is ``qoelab.hostfacts``, the interfaces' offloads are in ``offloads.py``, the CPU quota
(the stand-in for a slower CPU) in ``quota.py``.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

log = logging.getLogger("qoelab.vose.host")

CLK_TCK = os.sysconf("SC_CLK_TCK")

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
