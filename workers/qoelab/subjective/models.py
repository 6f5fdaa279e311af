"""Each stimulus' score from a rating set: the plain mean, or the subject model (rater bias, inconsistency).

The subject model (Li, Bampis, Krasula, Janowski, Katsavounidis, "A simple model for subject
behavior in subjective experiments", IS&T HVEI 2020, doi:10.2352/ISSN.2470-1173.2020.11.HVEI-131;
standardised in ITU-T P.910 Appendix VI and ITU-T P.913 clause 12.6) writes vote ``u_ijr`` of rater
``i`` on stimulus ``j`` as ``psi_j + Delta_i + upsilon_i X`` with ``X ~ N(0, 1)``: the stimulus'
quality, the rater's bias and the rater's inconsistency. Two solvers reach its maximum-likelihood
point:

- ``p910``, alternating projection (the paper's Algorithm 4, P.910 Appendix VI): start from the
  plain mean and P.913 clause 12.4's bias; repeat (residual → each rater's inconsistency as the
  residual's standard deviation → each stimulus' score as the inconsistency-weighted mean of the
  bias-free votes → each rater's bias as the mean shift) until the scores move by less than 1e-8.
- ``p913``, Newton-Raphson on the log-likelihood (Algorithm 3): bias from 0, inconsistency from the
  residual's standard deviation, refresh rate 0.1, until the scores move by less than 1e-9.

Both end with the biases shifted to mean zero (the model fixes them only up to a common shift).
Confidence intervals are the paper's asymptotic ones (its eq. 6): ``psi_j ± z / sqrt(sum_i
upsilon_i^-2)``, ``Delta_i ± z upsilon_i / sqrt(k_i)`` with z = 1.95996 (the paper's "1.96"), and
for ``upsilon_i`` the chi-square interval with ``k_i`` (the rater's vote count) degrees of
freedom. ``mean`` is the lab's campaign analysis: the mean with a Student-t 95 % interval.

Edge cases, each said in the fit's notes: a stimulus or rater with no vote is listed without an
estimate; a rater with a single vote is left out of the subject model (an inconsistency needs two);
a rater who matches the model exactly has the inconsistency floored at 1e-4 (no finite maximum
exists; P.910's weight guard 1/(sigma^2 + 1e-8) is the same floor); a set whose votes are all equal
has nothing to model and only the mean applies.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
from scipy import stats

from qoelab.stats import CONFIDENCE, t_half_width
from qoelab.subjective.votes import Votes, VotesError

Model = Literal["mean", "p910", "p913"]
MODELS: tuple[Model, ...] = ("mean", "p910", "p913")
Z95 = float(stats.norm.ppf(0.975))  # the "1.96" of the paper's asymptotic 95 % intervals (its eq. 6)
AP_THRESHOLD = 1e-8  # P.910 Appendix VI's stop threshold on the change of the scores
AP_WEIGHT_GUARD = 1e-8  # 1 / (sigma^2 + guard): a rater who matches the model exactly
AP_MAX_ITERATIONS = 1000
NR_THRESHOLD = 1e-9  # the paper's Newton-Raphson stop threshold
NR_REFRESH = 0.1  # the paper's refresh rate
NR_MAX_ITERATIONS = 100_000
INCONSISTENCY_FLOOR = math.sqrt(AP_WEIGHT_GUARD)

ESTIMATOR = {
    "mean": "the plain mean of the votes",
    "p910": "the subject model (P.910 Appendix VI, alternating projection)",
    "p913": "the subject model (P.913 clause 12.6, maximum likelihood)",
}
SOS_MEANING = {
    "mean": "standard deviation of the stimulus' votes (n - 1)",
    "p910": "P.910 Appendix VI's SOS: the spread of the stimulus' residuals over sqrt(n)",
    "p913": "standard error of the score, 1 / sqrt(sum of the raters' upsilon^-2)",
}


@dataclass(frozen=True)
class StimulusScore:
    id: str
    n: int
    mos: float | None
    ci_low: float | None
    ci_high: float | None
    sos: float | None
    condition: str = ""


@dataclass(frozen=True)
class RaterEstimate:
    id: str
    n: int
    bias: float | None
    inconsistency: float | None
    bias_ci: tuple[float, float] | None = None
    inconsistency_ci: tuple[float, float] | None = None
    note: str = ""


@dataclass(frozen=True)
class Fit:
    """One model's estimates: stimuli and raters in input order."""

    model: Model
    stimuli: list[StimulusScore]
    raters: list[RaterEstimate]
    votes: int
    params: int
    loglik: float | None  # the Gaussian log-likelihood at the estimate (None: unbounded)
    iterations: int = 0
    converged: bool = True
    notes: list[str] = field(default_factory=list)

    @property
    def nbic(self) -> float | None:
        """Normalised BIC, (ln(n) |q| - 2 L) / n (the paper's model-fit criterion)."""
        if self.loglik is None or self.votes == 0:
            return None
        return (math.log(self.votes) * self.params - 2 * self.loglik) / self.votes

    @property
    def estimator(self) -> str:
        return ESTIMATOR[self.model]

    def summary(self) -> dict[str, float | None]:
        """Set-wide figures of the fit, the form papers publish (sums, variances, mean interval lengths)."""
        scored = [s for s in self.stimuli if s.mos is not None]
        with_ci = [s for s in scored if s.ci_low is not None and s.ci_high is not None]
        modelled = [r for r in self.raters if r.bias is not None and r.inconsistency is not None]
        scores = np.array([s.mos for s in scored], dtype=float)
        bias = np.array([r.bias for r in modelled], dtype=float)
        ups = np.array([r.inconsistency for r in modelled], dtype=float)
        ci_len = [s.ci_high - s.ci_low for s in with_ci]  # type: ignore[operator]
        out: dict[str, float | None] = {
            "votes": float(self.votes),
            "params": float(self.params),
            "loglik_per_vote": None if self.loglik is None else self.loglik / self.votes,
            "nbic": self.nbic,
            "score_sum": float(scores.sum()),
            "score_var": float(scores.var()),
            "score_ci_length_sum": float(np.sum(ci_len)),
            "score_ci_length_mean": float(np.mean(ci_len)) if ci_len else None,
            "bias_var": float(bias.var()) if bias.size else None,
            "inconsistency_sum": float(ups.sum()) if ups.size else None,
            "inconsistency_var": float(ups.var()) if ups.size else None,
        }
        if self.model == "mean":
            # The plain MOS' normal-theory interval, 2 z s / sqrt(n) long (how papers compare it).
            out["normal_ci_length_mean"] = float(np.mean([2 * Z95 * s.sos / math.sqrt(s.n) for s in with_ci]))
        else:
            cis = [r for r in modelled if r.bias_ci and r.inconsistency_ci]
            out["bias_ci_length_sum"] = float(sum(r.bias_ci[1] - r.bias_ci[0] for r in cis))  # type: ignore[index]
            out["inconsistency_ci_length_sum"] = float(
                sum(r.inconsistency_ci[1] - r.inconsistency_ci[0] for r in cis)  # type: ignore[index]
            )
        return out


