"""How long a preset's trials take on this lab, from its own finished trials of the same job type.

The backend hands a job type's estimate the points it would run and this lab's past succeeded
trials as :class:`PastRun` rows (resolved parameters, the summary metrics the estimate asks for,
wall time); the estimate returns the seconds for one worker slot and one sentence saying what they
rest on. A job type without one gets :func:`median_wall_time`.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol


@dataclass(frozen=True)
class PastRun:
    """One succeeded trial of this lab: its resolved (SI) parameters, the summary metrics an estimate
    declared, and how long it took from start to finish."""

    params: Mapping[str, Any]
    summary: Mapping[str, float]
    seconds: float


class EstimateFn(Protocol):
    def __call__(
        self, points: Sequence[Mapping[str, Any]], repetitions: int, past: Sequence[PastRun]
    ) -> tuple[float, str]: ...


@dataclass(frozen=True)
class Estimate:
    """A job type's duration estimate: ``ref`` names (``"module:function"``) an :class:`EstimateFn`;
    ``metrics`` are the summary values it reads from past trials."""

    ref: str
    metrics: tuple[str, ...] = ()


DEFAULT_TRIAL_S = 60.0
DEFAULT_STREAM_OVERHEAD_S = 5.0


def _source(past: Sequence[PastRun]) -> str:
    return f"from {len(past)} such trials here" if past else "a default: no such trial here yet"


def median_wall_time(
    points: Sequence[Mapping[str, Any]],
    repetitions: int,
    past: Sequence[PastRun],
    by: str = "",
    default_s: float = DEFAULT_TRIAL_S,
) -> tuple[float, str]:
    """Each point costs the median wall time of past trials with its value of ``by`` (all past trials
    when ``by`` is empty), or ``default_s`` before there is one."""
    groups: dict[str, list[float]] = defaultdict(list)
    for run in past:
        groups[str(run.params.get(by, "")) if by else ""].append(run.seconds)
    total = 0.0
    for point in points:
        seen = groups.get(str(point.get(by, "")) if by else "")
        total += (statistics.median(seen) if seen else default_s) * repetitions
    what = f"the median trial of each {by}" if by else "the median trial"
    return total, f"{what} ({_source(past)}; {default_s:.0f} s without one)"


def for_duration(
    points: Sequence[Mapping[str, Any]], repetitions: int, past: Sequence[PastRun]
) -> tuple[float, str]:
    """Job types that run for a ``duration`` (a stream, a replay): that plus the median overhead of
    this lab's own trials of the type (calibration, namespaces, start-up), or a default before there
    is one."""
    overheads = [run.seconds - float(run.params.get("duration") or 0) for run in past]
    overhead = max(0.0, statistics.median(overheads)) if overheads else DEFAULT_STREAM_OVERHEAD_S
    total = sum((overhead + float(p.get("duration") or 10.0)) * repetitions for p in points)
    return total, f"{overhead:.0f} s per trial besides its stream ({_source(past)})"
