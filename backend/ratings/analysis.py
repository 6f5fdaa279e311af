"""Campaign results: progress, screening, scores (DCR mean, ACR MOS or ACR-HR DMOS) with 95 % CIs,
agreement, Table 4.2, Figs 4.3/4.4, CSV.

Reads the stored ratings; the statistics themselves are in ``ratings.stats``, the delivery checks
behind the suspicious sessions in ``ratings.delivery``.
"""

from __future__ import annotations

import csv
import io
import math
from collections import defaultdict
from collections.abc import Iterable, Iterator
from typing import Any

from django.db.models import Count

from qoelab.subjective.votes import differential
from qoelab.units import format_duration, format_rate
from ratings import delivery, stats, subject
from ratings import findings as rating_findings
from ratings import screening as screening_settings
from ratings.campaigns import si_params, system_name
from ratings.choices import QUANTITY, SCORE_MAX, SCORE_MIN, ConditionKind, Phase, RatingMethod
from ratings.models import Campaign, Rating

# The gold item, as a screening reason names it.
TRAP = {
    RatingMethod.DCR: "a reference-vs-reference trap",
    RatingMethod.ACR: "the reference shown alone (gold trap)",
    RatingMethod.ACR_HR: "the hidden reference",
}
# What one vote is, as the subject model's section names its estimate.
MODEL_SCORE = {
    RatingMethod.DCR: "DCR score",
    RatingMethod.ACR: "ACR score",
    RatingMethod.ACR_HR: "ACR-HR differential score",
}
# The short name of the score on the charts' y axis.
Y_LABEL = {RatingMethod.DCR: "DMOS", RatingMethod.ACR: "MOS", RatingMethod.ACR_HR: "DMOS (ACR-HR)"}
# What a campaign's score is, by method, said on every output beside its name (choices.QUANTITY): a
# DCR campaign's "DMOS" (the thesis' word) is the mean of DCR impairment scores, not ITU-T P.910's
# ACR-HR DMOS (a differential score against a hidden reference); an ACR campaign's is the MOS.
SCALE_NOTE = {
    RatingMethod.DCR: "the mean of the DCR impairment scores (5 Imperceptible … 1 Very annoying)",
    RatingMethod.ACR: "the mean of the ACR quality scores (5 Excellent … 1 Bad)",
    RatingMethod.ACR_HR: "the mean over evaluators of their ACR vote on the case minus their vote on "
    "the hidden reference, plus 5 (ITU-T P.910; above 5: the case was rated better than the reference)",
}


def progress(campaign: Campaign) -> dict[str, Any]:
    evaluators = list(campaign.evaluators.all())
    conds = list(campaign.conditions.annotate(n_ratings=Count("ratings__evaluator", distinct=True)))
    started = [e for e in evaluators if e.consent_at]
    return {
        "evaluators": [
            {
                "id": e.pk,
                "label": e.label,
                "state": e.state,
                "done": min(e.position, e.total) if e.consent_at else 0,
                "total": e.total,
                "first_opened_at": e.first_opened_at,
                "finished_at": e.finished_at,
            }
            for e in evaluators
        ],
        "conditions": [
            {"id": c.pk, "label": c.label, "kind": c.kind, "rated_by": c.n_ratings, "of": len(started)}
            for c in conds
        ],
        "invited": len(evaluators),
        "started": len(started),
        "finished": sum(1 for e in evaluators if e.finished_at),
    }


def _main_ratings(campaign: Campaign) -> list[Rating]:
    return list(
        Rating.objects.filter(condition__campaign=campaign, phase=Phase.MAIN)
        .select_related("condition", "evaluator")
        .order_by("condition__position", "evaluator_id", "aspect")
    )


