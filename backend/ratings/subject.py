"""A campaign's ratings through the P.910 subject model, beside the plain DCR means (docs/ratings.md).

Per aspect, the evaluators' main-phase scores on the normal conditions are one rating set (stimulus
= condition, rater = evaluator); ``qoelab.subjective`` estimates each condition's score with its
95 % interval and each evaluator's bias and inconsistency. All evaluators take part: the model
weighs an inconsistent evaluator down instead of excluding them. A set the model cannot fit (too
few evaluators, every score equal) gives its one-sentence reason instead of numbers.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from qoelab.subjective import models
from qoelab.subjective.votes import Votes, VotesError

MODEL: models.Model = "p910"


def _votes(
    matrix: Mapping[int, Mapping[tuple[int, str], float]], aspect: str, conditions: Sequence[int]
) -> Votes:
    raters = [ev for ev, row in matrix.items() if any(a == aspect for _, a in row)]
    at_rater = {ev: i for i, ev in enumerate(raters)}
    at_cond = {c: j for j, c in enumerate(conditions)}
    r, s, u = [], [], []
    for ev in raters:
        for (cid, a), score in matrix[ev].items():
            if a == aspect and cid in at_cond:
                r.append(at_rater[ev])
                s.append(at_cond[cid])
                u.append(float(score))
    return Votes(
        tuple(str(ev) for ev in raters), tuple(str(c) for c in conditions),
        np.array(r, dtype=np.intp), np.array(s, dtype=np.intp), np.array(u, dtype=float),
    )  # fmt: skip


def subject_model(
    aspects: Sequence[Mapping[str, str]],
    matrix: Mapping[int, Mapping[tuple[int, str], float]],
    conditions: Sequence[tuple[int, str]],
    labels: Mapping[int, str],
    plain: Sequence[Mapping[str, Any]],
    score: str = "DCR score",
) -> dict[str, Any]:
    """Per aspect: the model's score ± CI per condition beside the plain mean, and each evaluator's
    bias and inconsistency. ``conditions``: (id, label) of the normal conditions in order; ``plain``:
    the analysis' DMOS rows (all evaluators); ``score``: what a vote is (``ratings.choices.QUANTITY``'s
    short form: a DCR score, an ACR vote, an ACR-HR differential score)."""
    by_unit = {(row["condition"], row["aspect"]): row for row in plain}
    out = []
    for aspect in aspects:
        key = aspect["key"]
        part: dict[str, Any] = {"key": key, "label": aspect["label"], "error": "", "rows": [], "raters": []}
        out.append(part)
        votes = _votes(matrix, key, [c for c, _ in conditions])
        if votes.n == 0:
            part["error"] = "No ratings yet."
            continue
        try:
            fit = models.fit(votes, MODEL)
        except VotesError as err:
            part["error"] = str(err)
            continue
        for (cid, label), est in zip(conditions, fit.stimuli, strict=True):
            dcr = by_unit.get((cid, key), {})
            part["rows"].append({
                "condition": cid, "label": label, "n": est.n,
                "mos": est.mos, "ci_low": est.ci_low, "ci_high": est.ci_high,
                "dcr_mean": dcr.get("mean"), "dcr_ci_low": dcr.get("ci_low"),
                "dcr_ci_high": dcr.get("ci_high"),
            })  # fmt: skip
        for est in fit.raters:
            ev = int(est.id)
            part["raters"].append({
                "id": ev, "label": labels.get(ev, est.id), "n": est.n, "bias": est.bias,
                "inconsistency": est.inconsistency, "note": est.note,
            })  # fmt: skip
        part["nbic"] = fit.nbic
        part["notes"] = fit.notes
    return {"model": MODEL, "quantity": f"{score} by {models.ESTIMATOR[MODEL]}", "aspects": out}
