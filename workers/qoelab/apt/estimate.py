"""Storage APT's duration estimate: a trial is its steady window, APT's steps × delta (or the
warm-up of fixed and vanilla modes) and a fixed overhead (link, verification, target, sessions,
teardown), the last two from this lab's past storage-APT trials."""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from typing import Any

from qoelab.estimate import PastRun

# Before a storage-APT trial has run here: its fixed cost and APT's steps to converge, as measured
# on a 2-core host (docs/storage-apt.md).
DEFAULT_OVERHEAD_S = 6.0
DEFAULT_STEPS = 8.0


def costs(past: Sequence[PastRun]) -> tuple[float, float, int]:
    """(overhead s per trial, APT's mean steps, trials they rest on): overhead = duration - steady
    window - warm-up - APT's steps x delta."""
    steps = [run.summary["steps"] for run in past if "steps" in run.summary]
    overheads = []
    for run in past:
        p = run.params
        busy = float(p.get("steady") or 0) + float(p.get("warmup") or 0)
        busy += run.summary.get("steps", 0.0) * float(p.get("delta") or 0)
        overheads.append(run.seconds - busy)
    if not overheads:
        return DEFAULT_OVERHEAD_S, DEFAULT_STEPS, 0
    mean_steps = statistics.fmean(steps) if steps else DEFAULT_STEPS
    return max(0.0, statistics.median(overheads)), mean_steps, len(overheads)


def trial_seconds(resolved: Mapping[str, Any], overhead_s: float, steps: float) -> float:
    """APT searches for steps x delta; fixed and vanilla warm up instead. Then the steady window."""
    if resolved.get("mode") == "apt":
        before = steps * float(resolved.get("delta") or 5.0)
    else:
        before = float(resolved.get("warmup") or 0.0)
    return overhead_s + before + float(resolved.get("steady") or 30.0)


def estimate(
    points: Sequence[Mapping[str, Any]], repetitions: int, past: Sequence[PastRun]
) -> tuple[float, str]:
    overhead, steps, n = costs(past)
    total = sum(trial_seconds(p, overhead, steps) * repetitions for p in points)
    if n:
        return (
            total,
            f"{overhead:.0f} s per trial and {steps:.1f} APT steps, from {n} storage-APT trials here",
        )
    return (
        total,
        f"{overhead:.0f} s per trial and {steps:.0f} APT steps (defaults: no storage-APT trial here yet)",
    )
