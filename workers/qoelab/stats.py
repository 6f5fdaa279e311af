"""The lab's one confidence interval: mean ± t(1−α/2, n−1)·s/√n over repetitions (no Django).

Every report that states a mean with its 95 % interval uses these, so the findings, the VOSE
validation, the packet analysis, the rating models and the benchmarks' tables agree on what an
interval is: a Student-t interval over independent repetitions, none for fewer than two values.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
from scipy import stats

CONFIDENCE = 0.95


def t_half_width(sd: float, n: int, confidence: float = CONFIDENCE) -> float:
    """The half-width t(1−α/2, n−1)·sd/√n of an interval over ``n`` ≥ 2 values of spread ``sd``."""
    if n < 2:
        raise ValueError(f"an interval needs n >= 2 values, got n = {n}")
    return float(stats.t.ppf(0.5 + confidence / 2, n - 1)) * sd / math.sqrt(n)


@dataclass(frozen=True)
class Stat:
    """Mean and 95 % Student-t confidence interval of n values (no interval for n < 2)."""

    n: int
    mean: float | None
    ci_low: float | None
    ci_high: float | None

    @property
    def has_ci(self) -> bool:
        return self.ci_low is not None and self.ci_high is not None

    @property
    def half_width(self) -> float | None:
        if self.ci_high is None or self.mean is None:
            return None
        return self.ci_high - self.mean


def mean_ci(values: Iterable[float | None], confidence: float = CONFIDENCE) -> Stat:
    """mean ± t(1−α/2, n−1)·s/√n over ``values`` (NaN and None left out)."""
    a = np.array([float(v) for v in values if v is not None], dtype=float)
    a = a[np.isfinite(a)]
    n = int(a.size)
    if n == 0:
        return Stat(0, None, None, None)
    mean = float(a.mean())
    if n < 2:
        return Stat(n, mean, None, None)
    half = t_half_width(float(a.std(ddof=1)), n, confidence)
    return Stat(n, mean, mean - half, mean + half)


def runs_for_half_width(
    s: Stat, half_width: float, confidence: float = CONFIDENCE, limit: int = 10_000
) -> int | None:
    """How many values would give ``s``'s spread a Student-t interval of ±``half_width``: the smallest
    n ≥ 2 with t(1−α/2, n−1)·sd/√n ≤ half_width, sd read back from ``s``'s own interval (a
    precision-based sample size, planned from the runs so far). None without an interval or past
    ``limit``."""
    if s.half_width is None or s.n < 2 or half_width <= 0:
        return None
    q = 0.5 + confidence / 2
    sd = s.half_width * math.sqrt(s.n) / float(stats.t.ppf(q, s.n - 1))
    # t > z, so the normal approximation's n is a lower bound to count up from.
    n = max(2, math.ceil((float(stats.norm.ppf(q)) * sd / half_width) ** 2))
    while t_half_width(sd, n, confidence) > half_width:
        n += 1
        if n > limit:
            return None
    return n