def analyze(campaign: Campaign) -> dict[str, Any]:
    """Screening, DMOS ± 95 % CI per condition and aspect (all evaluators and after exclusion),
    Krippendorff's alpha (ordinal, interval), a Table 4.2 layout, the data of Figs 4.3/4.4 and the
    P.910 subject model's scores, evaluator bias and inconsistency (``ratings.subject``).
    """
    ratings = _main_ratings(campaign)
    conds = list(campaign.conditions.order_by("position", "id"))
    by_id = {c.pk: c for c in conds}
    labels = {e.pk: e.label for e in campaign.evaluators.all()}
    matrix: dict[int, dict[tuple[int, str], float]] = defaultdict(dict)
    gold: dict[int, list[tuple[Any, float]]] = defaultdict(list)
    per_eval_cond: dict[tuple[int, int, str], int] = {}
    for r in ratings:
        per_eval_cond[(r.evaluator_id, r.condition_id, r.aspect)] = r.score
        if r.condition.kind in (ConditionKind.NORMAL, ConditionKind.HIDDEN_REFERENCE):
            matrix[r.evaluator_id][(r.condition_id, r.aspect)] = r.score
        # ACR-HR's hidden reference is the reference video as a case: the gold trap's vote too.
        if r.condition.kind in (ConditionKind.GOLD, ConditionKind.HIDDEN_REFERENCE):
            gold[r.evaluator_id].append((f"{r.condition.label} / {r.aspect}", r.score))
    matrix, method_notes = _scores(campaign, conds, matrix)
    repeats: dict[int, list[tuple[Any, float, float]]] = defaultdict(list)
    for (ev, cid, aspect), score in per_eval_cond.items():
        c = by_id.get(cid)
        if c is not None and c.kind == ConditionKind.REPEAT and c.repeat_of_id:
            first = per_eval_cond.get((ev, c.repeat_of_id, aspect))
            if first is not None:
                repeats[ev].append((f"{c.repeat_of.label} / {aspect}", first, score))
    settings = screening_settings.parse(campaign.screening)
    cleansed = 0
    if settings.outlier_votes.on:  # cleansing: single votes out of every table, before screening
        matrix, cleansed = stats.without_outlier_votes(matrix, settings.outlier_votes.z)
    playback = delivery.playback_rows(campaign) if settings.playback.on else {}
    screening = stats.screen(
        matrix, gold, repeats, settings=settings, trap=TRAP[campaign.method], playback=playback
    )
    excluded = {ev for ev, s in screening.items() if s.excluded}
    kept_matrix = {ev: row for ev, row in matrix.items() if ev not in excluded}

    def table(m: dict[int, dict[tuple[int, str], float]]) -> list[dict[str, Any]]:
        cells: dict[tuple[int, str], list[float]] = defaultdict(list)
        for row in m.values():
            for unit, score in row.items():
                cells[unit].append(score)
        out = []
        for c in conds:
            if c.kind != ConditionKind.NORMAL:
                continue
            si = si_params(c.params)
            for a in campaign.aspects:
                summ = stats.dmos(cells.get((c.pk, a["key"]), []))
                out.append(
                    {
                        "condition": c.pk,
                        "label": c.label,
                        "protocol": c.params.get("protocol", ""),
                        "system": system_name(c.params),
                        "params": c.params,
                        **si,
                        "measured_tcp_bps": c.measured_tcp_bps,
                        "aspect": a["key"],
                        "aspect_label": a["label"],
                        **summ.to_json(),
                    }
                )
        return out

    # ACR-HR's differential scores run from 1 (case Bad, reference Excellent) to 9 (the reverse).
    domain = range(1, 10) if campaign.method == RatingMethod.ACR_HR else range(SCORE_MIN, SCORE_MAX + 1)

    def agreement(m: dict[int, dict[tuple[int, str], float]]) -> dict[str, Any]:
        return {
            level: stats.alpha(m, level, domain=tuple(domain)).to_json() for level in ("ordinal", "interval")
        }

    all_rows, kept_rows = table(matrix), table(kept_matrix)
    # Shown, not excluded by rule: the researcher decides (docs/security.md "Seen means seen").
    suspicious = delivery.suspicious_sessions(campaign)
    return {
        "campaign": campaign.pk,
        "method": campaign.method,
        "quantity": QUANTITY[campaign.method],
        "quantity_note": SCALE_NOTE[campaign.method],
        "method_notes": method_notes,
        "y_range": y_range(all_rows),
        "aspects": campaign.aspects,
        "n_ratings": len(ratings),
        "evaluators": [
            {
                "id": ev,
                "label": labels.get(ev, str(ev)),
                **{k: v for k, v in s.to_json().items() if k != "evaluator"},
                "delivery": suspicious.get(ev, []),
            }
            for ev, s in screening.items()
        ],
        "suspicious": [
            {"id": ev, "label": labels.get(ev, str(ev)), "reasons": reasons}
            for ev, reasons in suspicious.items()
        ],
        "excluded": [
            {"id": ev, "label": labels.get(ev, str(ev)), "reasons": screening[ev].reasons} for ev in excluded
        ],
        "rule": {
            "min_correlation": settings.correlation.min_r,
            "gold_fail_at_or_below": settings.gold.fail_at_or_below,
            "max_repeat_difference": settings.repeat.max_difference,
            "settings": settings.model_dump(),
            "active": screening_settings.describe(settings),
            "outlier_votes_removed": cleansed,
        },
        "all": {"dmos": all_rows, "alpha": agreement(matrix), "table": table42(campaign, all_rows)},
        "screened": {
            "dmos": kept_rows,
            "alpha": agreement(kept_matrix),
            "table": table42(campaign, kept_rows),
        },
        # The thesis' §4.5 findings over the evaluators the screening kept (as Table 4.2 above).
        "findings": rating_findings.campaign_findings(campaign, kept_matrix, conds),
        "subject_model": subject.subject_model(
            campaign.aspects,
            matrix,
            [(c.pk, c.label) for c in conds if c.kind == ConditionKind.NORMAL],
            labels,
            all_rows,
            MODEL_SCORE[campaign.method],
        ),
    }


