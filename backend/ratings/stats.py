"""Statistics of a campaign on plain data (no Django): scores with 95 % CI, Krippendorff's alpha, screening.

- Scores: for DCR the per-condition score is already an impairment judgement, so the DMOS of a
  condition and aspect is the mean of its 1..5 scores (ITU-T P.910 DCR; thesis ch. 4 §4.5); ACR's
  MOS and ACR-HR's DMOS are means too, of the votes or of their differential scores
  (``analysis._scores``). The 95 % confidence interval is mean ± t(0.975, n-1) · s / √n with s the
  sample standard deviation; n = 1 has no interval.
- Agreement: Krippendorff's alpha (ordinal and interval) over the evaluators × (condition, aspect)
  matrix, missing answers allowed; computed, with the correlation rule, by ``qoelab.subjective``.
- Screening (see docs/ratings.md): an evaluator is excluded when the Pearson correlation of their
  scores with the mean of the other evaluators over the same units is below 0.75 (the r1 criterion
  of the VQEG/ITU-T P.913 correlation-based subject screening), when they rate a gold trap (reference
  against itself) 3 or lower, or when their answers to a repeated condition differ by more than 1;
  the campaign's settings (``ratings.screening``) add P.910's and BT.500's further rules.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
from scipy import stats as sps

from qoelab.subjective import report as subjective_report
from qoelab.subjective import screening as subjective_screening
from qoelab.subjective.votes import Votes, from_mapping
from ratings.screening import Correlation, Screening

CONFIDENCE = 0.95
# Screening thresholds (documented in docs/ratings.md).
MIN_CORRELATION = subjective_screening.MIN_CORRELATION
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
    return subjective_screening.correlations(votes)[raters.index(rater)]


def screen(
    matrix: Mapping[Hashable, Mapping[Hashable, float]],
    gold: Mapping[Hashable, Sequence[tuple[Hashable, float]]] | None = None,
    repeats: Mapping[Hashable, Sequence[tuple[Hashable, float, float]]] | None = None,
    min_correlation: float = MIN_CORRELATION,
    settings: Screening | None = None,
    trap: str = "a reference-vs-reference trap",
    playback: Mapping[Hashable, Sequence[tuple[Hashable, float, float]]] | None = None,
) -> dict[Hashable, EvaluatorScreening]:
    """Apply the screening rules to every rater of ``matrix`` (and of ``gold``/``repeats``).

    ``matrix``: {rater: {unit: score}} over the normal conditions; ``gold``: {rater: [(unit, score)]}
    on gold traps; ``repeats``: {rater: [(unit, first score, repeated score)]}. ``settings``: a
    campaign's ``ratings.screening.Screening`` (which rules run, their bounds); None: the lab's
    original three rules at their default bounds, with ``min_correlation``; ``trap``: what a gold
    item is, as the reason names it (DCR's reference against itself, ACR's reference alone);
    ``playback``: {rater: [(unit, seconds played, seconds of clip)]} for the playback rule.
    """
    if settings is None:
        settings = Screening(correlation=Correlation(min_r=min_correlation))
    gold = gold or {}
    repeats = repeats or {}
    raters = list(dict.fromkeys([*matrix, *gold, *repeats]))
    votes, order = from_mapping(matrix) if matrix else (None, [])
    variance_out: dict[Hashable, float] = {}
    bt500_out: dict[Hashable, str] = {}
    if votes is not None and settings.vote_variance.on:
        for i, rater in enumerate(order):
            mine = votes.score[votes.rater == i]
            if mine.size >= 2 and float(mine.var(ddof=1)) < settings.vote_variance.min:
                variance_out[rater] = float(mine.var(ddof=1))
    if votes is not None and settings.bt500.on:
        bt500_out = {order[i]: why for i, why in subjective_screening.bt500_rejected(votes).items()}
    playback_out = (
        playback_failures(playback, settings.playback.max_share) if playback and settings.playback.on else {}
    )
    out: dict[Hashable, EvaluatorScreening] = {}
    for rater in raters:
        s = EvaluatorScreening(rater)
        if rater in matrix and len(matrix) >= 2:
            s.correlation, s.correlation_units, s.correlation_note = pearson_with_others(matrix, rater)
        else:
            s.correlation_note = "needs at least two evaluators with ratings"
        bound = settings.correlation.min_r
        if settings.correlation.on and s.correlation is not None and s.correlation < bound:
            s.reasons.append(f"correlation with the other evaluators r = {s.correlation:.2f} < {bound:g}")
        fail_at = settings.gold.fail_at_or_below
        for unit, score in gold.get(rater, ()):
            if score <= fail_at:
                s.gold_failures.append({"unit": unit, "score": score})
        if settings.gold.on and s.gold_failures:
            s.reasons.append(f"rated {trap} {fail_at} or lower {len(s.gold_failures)} time(s)")
        most = settings.repeat.max_difference
        for unit, first, again in repeats.get(rater, ()):
            if abs(first - again) > most:
                s.consistency_failures.append({"unit": unit, "first": first, "repeat": again})
        if settings.repeat.on and s.consistency_failures:
            s.reasons.append(
                f"repeated condition answered inconsistently (|difference| > {most}) "
                f"{len(s.consistency_failures)} time(s)"
            )
        if rater in variance_out:
            s.reasons.append(
                f"vote variance {variance_out[rater]:.3f} < {settings.vote_variance.min:g} "
                "(nearly the same score every time)"
            )
        if rater in bt500_out:
            s.reasons.append(bt500_out[rater])
        if rater in playback_out:
            s.reasons.append(playback_out[rater])
        out[rater] = s
    return out


def playback_failures(
    rows: Mapping[Hashable, Sequence[tuple[Hashable, float, float]]], max_share: float
) -> dict[Hashable, str]:
    """Raters whose clips were not played to the end, or played more than ``max_share`` of their
    length in all: the subjective library's rule (``screening.playback_failures``) on
    ``{rater: [(unit, seconds played, seconds of clip)]}``."""
    raters = list(rows)
    units = list(dict.fromkeys(u for r in raters for u, _, _ in rows[r]))
    flat = [(i, units.index(u), p, c) for i, r in enumerate(raters) for u, p, c in rows[r]]
    votes = Votes(
        tuple(str(r) for r in raters), tuple(str(u) for u in units),
        np.array([f[0] for f in flat], dtype=np.intp), np.array([f[1] for f in flat], dtype=np.intp),
        np.zeros(len(flat)),
        extra={"played_s": np.array([f[2] for f in flat], dtype=float),
               "clip_s": np.array([f[3] for f in flat], dtype=float)},
    )  # fmt: skip
    return {raters[i]: why for i, why in subjective_screening.playback_failures(votes, max_share).items()}


def without_outlier_votes(
    matrix: Mapping[Hashable, Mapping[Hashable, float]], z: float
) -> tuple[dict[Hashable, dict[Hashable, float]], int]:
    """``matrix`` without the single votes at |z| >= ``z`` within their unit (P.910's optional
    removal, the subjective library's rule), and how many were left out."""
    if not matrix:
        return {r: dict(row) for r, row in matrix.items()}, 0
    votes, raters = from_mapping(matrix)
    drop = subjective_screening.outlier_votes(votes, z)
    units = {str(u): u for row in matrix.values() for u in row}
    gone = {
        (raters[int(r)], units[votes.stimuli[int(s)]])
        for r, s in zip(votes.rater[drop], votes.stimulus[drop], strict=True)
    }
    kept = {r: {u: v for u, v in row.items() if (r, u) not in gone} for r, row in matrix.items()}
    return kept, len(gone)
