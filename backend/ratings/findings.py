"""A campaign's ratings against the thesis' chapter-4 subjective findings (``qoelab.findings``,
report ``ch4-dcr``): Table 4.2 and Figs. 4.3/4.4 as checks that say *not run: needs ratings* until
ratings exist, then compute their verdicts (docs/findings.md, "Chapter 4's subjective half")."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from qoelab import findings
from ratings.campaigns import si_params
from ratings.choices import RatingMethod
from ratings.models import Campaign, Condition

DEFAULT_JOB = "rd_qoe"  # a campaign made by hand rates remote-desktop sessions


def rows(
    matrix: Mapping[int, Mapping[tuple[int, str], float]], conditions: Sequence[Condition]
) -> list[dict[str, Any]]:
    """One row per evaluator and condition: the condition's parameters (rate in bit/s, delay in s)
    and the evaluator's score per aspect; conditions without a protocol, rate or delay are left out."""
    by_id = {c.pk: c for c in conditions}
    answers: dict[tuple[int, int], dict[str, float]] = {}
    for ev, row in matrix.items():
        for (cid, aspect), score in row.items():
            answers.setdefault((ev, cid), {})[aspect] = float(score)
    out = []
    for (_ev, cid), summary in answers.items():
        c = by_id.get(cid)
        if c is None:
            continue
        si = si_params(c.params)
        if not c.params.get("protocol") or si["rate_bps"] is None or si["delay_s"] is None:
            continue
        params = {k: v for k, v in c.params.items() if k not in ("rate", "delay", "loss")}
        params |= {"rate": si["rate_bps"], "delay": si["delay_s"]}
        if si["loss_pct"] is not None:
            params["loss"] = si["loss_pct"]
        out.append({"params": params, "summary": summary})
    return out


def campaign_findings(
    campaign: Campaign, matrix: Mapping[int, Mapping[tuple[int, str], float]], conditions: Sequence[Condition]
) -> dict[str, Any]:
    """``{"report", "title", "checks": [...]}`` over the evaluators kept by the screening, or an
    empty report name when the rated job type declares none."""
    job = campaign.sweep.job_type if campaign.sweep_id else DEFAULT_JOB
    report = findings.RATING_REPORTS.get(job)
    if report is None:
        return {"report": "", "title": "", "checks": []}
    title = findings.REPORT_TITLES.get(report, report)
    if campaign.method != RatingMethod.DCR:
        # Table 4.2's numbers are DCR means; an ACR score is another quantity, so no check compares.
        return {"report": report, "title": title, "checks": [], "note": (
            f"Not compared: the thesis' findings are DCR means, and this campaign rates by "
            f"{campaign.get_method_display()}, another quantity. Make a DCR campaign to check them."
        )}  # fmt: skip
    return {
        "report": report,
        "title": findings.REPORT_TITLES.get(report, report),
        "checks": findings.rating_findings(report, rows(matrix, conditions)),
    }
