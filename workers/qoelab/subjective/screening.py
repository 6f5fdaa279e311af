"""Rater screening on any rating set: which raters a rule flags, and why (docs/ratings.md, "Subject models").

- **correlation**: Pearson r between a rater's votes and the mean of the *other* raters on the same
  stimuli below 0.75 (the r1 criterion of the correlation screening in VQEG test plans and ITU-T
  P.913; the mean leaves the rater out, so a small panel cannot lift its own agreement). Not
  computed with fewer than 3 shared stimuli or constant votes; the reason is given instead.
- **vote variance**: the variance of a rater's votes below 0.15 (ITU-T P.910's crowdsourcing rule
  against raters who give the same score nearly every time); needs two votes.

A repeated vote counts once per presentation in the variance and as its rater's mean in the correlation.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from qoelab.subjective.votes import Votes

MIN_CORRELATION = 0.75
MIN_SHARED = 3
MIN_VARIANCE = 0.15

RULES = (
    {"name": f"correlation with the other raters r >= {MIN_CORRELATION:g}",
     "clause": "ITU-T P.913 subject screening (VQEG r1)"},
    {"name": f"vote variance >= {MIN_VARIANCE:g}", "clause": "ITU-T P.910 crowdsourcing screening"},
)  # fmt: skip


@dataclass
class Screening:
    out: set[int] = field(default_factory=set)
    reasons: dict[int, list[str]] = field(default_factory=dict)
    correlation: dict[int, float | None] = field(default_factory=dict)
    notes: dict[int, str] = field(default_factory=dict)

    def flag(self, rater: int, reason: str) -> None:
        self.out.add(rater)
        self.reasons.setdefault(rater, []).append(reason)

    def to_json(self) -> dict[str, Any]:
        return {
            "rules": list(RULES),
            "screened_out": len(self.out),
            "correlation": {
                str(i): (None if r is None else round(r, 6)) for i, r in self.correlation.items()
            },
            "not_computed": {str(i): why for i, why in self.notes.items()},
        }


def _rater_means(v: Votes) -> np.ndarray:
    """raters × stimuli: each rater's mean vote on each stimulus (NaN where none)."""
    shape = (len(v.raters), len(v.stimuli))
    total = np.zeros(shape)
    count = np.zeros(shape)
    np.add.at(total, (v.rater, v.stimulus), v.score)
    np.add.at(count, (v.rater, v.stimulus), 1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return total / count


def screen(v: Votes) -> Screening:
    result = Screening()
    m = _rater_means(v)
    has = ~np.isnan(m)
    sums = np.nansum(m, axis=0)
    counts = has.sum(axis=0)
    for i in range(len(v.raters)):
        others_n = counts - has[i]
        shared = has[i] & (others_n > 0)
        n = int(shared.sum())
        if n < MIN_SHARED:
            result.correlation[i] = None
            result.notes[i] = f"only {n} stimulus/stimuli shared with other raters (needs {MIN_SHARED})"
        else:
            mine = m[i, shared]
            others = (sums[shared] - mine) / others_n[shared]
            if np.ptp(mine) == 0 or np.ptp(others) == 0:
                result.correlation[i] = None
                who = "this rater's" if np.ptp(mine) == 0 else "the other raters' mean"
                result.notes[i] = f"{who} votes do not vary over the shared stimuli (r undefined)"
            else:
                r = float(np.corrcoef(mine, others)[0, 1])
                result.correlation[i] = r
                if r < MIN_CORRELATION:
                    result.flag(i, f"correlation with the other raters r = {r:.2f} < {MIN_CORRELATION:g}")
        votes = v.score[v.rater == i]
        if votes.size >= 2:
            var = float(votes.var(ddof=1))
            if var < MIN_VARIANCE:
                result.flag(
                    i, f"vote variance {var:.3f} < {MIN_VARIANCE:g} (nearly the same score every time)"
                )
    return result
