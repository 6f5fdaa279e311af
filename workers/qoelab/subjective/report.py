"""A rating set's analysis as JSON (the shape ``qoelab ratings analyze --json`` prints) or Markdown.

The JSON: ``{"model", "method", "quantity", "sos_meaning", "stimuli": [{"id", "mos", "ci_low", "ci_high",
"sos", "n"}], "raters": [{"id", "bias", "inconsistency", "screened_out", "reasons", ...}], "alpha":
{...}, "screening": {...}, "fit": {...}}`` with stimuli and raters in input order. No NaN: a value
that cannot be estimated is ``null`` and the fit's notes say why.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import krippendorff
import numpy as np

from qoelab.subjective.models import SOS_MEANING, Fit, Model, fit
from qoelab.subjective.screening import (
    GOLD_RULE,
    GOLD_TOLERANCE,
    OUTLIER_Z,
    PLAYBACK_RULE,
    Screening,
    gold_failures,
    outlier_votes,
    playback_failures,
    screen,
)
from qoelab.subjective.votes import Votes, VotesError, hidden_reference, only_rated


def alpha(v: Votes, level: str, domain: Sequence[float] | None = None) -> dict[str, Any]:
    """Krippendorff's alpha over raters × stimuli (a repeated vote: the first counts).

    ``domain``: the scale's values (a campaign's 1..5), so that ordinal distances do not depend on
    which grades happened to be used; without it, the values seen.
    """
    units = v.votes_per_stimulus()
    pairable = int((np.bincount(v.stimulus[_first_votes(v)], minlength=len(v.stimuli)) >= 2).sum())
    base = {"level": level, "raters": len(v.raters), "units": int((units > 0).sum()), "pairable": pairable}
    if len(v.raters) < 2 or pairable == 0:
        return {"value": None, "reason": "needs a stimulus rated by two or more raters", **base}
    first = _first_votes(v)
    data = np.full((len(v.raters), len(v.stimuli)), np.nan)
    data[v.rater[first], v.stimulus[first]] = v.score[first]
    seen = np.unique(v.score[first])
    if seen.size < 2:
        return {"value": None, "reason": "all votes are identical; alpha is undefined (no variation)", **base}
    values = seen if domain is None else np.asarray(domain, dtype=float)
    value = krippendorff.alpha(reliability_data=data, level_of_measurement=level, value_domain=values)
    return {"value": float(value), "reason": "", **base}


def _first_votes(v: Votes) -> np.ndarray:
    pair = v.rater.astype(np.int64) * max(len(v.stimuli), 1) + v.stimulus
    _, first = np.unique(pair, return_index=True)
    mask = np.zeros(v.n, dtype=bool)
    mask[first] = True
    return mask


def _r(x: float | None, digits: int = 6) -> float | None:
    return None if x is None or not math.isfinite(x) else round(float(x), digits)


# What a score of each method is called (ITU-T P.910's methods); every output names it.
METHODS = {"acr": "ACR MOS", "acr-hr": "ACR-HR DMOS", "dcr": "DCR score"}


def analyze(
    v: Votes, model: Model = "p910", *, method: str = "acr", exclude_screened: bool = False, top: float = 5.0,
    drop_outlier_votes: bool = False, gold_tolerance: float = GOLD_TOLERANCE,
) -> dict[str, Any]:  # fmt: skip
    """Screening, the model's fit (on the kept raters when ``exclude_screened``) and agreement.

    ``method`` ``acr-hr`` first turns each test vote into its differential score against the same
    rater's vote on the hidden reference (``votes.hidden_reference``, ``top`` the scale's best grade).
    ``drop_outlier_votes`` then leaves out single votes at |z| >= 3.29 within their stimulus. Votes
    on gold items (a ``gold`` column) screen their raters (within ``gold_tolerance``) and are then set
    apart, as are gold-only stimuli; ``played_s`` and ``clip_s`` screen raters by playback.
    """
    if method not in METHODS:
        raise VotesError(f"method {method!r} is not one of: {', '.join(METHODS)}")
    notes: list[str] = []
    # P.910's crowdsourcing rules where the file has their columns; gold items are answered for the
    # screening only and never scored.
    crowd = {**gold_failures(v, gold_tolerance)}
    for i, why in playback_failures(v).items():
        crowd[i] = f"{crowd[i]}; {why}" if i in crowd else why
    extra_rules = ([GOLD_RULE] if v.column("gold") is not None else []) + (
        [PLAYBACK_RULE] if v.column("played_s") is not None and v.column("clip_s") is not None else []
    )
    gold = v.column("gold")
    if gold is not None and (~np.isnan(gold)).any():
        notes.append(f"{int((~np.isnan(gold)).sum())} gold-item vote(s) used for screening only")
        v = only_rated(v.select(np.isnan(gold)))
    if method == "acr-hr":
        v, notes = hidden_reference(v, top)
    if drop_outlier_votes:
        outliers = outlier_votes(v)
        if outliers.any():
            notes.append(
                f"{int(outliers.sum())} vote(s) at |z| >= {OUTLIER_Z:g} within their stimulus left out"
            )
            v = v.select(~outliers)
    checked = screen(v)
    checked.extra_rules = extra_rules
    for i, why in sorted(crowd.items()):
        checked.flag(i, why)
    used = v
    if exclude_screened and checked.out:
        out = np.array([i in checked.out for i in range(len(v.raters))])
        used = v.select(~out[v.rater])
    result = fit(used, model)
    result.notes[:0] = notes
    return to_json(result, checked, v, excluded=exclude_screened, method=method)


def to_json(
    result: Fit, checked: Screening, v: Votes, *, excluded: bool, method: str = "acr"
) -> dict[str, Any]:
    return {
        "model": result.model,
        "method": method,
        "quantity": f"{METHODS[method]} by {result.estimator}",
        "sos_meaning": SOS_MEANING[result.model],
        "stimuli": [
            {
                "id": s.id,
                "mos": _r(s.mos),
                "ci_low": _r(s.ci_low),
                "ci_high": _r(s.ci_high),
                "sos": _r(s.sos),
                "n": s.n,
                **({"condition": s.condition} if s.condition else {}),
            }  # fmt: skip
            for s in result.stimuli
        ],
        "raters": [
            {
                "id": r.id,
                "n": r.n,
                "bias": _r(r.bias),
                "inconsistency": _r(r.inconsistency),
                "bias_ci": None if r.bias_ci is None else [_r(x) for x in r.bias_ci],
                "inconsistency_ci": None
                if r.inconsistency_ci is None
                else [_r(x) for x in r.inconsistency_ci],
                "screened_out": i in checked.out,
                "reasons": checked.reasons.get(i, []),
                **({"note": r.note} if r.note else {}),
            }
            for i, r in enumerate(result.raters)
        ],
        "alpha": {"interval": alpha(v, "interval"), "ordinal": alpha(v, "ordinal")},
        "screening": {**checked.to_json(), "excluded_from_fit": excluded and bool(checked.out)},
        "fit": {
            "votes": result.votes,
            "params": result.params,
            "loglik": _r(result.loglik),
            "nbic": _r(result.nbic),
            "iterations": result.iterations,
            "converged": result.converged,
            "notes": result.notes,
        },
    }


def _f(x: float | None, digits: int = 3) -> str:
    return "–" if x is None else f"{x:.{digits}f}"


def to_markdown(report: dict[str, Any]) -> str:
    lines = [f"# {report['quantity']}", ""]
    fit_ = report["fit"]
    lines.append(f"{fit_['votes']} votes; model parameters {fit_['params']}; NBIC {_f(fit_['nbic'])}"
                 + ("" if fit_["converged"] else " (did not converge)") + ".")  # fmt: skip
    lines += [f"- {note}" for note in fit_["notes"]]
    lines += ["", "| stimulus | n | MOS | 95 % CI | SOS |", "|---|---|---|---|---|"]
    for s in report["stimuli"]:
        ci = "–" if s["ci_low"] is None else f"{_f(s['ci_low'])} – {_f(s['ci_high'])}"
        name = s["id"] + (f" ({s['condition']})" if s.get("condition") else "")
        lines.append(f"| {_md(name)} | {s['n']} | {_f(s['mos'])} | {ci} | {_f(s['sos'])} |")
    lines += ["", f"SOS: {report['sos_meaning']}.", ""]
    lines += ["| rater | votes | bias | inconsistency | screened out |", "|---|---|---|---|---|"]
    for r in report["raters"]:
        why = "; ".join(r["reasons"]) if r["screened_out"] else ""
        lines.append(
            f"| {_md(r['id'])} | {r['n']} | {_f(r['bias'])} | {_f(r['inconsistency'])} | {_md(why)} |"
        )
    lines.append("")
    for level, a in report["alpha"].items():
        value = _f(a["value"]) if a["value"] is not None else f"undefined ({a['reason']})"
        lines.append(f"Krippendorff's alpha ({level}): {value}.")
    scr = report["screening"]
    lines.append("")
    lines.append("Screening: " + "; ".join(f"{rule['name']} ({rule['clause']})" for rule in scr["rules"])
                 + (". Screened-out raters are left out of the fit." if scr["excluded_from_fit"]
                    else ". Every rater is in the fit."))  # fmt: skip
    return "\n".join(lines) + "\n"


def _md(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")
