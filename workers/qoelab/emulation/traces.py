"""Link traces in Mahimahi's format: reading, checking, describing and making them (issue 37).

A trace is a text file of integer millisecond timestamps, one line per opportunity for one
1500-byte packet to leave the bottleneck queue; a timestamp repeated k times gives k packets in that
millisecond. The link replays the file in a loop whose period is the last timestamp (Netravali et
al., "Mahimahi: Accurate Record-and-Replay for HTTP", USENIX ATC 2015; the trace format of its link
shell). The lab's library (``LIBRARY``) ships the public cellular traces of Winstein et al.,
NSDI 2013 (their README). ``make_*`` build synthetic traces: constant, steps, a sawtooth, on/off,
and any rate curve from a CSV of ``time_s,rate_bps`` rows.

A researcher's own trace is uploaded to the backend, checked there with ``parse``, and named in
sweeps as ``upload:N``; the worker running such a trial fetches it into its upload folder
(``uploads_dir``, ``store_upload``), where ``resolve`` finds it.

Reading a bad trace raises :class:`TraceError` naming the file and line. A link profile's
``trace`` (``qoelab.emulation.profile``) is replayed by the userspace emulator (linkemu's
``trace=PATH``, workers/csrc/linkemu_trace.c).
"""

from __future__ import annotations

import csv
import hashlib
import io
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from qoelab.errors import QoelabError

PACKET_BYTES = 1500
MAX_TRACE_BYTES = 32 << 20  # 32 MiB of text: the library's longest trace is 1.1 MB
MAX_PERIOD_MS = 24 * 3600 * 1000  # one day
LIBRARY = Path(__file__).resolve().parent / "trace_library"
UPLOAD_REF = re.compile(r"upload:([1-9][0-9]{0,11})")  # an uploaded trace, by its id at the backend
UPLOADS_ENV = "QOELAB_TRACE_UPLOADS"  # where a host keeps uploaded traces (default below)
DEFAULT_UPLOADS = Path("/var/tmp/qoelab-traces")


class TraceError(QoelabError):
    """A trace that cannot be used; the message names the file and, where one is at fault, the line."""


