"""Rater screening on any rating set: which raters a rule flags, and why (docs/ratings.md, "Subject models").

- **correlation**: Pearson r between a rater's votes and the mean of the *other* raters on the same
  stimuli below 0.75 (the r1 criterion of the correlation screening in VQEG test plans and ITU-T
  P.913; the mean leaves the rater out, so a small panel cannot lift its own agreement). Not
  computed with fewer than 3 shared stimuli or constant votes; the reason is given instead.
- **vote variance**: the variance of a rater's votes below 0.15 (ITU-T P.910's crowdsourcing rule
  against raters who give the same score nearly every time); needs two votes.
- **BT.500 kurtosis rejection** (ITU-R BT.500 A1-2.3.1, as Li et al., HVEI 2020, Algorithm 1 states
  it): per stimulus, a vote at or beyond mean ± 2 sigma (± sqrt(20) sigma when the votes' kurtosis
  is outside 2..4) counts against its rater, high (P) or low (Q); a rater with (P + Q) above 5 % of
  the stimuli and |P - Q| / (P + Q) below 0.3 is rejected, and nobody when everyone would be. sigma
  is the votes' population standard deviation, which reproduces the paper's published intervals.

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
    {"name": "kurtosis-based rejection", "clause": "ITU-R BT.500 A1-2.3.1"},
)  # fmt: skip
BT500_SHARE = 0.05
BT500_BALANCE = 0.3
# P.910's crowdsourcing rules on files that carry the columns: a gold item's vote within this of its
# expected score, every clip played to its end, and no more than 115 % of the clips' total length.
GOLD_TOLERANCE = 1.0
MAX_PLAYBACK_SHARE = 1.15
GOLD_RULE = {"name": f"gold items within {GOLD_TOLERANCE:g} of their expected score",
             "clause": "ITU-T P.910 crowdsourcing: gold questions"}  # fmt: skip
PLAYBACK_RULE = {"name": f"every clip played to its end, in all <= {MAX_PLAYBACK_SHARE:.0%} of their length",
                 "clause": "ITU-T P.910 crowdsourcing: playback"}  # fmt: skip


@dataclass
class Screening:
    out: set[int] = field(default_factory=set)
    reasons: dict[int, list[str]] = field(default_factory=dict)
    correlation: dict[int, float | None] = field(default_factory=dict)
    notes: dict[int, str] = field(default_factory=dict)
    extra_rules: list[dict[str, str]] = field(default_factory=list)  # the rules the file's columns allow

    def flag(self, rater: int, reason: str) -> None:
        self.out.add(rater)
        self.reasons.setdefault(rater, []).append(reason)

    def to_json(self) -> dict[str, Any]:
        return {
            "rules": [*RULES, *self.extra_rules],
            "screened_out": len(self.out),
            "correlation": {
                str(i): (None if r is None else round(r, 6)) for i, r in self.correlation.items()
            },
            "not_computed": {str(i): why for i, why in self.notes.items()},
        }


def _centred(v: Votes) -> tuple[np.ndarray, np.ndarray]:
    """Votes per stimulus (as floats) and each vote's deviation from its stimulus' mean."""
    n = v.votes_per_stimulus().astype(float)
    mean = np.bincount(v.stimulus, weights=v.score, minlength=len(v.stimuli)) / np.maximum(n, 1)
    return n, v.score - mean[v.stimulus]


def bt500_rejected(v: Votes) -> dict[int, str]:
    """Raters the BT.500 kurtosis rule rejects, with the counts that did it."""
    n_s, n_r = len(v.stimuli), len(v.raters)
    n, e = _centred(v)
    with np.errstate(invalid="ignore", divide="ignore"):
        m2 = np.bincount(v.stimulus, weights=e**2, minlength=n_s) / n
        m4 = np.bincount(v.stimulus, weights=e**4, minlength=n_s) / n
        kurtosis = m4 / m2**2
    wide = np.where((kurtosis >= 2) & (kurtosis <= 4), 2.0, np.sqrt(20.0))
    bound = (wide * np.sqrt(m2))[v.stimulus]
    high = np.bincount(v.rater, weights=(e >= bound).astype(float), minlength=n_r)
    low = np.bincount(v.rater, weights=(e <= -bound).astype(float), minlength=n_r)
    out = {}
    for i in range(n_r):
        total = high[i] + low[i]
        if total / n_s > BT500_SHARE and abs(high[i] - low[i]) / total < BT500_BALANCE:
            out[i] = (
                f"BT.500 kurtosis rejection: {int(high[i])} vote(s) above and {int(low[i])} below their "
                f"stimuli's bounds ({total / n_s:.0%} of the stimuli > 5 %, balanced < 0.3)"
            )
    return {} if len(out) == n_r else out


OUTLIER_Z = 3.29  # ITU-T P.910's optional removal of single votes (two-sided 0.1 %)


def outlier_votes(v: Votes, z: float = OUTLIER_Z) -> np.ndarray:
    """Votes at |z| >= ``z`` within their stimulus (z over the stimulus' votes, sample SD); a
    stimulus with fewer than three votes or no spread has none."""
    n_s = len(v.stimuli)
    n, e = _centred(v)
    with np.errstate(invalid="ignore", divide="ignore"):
        sd = np.sqrt(np.bincount(v.stimulus, weights=e * e, minlength=n_s) / (n - 1))
        score = np.abs(e) / sd[v.stimulus]
    return (n[v.stimulus] >= 3) & (sd[v.stimulus] > 0) & (score >= z)


def without_bt500_rejected(v: Votes) -> Votes:
    """The votes of the raters BT.500's rule keeps (ids and order unchanged)."""
    out = bt500_rejected(v)
    keep = np.array([i not in out for i in range(len(v.raters))], dtype=bool)
    return v.select(keep[v.rater]) if out else v


def correlations(v: Votes) -> list[tuple[float | None, int, str]]:
    """Per rater: Pearson r with the mean of the *other* raters over the stimuli both cover, the
    number of those stimuli, and why r is None when it is (too few shared, constant votes)."""
    m = v.rater_means()
    has = ~np.isnan(m)
    sums = np.nansum(m, axis=0)
    counts = has.sum(axis=0)
    out: list[tuple[float | None, int, str]] = []
    for i in range(len(v.raters)):
        others_n = counts - has[i]
        shared = has[i] & (others_n > 0)
        n = int(shared.sum())
        if n < MIN_SHARED:
            out.append((None, n, f"only {n} stimulus/stimuli shared with other raters (needs {MIN_SHARED})"))
            continue
        mine = m[i, shared]
        others = (sums[shared] - mine) / others_n[shared]
        if np.ptp(mine) == 0 or np.ptp(others) == 0:
            who = "this rater's" if np.ptp(mine) == 0 else "the other raters' mean"
            out.append((None, n, f"{who} votes do not vary over the shared stimuli (r undefined)"))
        else:
            out.append((float(np.corrcoef(mine, others)[0, 1]), n, ""))
    return out


def screen(v: Votes, min_correlation: float = MIN_CORRELATION) -> Screening:
    result = Screening()
    for i, (r, _n, note) in enumerate(correlations(v)):
        result.correlation[i] = r
        if note:
            result.notes[i] = note
        elif r is not None and r < min_correlation:
            result.flag(i, f"correlation with the other raters r = {r:.2f} < {min_correlation:g}")
        votes = v.score[v.rater == i]
        if votes.size >= 2:
            var = float(votes.var(ddof=1))
            if var < MIN_VARIANCE:
                result.flag(
                    i, f"vote variance {var:.3f} < {MIN_VARIANCE:g} (nearly the same score every time)"
                )
    for i, why in bt500_rejected(v).items():
        result.flag(i, why)
    return result


def gold_failures(v: Votes, tolerance: float = GOLD_TOLERANCE) -> dict[int, str]:
    """Raters with a gold item's vote further than ``tolerance`` from its expected score."""
    gold = v.column("gold")
    if gold is None:
        return {}
    off = ~np.isnan(gold) & (np.abs(v.score - np.nan_to_num(gold)) > tolerance)
    out = {}
    for i in np.unique(v.rater[off]):
        k = int((v.rater[off] == i).sum())
        out[int(i)] = f"{k} gold item(s) answered more than {tolerance:g} from the expected score"
    return out


def playback_failures(v: Votes, max_share: float = MAX_PLAYBACK_SHARE) -> dict[int, str]:
    """Raters who stopped a clip before its end, or played more than ``max_share`` of the clips'
    total length (replays), over the votes that give both ``played_s`` and ``clip_s``."""
    played, clip = v.column("played_s"), v.column("clip_s")
    if played is None or clip is None:
        return {}
    known = ~np.isnan(played) & ~np.isnan(clip)
    out = {}
    for i in range(len(v.raters)):
        mine = known & (v.rater == i)
        if not mine.any():
            continue
        short = int((played[mine] < clip[mine]).sum())
        share = float(played[mine].sum() / clip[mine].sum()) if clip[mine].sum() > 0 else 0.0
        why = []
        if short:
            why.append(f"{short} clip(s) not played to the end")
        if share > max_share:
            why.append(f"played {share:.0%} of the clips' length (> {max_share:.0%})")
        if why:
            out[i] = "; ".join(why)
    return out