def _sum(index: np.ndarray, size: int, weights: np.ndarray | None = None) -> np.ndarray:
    return np.bincount(index, weights=weights, minlength=size).astype(float)


def _gauss_loglik(e: np.ndarray, sd: np.ndarray) -> float | None:
    if e.size == 0 or np.any(sd <= 0):
        return None
    return float(np.sum(-np.log(sd) - e * e / (2 * sd * sd) - 0.5 * math.log(2 * math.pi)))


def _rater_spread(v: Votes, mos: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """P.913 clause 12.4's bias (mean shift from the MOS) and the residual's spread, per rater."""
    nr = _sum(v.rater, len(v.raters))
    with np.errstate(invalid="ignore", divide="ignore"):
        shift = v.score - mos[v.stimulus]
        bias = _sum(v.rater, len(v.raters), shift) / nr
        e = shift - bias[v.rater]
        spread = np.sqrt(_sum(v.rater, len(v.raters), e * e) / nr)
    return bias, spread


def fit_mean(v: Votes) -> Fit:
    ns = v.votes_per_stimulus()
    J = len(v.stimuli)
    with np.errstate(invalid="ignore", divide="ignore"):
        mos = _sum(v.stimulus, J, v.score) / ns
        e = v.score - mos[v.stimulus]
        ss = _sum(v.stimulus, J, e * e)
        sd = np.sqrt(ss / (ns - 1))
        mle_sd = np.sqrt(ss / ns)
    stimuli = []
    for j, sid in enumerate(v.stimuli):
        n = int(ns[j])
        cond = v.conditions[j] if v.conditions else ""
        if n == 0:
            stimuli.append(StimulusScore(sid, 0, None, None, None, None, cond))
        elif n == 1:
            stimuli.append(StimulusScore(sid, 1, float(mos[j]), None, None, None, cond))
        else:
            half = t_half_width(float(sd[j]), n, CONFIDENCE)
            stimuli.append(StimulusScore(sid, n, float(mos[j]), float(mos[j]) - half, float(mos[j]) + half,
                                         float(sd[j]), cond))  # fmt: skip
    bias, spread = _rater_spread(v, mos)
    nr = v.votes_per_rater()
    raters = [
        RaterEstimate(rid, int(nr[i]), _num(bias[i]), _num(spread[i]) if nr[i] > 1 else None)
        for i, rid in enumerate(v.raters)
    ]
    rated = ns > 0
    notes = _empty_notes(v)
    # The plain mean as a model: each stimulus its own Gaussian, 2 parameters per stimulus.
    loglik = _gauss_loglik(e, mle_sd[v.stimulus])
    if loglik is None and v.n:
        notes.append("log-likelihood unbounded: some stimulus' votes are all equal, so no NBIC")
    return Fit("mean", stimuli, raters, v.n, 2 * int(rated.sum()), loglik, notes=notes)


def _num(x: float) -> float | None:
    return float(x) if math.isfinite(x) else None


def _empty_notes(v: Votes) -> list[str]:
    notes = []
    no_vote = [s for s, n in zip(v.stimuli, v.votes_per_stimulus(), strict=True) if n == 0]
    if no_vote:
        notes.append(f"{len(no_vote)} stimulus/stimuli without any vote, listed without a score: "
                     + ", ".join(no_vote[:5]) + (" …" if len(no_vote) > 5 else ""))  # fmt: skip
    idle = [r for r, n in zip(v.raters, v.votes_per_rater(), strict=True) if n == 0]
    if idle:
        notes.append(f"{len(idle)} rater(s) without any vote: " + ", ".join(idle[:5]))
    return notes


@dataclass
class _Problem:
    """The votes the subject model sees, re-indexed to the raters and stimuli that take part."""

    r: np.ndarray
    s: np.ndarray
    u: np.ndarray
    raters: np.ndarray  # original rater index per model rater
    stimuli: np.ndarray
    notes: list[str]

    @property
    def n_raters(self) -> int:
        return int(self.raters.size)

    @property
    def n_stimuli(self) -> int:
        return int(self.stimuli.size)


def _problem(v: Votes) -> _Problem:
    notes = _empty_notes(v)
    per_rater = v.votes_per_rater()
    single = per_rater == 1
    if single.any():
        names = [v.raters[i] for i in np.nonzero(single)[0]]
        notes.append(f"{len(names)} rater(s) with a single vote left out of the subject model "
                     f"(an inconsistency needs two votes): " + ", ".join(names[:5]))  # fmt: skip
    keep = ~single[v.rater]
    r0, s0, u = v.rater[keep], v.stimulus[keep], v.score[keep]
    if u.size == 0:
        raise VotesError(
            "no rater has two or more votes: the subject model has nothing to fit (use the mean)"
        )
    if np.all(u == u[0]):
        raise VotesError(
            f"all {u.size} votes are {u[0]:g}: no spread for the subject model to explain (use the mean)"
        )
    raters, r = np.unique(r0, return_inverse=True)
    stimuli, s = np.unique(s0, return_inverse=True)
    dropped = sorted(
        set(range(len(v.stimuli))) - set(stimuli.tolist()) - set(np.nonzero(v.votes_per_stimulus() == 0)[0])
    )
    if dropped:
        notes.append(
            f"{len(dropped)} stimulus/stimuli rated only by single-vote raters, listed without a score"
        )
    return _Problem(r.astype(np.intp), s.astype(np.intp), u, raters, stimuli, notes)


def _alternating_projection(p: _Problem) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, int, bool]:
    n_r, n_s = p.n_raters, p.n_stimuli
    ni, nj = _sum(p.r, n_r), _sum(p.s, n_s)
    psi = _sum(p.s, n_s, p.u) / nj
    delta = _sum(p.r, n_r, p.u - psi[p.s]) / ni
    for it in range(1, AP_MAX_ITERATIONS + 1):
        before = psi
        e = p.u - psi[p.s] - delta[p.r]
        e_mean = _sum(p.r, n_r, e) / ni
        sigma = np.sqrt(np.maximum(_sum(p.r, n_r, e * e) / ni - e_mean**2, 0.0))
        e_stim = _sum(p.s, n_s, e) / nj
        sigma_stim = np.sqrt(np.maximum(_sum(p.s, n_s, e * e) / nj - e_stim**2, 0.0))
        w = 1.0 / (sigma**2 + AP_WEIGHT_GUARD)
        psi = _sum(p.s, n_s, w[p.r] * (p.u - delta[p.r])) / _sum(p.s, n_s, w[p.r])
        delta = _sum(p.r, n_r, p.u - psi[p.s]) / ni
        if np.linalg.norm(psi - before) < AP_THRESHOLD:
            return psi, delta, sigma, sigma_stim / np.sqrt(nj), it, True
    return psi, delta, sigma, sigma_stim / np.sqrt(nj), AP_MAX_ITERATIONS, False


