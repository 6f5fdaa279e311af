"""The statistics of the chapter-3 checks (qoelab.findings.ch3): a linear contrast of group means
with its Welch-Satterthwaite interval, a share read against a bound by its whole 95 % interval, and
the pairing of runs made in one repetition of a benchmark file (issue 32's paired design)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from scipy import stats

from qoelab.findings.base import Comparison, fmt_num
from qoelab.stats import CONFIDENCE, Stat

Row = Mapping[str, Any]


def contrast(terms: Sequence[tuple[float, Sequence[float]]], confidence: float = CONFIDENCE) -> Stat:
    """Σ wᵢ·meanᵢ over independent groups of values, with a Welch-Satterthwaite Student-t interval.

    ``n`` is the smallest group's size: no interval when any group has fewer than two values."""
    groups = [(float(w), np.array([float(v) for v in vs if v is not None], dtype=float)) for w, vs in terms]
    groups = [(w, a[np.isfinite(a)]) for w, a in groups]
    n = min(a.size for _, a in groups)
    if n == 0:
        return Stat(0, None, None, None)
    mean = float(sum(w * a.mean() for w, a in groups))
    if n < 2:
        return Stat(n, mean, None, None)
    parts = [w * w * float(a.var(ddof=1)) / a.size for w, a in groups]
    var = sum(parts)
    if var == 0:
        return Stat(n, mean, mean, mean)
    df = var**2 / sum(p * p / (a.size - 1) for p, (_, a) in zip(parts, groups, strict=True))
    half = float(stats.t.ppf(0.5 + confidence / 2, df)) * math.sqrt(var)
    return Stat(n, mean, mean - half, mean + half)


def scaled(s: Stat, by: float, plus: float = 0.0) -> Stat:
    """``s / by + plus`` (by > 0): a contrast read as a share of a reference mean."""

    def f(v: float | None) -> float | None:
        return None if v is None else v / by + plus

    return Stat(s.n, f(s.mean), f(s.ci_low), f(s.ci_high))


def pct(v: float | None, signed: bool = False) -> str:
    if v is None:
        return "–"
    return ("+" if signed and v > 0 else "") + f"{fmt_num(100 * v)} %"


def bounded(
    s: Stat, name: str, where_: str, low: float | None = None, high: float | None = None, signed: bool = False
) -> Comparison:
    """Does the share ``s`` lie in [low, high]? Decided by the whole 95 % interval (shown in %)."""
    if s.n == 0:
        return Comparison("unclear", f"no result for {name} at {where_}")
    if not s.has_ci:
        return Comparison("unclear", f"n < 2 for {name} (n = {s.n}) at {where_}, so no confidence interval")
    assert s.ci_low is not None and s.ci_high is not None
    if low is not None and high is not None and math.isclose(-low, high):
        want = f"within ±{pct(high)}"
    else:
        sides = [(low, "at least"), (high, "at most")]
        want = " and ".join(f"{word} {pct(bound)}" for bound, word in sides if bound is not None)
    ci = f"CI {pct(s.ci_low, signed)} to {pct(s.ci_high, signed)}"
    shown = f"{name} {pct(s.mean, signed)} ({ci}) at {where_}"
    if (low is None or s.ci_low >= low) and (high is None or s.ci_high <= high):
        return Comparison("supports", f"{shown}: {want}")
    if (low is not None and s.ci_high < low) or (high is not None and s.ci_low > high):
        return Comparison("contradicts", f"{shown}: not {want}")
    return Comparison("unclear", f"the 95 % CI straddles the bound ({want}): {shown}")


def pairs(vose: Sequence[Row], hardware: Sequence[Row]) -> list[tuple[Row, Row]]:
    """(vose, hardware) runs of the same repetition of one file (``pair``, kept by ``normalise``):
    made back to back, so drift between repetitions hits both. A repetition with more than one run
    of either mode in the scope pairs nothing."""

    def by_pair(rows: Sequence[Row]) -> dict[str, list[Row]]:
        out: dict[str, list[Row]] = {}
        for r in rows:
            if r.get("pair") is not None:
                out.setdefault(r["pair"], []).append(r)
        return out

    v, h = by_pair(vose), by_pair(hardware)
    return [(v[k][0], h[k][0]) for k in sorted(v.keys() & h.keys()) if len(v[k]) == len(h[k]) == 1]