@dataclass(frozen=True)
class Trace:
    """The delivery opportunities of one direction, ``times_ms`` sorted, looping every ``period_ms``."""

    name: str
    times_ms: np.ndarray
    sha256: str

    @property
    def period_ms(self) -> int:
        return int(self.times_ms[-1])

    @property
    def lines(self) -> int:
        return int(self.times_ms.size)

    @property
    def mean_bps(self) -> float:
        """The capacity over one period: lines × 1500 B × 8 / period."""
        return self.lines * PACKET_BYTES * 8 / (self.period_ms / 1000)

    def series_bps(self, window_ms: int = 100) -> np.ndarray:
        """Capacity per ``window_ms`` window over one period (bit/s), the trace's rate curve."""
        if window_ms < 1:
            raise TraceError(f"{self.name}: window_ms must be at least 1, got {window_ms}")
        edges = np.arange(0, self.period_ms + window_ms, window_ms)
        counts, _ = np.histogram(self.times_ms, bins=edges)
        return counts * PACKET_BYTES * 8 / (window_ms / 1000)

    def opportunities_ms(self, lo_ms: float, hi_ms: float) -> np.ndarray:
        """The times (ms from the trace's start) of its opportunities in [lo, hi), over as many
        loops as the window spans."""
        period = self.period_ms
        loops = range(max(int(lo_ms // period), 0), int(hi_ms // period) + 1)
        times = np.concatenate([loop * period + self.times_ms for loop in loops]).astype(np.float64)
        return times[(times >= lo_ms) & (times < hi_ms)]

    def gap_ms(self, q: float) -> float:
        """The ``q`` quantile of the time from one opportunity to the next (ms; 0 within a burst)."""
        gaps = np.diff(self.times_ms)
        return float(np.quantile(gaps, q)) if gaps.size else float(self.period_ms)

    def describe(self) -> dict[str, object]:
        return {"name": self.name, "lines": self.lines, "period_s": self.period_ms / 1000,
                "mean_bps": round(self.mean_bps, 1), "sha256": self.sha256}  # fmt: skip

    def text(self) -> str:
        return "".join(f"{int(t)}\n" for t in self.times_ms)


def parse(text: str, name: str = "trace") -> Trace:
    """A trace from its text; a bad line is one sentence naming ``name`` and the line."""
    if len(text) > MAX_TRACE_BYTES:
        raise TraceError(f"{name}: {len(text)} bytes is over the limit of {MAX_TRACE_BYTES} bytes")
    values: list[int] = []
    last = -1
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line:
            continue
        if not line.isdigit():
            what = "negative" if line.startswith("-") and line[1:].isdigit() else "not a whole number"
            raise TraceError(f"{name}: line {number}: {line[:30]!r} is {what} (a trace line is the "
                             "millisecond of one delivery opportunity, 0 or more)")  # fmt: skip
        value = int(line)
        if value < last:
            raise TraceError(f"{name}: line {number}: {value} comes after {last} (a trace is sorted in time)")
        if value > MAX_PERIOD_MS:
            raise TraceError(f"{name}: line {number}: {value} ms is beyond the limit of one day")
        values.append(value)
        last = value
    if not values:
        raise TraceError(f"{name}: empty (a trace has one line per delivery opportunity)")
    if values[-1] == 0:
        raise TraceError(f"{name}: its last line is 0 ms, so the loop has no length")
    digest = hashlib.sha256(text.encode()).hexdigest()
    return Trace(name, np.array(values, dtype=np.int64), digest)


def load(path: str | Path) -> Trace:
    """A trace file, or a name from the library (``Verizon-LTE-short.down``)."""
    p = Path(path)
    if not p.exists() and (LIBRARY / p.name).is_file() and p.parent == Path("."):
        p = LIBRARY / p.name
    try:
        size = p.stat().st_size
        if size > MAX_TRACE_BYTES:
            raise TraceError(f"{p.name}: {size} bytes is over the limit of {MAX_TRACE_BYTES} bytes")
        text = p.read_text(encoding="ascii")
    except OSError as err:
        raise TraceError(f"{p}: cannot read it ({err.strerror or err})") from None
    except UnicodeDecodeError:
        raise TraceError(f"{p.name}: not a text file of millisecond timestamps") from None
    return parse(text, p.name)


def library() -> list[Trace]:
    """The traces shipped with the lab."""
    return [load_cached(str(p)) for p in sorted(LIBRARY.iterdir()) if p.suffix in (".down", ".up")]


def uploads_dir() -> Path:
    """The folder where this host keeps uploaded traces, one subfolder ``upload-N`` each."""
    return Path(os.environ.get(UPLOADS_ENV) or DEFAULT_UPLOADS)


def upload_path(ref: str) -> Path | None:
    """The file of an ``upload:N`` this host holds (None: not fetched here yet, or not a ref)."""
    match = UPLOAD_REF.fullmatch(ref.strip())
    if not match:
        return None
    folder = uploads_dir() / f"upload-{match.group(1)}"
    files = sorted(folder.iterdir()) if folder.is_dir() else []
    return files[0] if len(files) == 1 else None


def store_upload(ref: str, name: str, text: str) -> Path:
    """Keep an uploaded trace's text under its own name (checked first); returns the file."""
    match = UPLOAD_REF.fullmatch(ref.strip())
    if not match or Path(name).name != name or name.startswith("."):
        raise TraceError(f"{ref} / {name!r}: not an uploaded trace's reference and file name")
    parse(text, name)
    folder = uploads_dir() / f"upload-{match.group(1)}"
    folder.mkdir(parents=True, exist_ok=True)
    for old in folder.iterdir():
        if old.name != name:
            old.unlink()
    tmp = folder / f".{name}.tmp"
    tmp.write_text(text, encoding="ascii")
    tmp.replace(folder / name)
    return folder / name


def resolve(name_or_path: str, library_only: bool = False) -> str:
    """The absolute path of a library trace (``Verizon-LTE-short.down``), of an uploaded one this
    host has fetched (``upload:N``) or, unless ``library_only``, of an existing file (a library
    name wins over a file of that name here)."""
    if UPLOAD_REF.fullmatch(name_or_path.strip()):
        path = upload_path(name_or_path)
        if path is None:
            raise TraceError(f"{name_or_path}: this host has not fetched that uploaded trace (a worker "
                             "fetches it from the backend when a trial names it)")  # fmt: skip
        return str(path)
    p = Path(name_or_path)
    if p.parent == Path(".") and p.suffix in (".down", ".up") and (LIBRARY / p.name).is_file():
        return str(LIBRARY / p.name)
    if not library_only and p.is_file():
        return str(p.resolve())
    names = ", ".join(sorted(q.name for q in LIBRARY.iterdir() if q.suffix in (".down", ".up")))
    if library_only:
        raise TraceError(f"{name_or_path}: no such trace in the lab's library ({names})")
    raise TraceError(f"{name_or_path}: no such trace in the library ({names}) and no such file")


_CACHE: dict[tuple[str, int, int], Trace] = {}


def load_cached(path: str) -> Trace:
    """``load`` once per file version (path, size, mtime): profiles check their trace often."""
    try:
        st = Path(path).stat()
    except OSError as err:
        raise TraceError(f"{path}: cannot read it ({err.strerror or err})") from None
    key = (path, st.st_size, st.st_mtime_ns)
    if key not in _CACHE:
        if len(_CACHE) > 64:
            _CACHE.clear()
        _CACHE[key] = load(path)
    return _CACHE[key]


# ---- synthetic traces ----------------------------------------------------------------------------


def from_segments(segments: Sequence[tuple[float, int]], name: str = "synthetic") -> Trace:
    """A trace offering each ``(rate_bps, duration_ms)`` in turn: one opportunity each time 1500
    bytes of credit have built up, so a segment's bytes are exact to one packet. The period is the
    segments' total length. When no opportunity falls on its last millisecond (an outage at the
    end), a line there marks it: in this format every line is an opportunity, so such a loop offers
    one packet more than its rates."""
    if not segments or any(d < 1 for _, d in segments):
        raise TraceError(f"{name}: needs at least one segment, each 1 ms or longer")
    if any(r < 0 for r, _ in segments):
        raise TraceError(f"{name}: a rate below 0 bit/s")
    times: list[int] = []
    credit = 0.0
    start = 0
    for rate, duration in segments:
        per_ms = rate / 8 / 1000
        for ms in range(start, start + duration):
            credit += per_ms
            while credit >= PACKET_BYTES:
                credit -= PACKET_BYTES
                times.append(ms + 1)
        start += duration
    if not times:
        raise TraceError(f"{name}: the rates give no opportunity at all")
    if times[-1] != start:
        times.append(start)
    return parse("".join(f"{t}\n" for t in times), name)


def from_rates(rates_bps: Sequence[float], step_ms: int, name: str = "synthetic") -> Trace:
    """``rates_bps[i]`` during the i-th window of ``step_ms``."""
    return from_segments([(r, step_ms) for r in rates_bps], name)


def make_constant(rate_bps: float, period_ms: int = 1000) -> Trace:
    return from_rates([rate_bps], period_ms, f"constant-{rate_bps:g}bps")


def make_steps(rates_bps: Sequence[float], step_ms: int) -> Trace:
    return from_rates(rates_bps, step_ms, "steps")


def make_sawtooth(low_bps: float, high_bps: float, period_ms: int, steps: int = 20) -> Trace:
    """A rate rising linearly from ``low`` to ``high`` over the period in ``steps``, then back."""
    rates = [low_bps + (high_bps - low_bps) * i / max(steps - 1, 1) for i in range(steps)]
    return from_rates(rates, max(period_ms // steps, 1), "sawtooth")


def make_onoff(rate_bps: float, on_ms: int, off_ms: int) -> Trace:
    """``rate`` for ``on_ms``, then an outage of ``off_ms`` with no opportunity, looping."""
    return from_segments([(rate_bps, on_ms), (0.0, off_ms)], "onoff")


def make_from_csv(text: str, step_ms: int = 100, name: str = "csv") -> Trace:
    """A trace from ``time_s,rate_bps`` rows (a header row is allowed): each rate holds until the
    next row's time; the last row's time ends the curve."""
    points: list[tuple[float, float]] = []
    for number, row in enumerate(csv.reader(io.StringIO(text)), start=1):
        if not row or not "".join(row).strip():
            continue
        if len(row) != 2:
            raise TraceError(f"{name}: line {number}: expected time_s,rate_bps")
        try:
            t, rate = float(row[0]), float(row[1])
        except ValueError:
            if number == 1:
                continue  # a header
            raise TraceError(f"{name}: line {number}: {','.join(row)[:40]!r} is not two numbers") from None
        if points and t <= points[-1][0]:
            raise TraceError(f"{name}: line {number}: time {t:g} s does not come after {points[-1][0]:g} s")
        points.append((t, rate))
    if len(points) < 2:
        raise TraceError(f"{name}: needs two rows or more (the last row's time ends the curve)")
    rates: list[float] = []
    for (t0, rate), (t1, _) in zip(points, points[1:], strict=False):
        rates += [rate] * max(1, round((t1 - t0) * 1000 / step_ms))
    return from_rates(rates, step_ms, name)