def _scores(
    campaign: Campaign, conds: list[Any], votes: dict[int, dict[tuple[int, str], float]]
) -> tuple[dict[int, dict[tuple[int, str], float]], list[str]]:
    """The votes on the normal conditions as the method scores them: as given (DCR, ACR), or ACR-HR's
    differential score against the same evaluator's vote on the hidden reference (ITU-T P.910:
    vote − vote on the reference + 5), by the subjective library (``votes.differential``)."""
    normal = {c.pk for c in conds if c.kind == ConditionKind.NORMAL}
    if campaign.method != RatingMethod.ACR_HR:
        return {ev: {u: v for u, v in row.items() if u[0] in normal} for ev, row in votes.items()}, []
    hidden = next((c.pk for c in conds if c.kind == ConditionKind.HIDDEN_REFERENCE), None)
    if hidden is None:
        return {}, ["the campaign has no hidden reference, so no ACR-HR DMOS can be computed"]
    reference_of = {(cid, a["key"]): (hidden, a["key"]) for cid in normal for a in campaign.aspects}
    scored, notes = differential(votes, reference_of, top=SCORE_MAX)
    return scored, [n.replace("test vote(s)", "vote(s) on cases") for n in notes]


def y_range(rows: list[dict[str, Any]]) -> dict[str, float]:
    """The charts' y axis: the 1-5 scale, widened for ACR-HR scores above 5 (a case rated better than
    its reference, valid per P.910) so that no mean leaves the chart."""
    top = max([float(SCORE_MAX), *(r["mean"] for r in rows if r["mean"] is not None)])
    return {"y_min": float(SCORE_MIN), "y_max": float(math.ceil(top))}


def _fmt_rate(bps: float | None) -> str:
    return format_rate(bps) if bps is not None else "–"


def _fmt_delay(s: float | None) -> str:
    return format_duration(s) if s is not None else "–"