def _newton_raphson(p: _Problem) -> tuple[np.ndarray, np.ndarray, np.ndarray, int, bool]:
    n_r, n_s = p.n_raters, p.n_stimuli
    ni, nj = _sum(p.r, n_r), _sum(p.s, n_s)
    psi = _sum(p.s, n_s, p.u) / nj
    delta = np.zeros(n_r)
    e = p.u - psi[p.s]
    e_mean = _sum(p.r, n_r, e) / ni
    ups = np.maximum(np.sqrt(np.maximum(_sum(p.r, n_r, e * e) / ni - e_mean**2, 0.0)), INCONSISTENCY_FLOOR)
    a = NR_REFRESH
    for it in range(1, NR_MAX_ITERATIONS + 1):
        before = psi
        # Each update is x - (dL/dx) / (d2L/dx2) on L = sum(-log upsilon_i - e^2 / (2 upsilon_i^2)).
        e = p.u - psi[p.s] - delta[p.r]
        delta = (1 - a) * delta + a * (delta + _sum(p.r, n_r, e) / ni)
        e = p.u - psi[p.s] - delta[p.r]
        u2 = ups[p.r] ** 2
        new = ups * _sum(p.r, n_r, 2 * u2 - 4 * e * e) / _sum(p.r, n_r, u2 - 3 * e * e)
        ups = np.maximum((1 - a) * ups + a * np.where(np.isfinite(new), new, ups), INCONSISTENCY_FLOOR)
        w = ups[p.r] ** -2.0
        psi = (1 - a) * psi + a * _sum(p.s, n_s, w * (p.u - delta[p.r])) / _sum(p.s, n_s, w)
        if np.linalg.norm(psi - before) < NR_THRESHOLD:
            return psi, delta, ups, it, True
    return psi, delta, ups, NR_MAX_ITERATIONS, False


