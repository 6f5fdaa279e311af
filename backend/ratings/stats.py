"""Statistics of a DCR campaign on plain data (no Django): DMOS with 95 % CI, Krippendorff's alpha, screening.

- DMOS: for DCR the per-condition score is already an impairment judgement, so the DMOS of a
  condition and aspect is the mean of its 1..5 scores (ITU-T P.910 DCR; thesis ch. 4 §4.5).
  The 95 % confidence interval is mean ± t(0.975, n-1) · s / √n with s the sample standard
  deviation; n = 1 has no interval.
- Agreement: Krippendorff's alpha (ordinal and interval) over the evaluators × (condition, aspect)
  matrix, missing answers allowed; computed, with the correlation rule, by ``qoelab.subjective``.
- Screening (see docs/ratings.md): an evaluator is excluded when the Pearson correlation of their
  scores with the mean of the other evaluators over the same units is below 0.75 (the r1 criterion
  of the VQEG/ITU-T P.913 correlation-based subject screening), when they rate a gold trap (reference
  against itself) 3 or lower, or when their answers to a repeated condition differ by more than 1.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from scipy import stats as sps

from qoelab.subjective import report as subjective_report
from qoelab.subjective import screening
from qoelab.subjective.votes import from_mapping

CONFIDENCE = 0.95
# Screening thresholds (documented in docs/ratings.md).
MIN_CORRELATION = screening.MIN_CORRELATION
GOLD_FAIL_AT_OR_BELOW = 3
MAX_REPEAT_DIFFERENCE = 1


@dataclass(frozen=True)
class Summary:
    """Mean (the DMOS), 95 % CI and n of a set of scores."""

    n: int
    mean: float | None
    sd: float | None
    ci_low: float | None
    ci_high: float | None

    @property
    def half_width(self) -> float | None:
        if self.ci_high is None or self.mean is None:
            return None
        return self.ci_high - self.mean

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "half_width": self.half_width}


def dmos(scores: Iterable[float]) -> Summary:
    """Mean and Student-t 95 % confidence interval of the scores (no interval for n < 2)."""
    xs = [float(x) for x in scores]
    n = len(xs)
    if n == 0:
        return Summary(0, None, None, None, None)
    mean = sum(xs) / n
    if n == 1:
        return Summary(1, mean, None, None, None)
    sd = math.sqrt(sum((x - mean) ** 2 for x in xs) / (n - 1))
    half = float(sps.t.ppf(0.5 + CONFIDENCE / 2, n - 1)) * sd / math.sqrt(n)
    return Summary(n, mean, sd, mean - half, mean + half)


@dataclass(frozen=True)
class Alpha:
    """Krippendorff's alpha, or None with the reason it cannot be computed on these data."""

    value: float | None
    level: str
    raters: int
    units: int
    pairable: int
    reason: str = ""

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def alpha(
    matrix: Mapping[Hashable, Mapping[Hashable, float]], level: str, domain: Sequence[int] = (1, 2, 3, 4, 5)
) -> Alpha:
    """Krippendorff's alpha of ``{rater: {unit: score}}`` at ``level`` (ordinal, interval, ...).

    Computed by the lab's subjective library (``qoelab.subjective``, the same function ``qoelab
    ratings analyze`` uses). Units answered by fewer than two raters carry no pairable values and do
    not count. The value domain is the full 1..5 scale so that ordinal distances do not depend on
    which grades were used.
    """
    votes, _raters = from_mapping(matrix)
    return Alpha(**subjective_report.alpha(votes, level, domain=domain))


@dataclass
class EvaluatorScreening:
    """Why an evaluator is kept or excluded."""

    evaluator: Hashable
    correlation: float | None = None
    correlation_units: int = 0
    correlation_note: str = ""
    gold_failures: list[dict[str, Any]] = field(default_factory=list)
    consistency_failures: list[dict[str, Any]] = field(default_factory=list)
    reasons: list[str] = field(default_factory=list)

    @property
    def excluded(self) -> bool:
        return bool(self.reasons)

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "excluded": self.excluded}


def pearson_with_others(
    matrix: Mapping[Hashable, Mapping[Hashable, float]], rater: Hashable
) -> tuple[float | None, int, str]:
    """Pearson r of ``rater``'s scores with the mean of the other raters on the units both cover.

    Leave-one-out (the rater is not part of the mean), so with a small panel an evaluator cannot
    raise their own agreement. Returns (r or None, units used, why None). The rule and its wording
    are the subjective library's (``qoelab.subjective.screening``), as for any rating set.
    """
    votes, raters = from_mapping(matrix)
    return screening.correlations(votes)[raters.index(rater)]


def screen(
    matrix: Mapping[Hashable, Mapping[Hashable, float]],
    gold: Mapping[Hashable, Sequence[tuple[Hashable, float]]] | None = None,
    repeats: Mapping[Hashable, Sequence[tuple[Hashable, float, float]]] | None = None,
    min_correlation: float = MIN_CORRELATION,
) -> dict[Hashable, EvaluatorScreening]:
    """Apply the screening rule to every rater of ``matrix`` (and of ``gold``/``repeats``).

    ``matrix``: {rater: {unit: score}} over the normal conditions; ``gold``: {rater: [(unit, score)]}
    on gold traps; ``repeats``: {rater: [(unit, first score, repeated score)]}.
    """
    gold = gold or {}
    repeats = repeats or {}
    raters = list(dict.fromkeys([*matrix, *gold, *repeats]))
    out: dict[Hashable, EvaluatorScreening] = {}
    for rater in raters:
        s = EvaluatorScreening(rater)
        if rater in matrix and len(matrix) >= 2:
            s.correlation, s.correlation_units, s.correlation_note = pearson_with_others(matrix, rater)
        else:
            s.correlation_note = "needs at least two evaluators with ratings"
        if s.correlation is not None and s.correlation < min_correlation:
            s.reasons.append(
                f"correlation with the other evaluators r = {s.correlation:.2f} < {min_correlation:g}"
            )
        for unit, score in gold.get(rater, ()):
            if score <= GOLD_FAIL_AT_OR_BELOW:
                s.gold_failures.append({"unit": unit, "score": score})
        if s.gold_failures:
            s.reasons.append(
                f"rated a reference-vs-reference trap {GOLD_FAIL_AT_OR_BELOW} or lower "
                f"{len(s.gold_failures)} time(s)"
            )
        for unit, first, again in repeats.get(rater, ()):
            if abs(first - again) > MAX_REPEAT_DIFFERENCE:
                s.consistency_failures.append({"unit": unit, "first": first, "repeat": again})
        if s.consistency_failures:
            s.reasons.append(
                f"repeated condition answered inconsistently (|difference| > {MAX_REPEAT_DIFFERENCE}) "
                f"{len(s.consistency_failures)} time(s)"
            )
        out[rater] = s
    return out
