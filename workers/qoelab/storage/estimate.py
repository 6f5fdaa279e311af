"""The storage benchmark's duration estimate: a guest boot and a target dominate short runs, so each
family's median trial here stands for the next one."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from qoelab.estimate import PastRun, median_wall_time

DEFAULT_TRIAL_S = 150.0  # a guest boot (~35 s under TCG), a target, a short family


def estimate(
    points: Sequence[Mapping[str, Any]], repetitions: int, past: Sequence[PastRun]
) -> tuple[float, str]:
    points = [{**p, "family": p.get("family", "metadata")} for p in points]
    return median_wall_time(points, repetitions, past, by="family", default_s=DEFAULT_TRIAL_S)