def fit_subject_model(v: Votes, model: Model) -> Fit:
    """The subject model by alternating projection (``p910``) or Newton-Raphson (``p913``)."""
    p = _problem(v)
    if model == "p910":
        psi, delta, ups, stim_sos, iterations, converged = _alternating_projection(p)
    elif model == "p913":
        psi, delta, ups, iterations, converged = _newton_raphson(p)
        stim_sos = None
    else:
        raise ValueError(f"not a subject model: {model}")
    shift = float(delta.mean())
    delta, psi = delta - shift, psi + shift
    ups_eff = np.maximum(ups, INCONSISTENCY_FLOOR)
    if np.any(ups < INCONSISTENCY_FLOOR):
        p.notes.append(
            f"inconsistency floored at {INCONSISTENCY_FLOOR:g} for rater(s) who match the model exactly"
        )
    info = _sum(p.s, p.n_stimuli, ups_eff[p.r] ** -2.0)  # Fisher information of each psi_j
    se = 1.0 / np.sqrt(info)
    ni = _sum(p.r, p.n_raters)
    nj = _sum(p.s, p.n_stimuli)
    by_stim = {int(j): k for k, j in enumerate(p.stimuli)}
    by_rater = {int(i): k for k, i in enumerate(p.raters)}
    stimuli = []
    for j, sid in enumerate(v.stimuli):
        cond = v.conditions[j] if v.conditions else ""
        k = by_stim.get(j)
        if k is None:
            stimuli.append(StimulusScore(sid, 0, None, None, None, None, cond))
            continue
        sos = float(stim_sos[k]) if stim_sos is not None else float(se[k])
        mos, half = float(psi[k]), Z95 * float(se[k])
        stimuli.append(StimulusScore(sid, int(nj[k]), mos, mos - half, mos + half, sos, cond))
    raters = []
    per_rater = v.votes_per_rater()
    for i, rid in enumerate(v.raters):
        k = by_rater.get(i)
        if k is None:
            note = "a single vote: not in the subject model" if per_rater[i] == 1 else "no vote"
            raters.append(RaterEstimate(rid, int(per_rater[i]), None, None, note=note))
            continue
        n = float(ni[k])
        b, u = float(delta[k]), float(ups[k])
        half = Z95 * float(ups_eff[k]) / math.sqrt(n)
        lo = math.sqrt(n / stats.chi2.ppf(0.975, n)) * u
        hi = math.sqrt(n / stats.chi2.ppf(0.025, n)) * u
        raters.append(RaterEstimate(rid, int(n), b, u, (b - half, b + half), (lo, hi)))
    e = p.u - psi[p.s] - delta[p.r]
    loglik = _gauss_loglik(e, ups_eff[p.r])
    if not converged:
        p.notes.append(f"did not converge in {iterations} iterations; the estimates are the last iterate")
    return Fit(
        model,
        stimuli,
        raters,
        int(p.u.size),
        p.n_stimuli + 2 * p.n_raters,
        loglik,
        iterations,
        converged,
        p.notes,
    )


def fit(v: Votes, model: Model = "p910") -> Fit:
    if model == "mean":
        return fit_mean(v)
    if model in ("p910", "p913"):
        return fit_subject_model(v, model)
    raise VotesError(f"model {model!r} is not one of: {', '.join(MODELS)}")