def table42(campaign: Campaign, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Thesis Table 4.2 layout: one table per remaining link setting (rate, loss), rows aspect × delay,
    one column per protocol (a VM-mode condition is a column of its own, e.g. "spice (VM)"); each
    cell DMOS ± half-width (n)."""
    protocols = sorted({r["system"] for r in rows})
    groups: dict[tuple, list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        groups[(r["rate_bps"] or -1, r["loss_pct"] or 0.0)].append(r)
    out = []
    for (rate, loss), items in sorted(groups.items()):
        delays = sorted({r["delay_s"] for r in items}, key=lambda d: (d is None, d or 0))
        body = []
        for a in campaign.aspects:
            for d in delays:
                cells = {}
                for p in protocols:
                    hit = next(
                        (
                            r
                            for r in items
                            if r["aspect"] == a["key"] and r["delay_s"] == d and r["system"] == p
                        ),
                        None,
                    )
                    cells[p] = hit
                body.append(
                    {"aspect": a["label"], "delay": _fmt_delay(d), "cells": [cells[p] for p in protocols]}
                )
        title = f"rate {_fmt_rate(rate if rate > 0 else None)}" + (f", loss {loss:g} %" if loss else "")
        out.append({"title": title, "protocols": protocols, "rows": body})
    return out


def chart_payloads(
    analysis_part: dict[str, Any],
    aspect: str,
    protocol: str,
    y_label: str = "DMOS",
    y: dict[str, float] | None = None,
) -> dict[str, Any]:
    """Figs 4.3 and 4.4 for one aspect and protocol (as ``system_name`` gives it), in the
    dashboard's chart payload format.

    4.3: DMOS vs measured TCP throughput (Mbit/s), one series per one-way delay.
    4.4: DMOS vs one-way delay (ms), one series per link rate (the fixed-throughput setting); each
    point's measured throughput is in the series label range.
    """
    rows = [r for r in analysis_part["dmos"] if r["aspect"] == aspect and r["system"] == protocol and r["n"]]

    def point(x: float | None, r: dict[str, Any]) -> dict[str, Any] | None:
        if x is None or r["mean"] is None:
            return None
        return {"x": x, "mean": r["mean"], "ci_low": r["ci_low"], "ci_high": r["ci_high"], "n": r["n"]}

    by_delay: dict[float | None, list] = defaultdict(list)
    by_rate: dict[float | None, list] = defaultdict(list)
    fallback = False
    for r in rows:
        tcp = r["measured_tcp_bps"]
        if tcp is None:
            tcp, fallback = r["rate_bps"], True
        p = point(tcp, r)
        if p:
            by_delay[r["delay_s"]].append(p)
        p = point(r["delay_s"], r)
        if p:
            by_rate[r["rate_bps"]].append(p)
    # The score lives on the 1-5 scale (``y``: wider for ACR-HR above 5); intervals beyond it are
    # clipped and marked, and with a handful of conditions each gets its own x tick.
    scale = {**(y or {"y_min": SCORE_MIN, "y_max": SCORE_MAX}), "x_ticks": "points"}
    fig43 = {
        **scale,
        "title": f"Fig. 4.3: {protocol} — QoE vs TCP throughput",
        "x_label": "TCP throughput (Mbit/s)" + (" — configured rate where not measured" if fallback else ""),
        "y_label": y_label,
        "x_scale": 1e6,
        "y_scale": 1,
        "series": [
            {"label": f"delay {_fmt_delay(d)}", "points": pts}
            for d, pts in sorted(by_delay.items(), key=lambda kv: (kv[0] is None, kv[0] or 0))
        ],
    }
    fig44 = {
        **scale,
        "title": f"Fig. 4.4: {protocol} — QoE vs propagation delay",
        "x_label": "one-way propagation delay (ms)",
        "y_label": y_label,
        "x_scale": 1e-3,
        "y_scale": 1,
        "series": [
            {"label": f"rate {_fmt_rate(rt)}", "points": pts}
            for rt, pts in sorted(by_rate.items(), key=lambda kv: (kv[0] is None, kv[0] or 0))
        ],
    }
    return {"fig43": fig43, "fig44": fig44, "measured": not fallback}


# ---------------------------------------------------------------------------------------------
# CSV


def _csv(rows: Iterable[list[Any]]) -> Iterator[str]:
    buf = io.StringIO()
    w = csv.writer(buf)
    for row in rows:
        w.writerow(row)
        yield buf.getvalue()
        buf.seek(0)
        buf.truncate()


def ratings_csv(campaign: Campaign) -> Iterator[str]:
    def rows() -> Iterator[list[Any]]:
        yield [
            "campaign", "evaluator", "condition_id", "condition", "kind", "repeat_of", "protocol", "rate",
            "delay", "loss", "measured_tcp_bps", "phase", "aspect", "score", "screens_seen", "created",
        ]  # fmt: skip
        qs = (
            Rating.objects.filter(condition__campaign=campaign)
            .select_related("evaluator", "condition")
            .order_by("evaluator_id", "phase", "condition__position", "aspect")
        )
        for r in qs.iterator():
            c = r.condition
            yield [
                campaign.pk, r.evaluator.label, c.pk, c.label, c.kind, c.repeat_of_id or "",
                c.params.get("protocol", ""), c.params.get("rate", ""), c.params.get("delay", ""),
                c.params.get("loss", ""), c.measured_tcp_bps if c.measured_tcp_bps is not None else "",
                r.phase, r.aspect, r.score, r.screens_seen, r.created.isoformat(),
            ]  # fmt: skip

    return _csv(rows())


def summary_csv(campaign: Campaign) -> Iterator[str]:
    result = analyze(campaign)

    def rows() -> Iterator[list[Any]]:
        yield [
            "screening", "condition_id", "condition", "protocol", "rate_bps", "delay_s", "loss_pct",
            "measured_tcp_bps", "aspect", "quantity", "n", "dmos", "sd", "ci95_low", "ci95_high",
        ]  # fmt: skip
        for part in ("all", "screened"):
            for r in result[part]["dmos"]:
                yield [
                    "all evaluators" if part == "all" else "after exclusion", r["condition"], r["label"],
                    r["protocol"], r["rate_bps"], r["delay_s"], r["loss_pct"], r["measured_tcp_bps"],
                    r["aspect"], result["quantity"], r["n"], r["mean"], r["sd"], r["ci_low"], r["ci_high"],
                ]  # fmt: skip

    return _csv(rows())
