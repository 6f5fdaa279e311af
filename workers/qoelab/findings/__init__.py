"""The thesis' findings checked by code: named checks over a finished sweep's results.

``evaluate("ch4", rows)`` runs every check of a report that applies to the rows (plain dicts
``{"params": resolved SI values, "summary": {metric: value}}`` of succeeded trials) and returns one
:class:`Finding` per check and scope. ``REPORTS`` maps a report name to its checks, ``JOB_REPORTS``
a job type to the report that reads its results; both are read from the reports the job types
declare (``JobType.reports``), so this module names none. See docs/findings.md.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

from qoelab import jobs
from qoelab.findings.base import (
    FAILS,
    HOLDS,
    INCONCLUSIVE,
    Check,
    Finding,
    Report,
    Row,
    Stat,
    Verdict,
    mean_ci,
)
from qoelab.findings.markdown import render_markdown
from qoelab.jobtype import resolve


def _declared() -> dict[str, tuple[str, Report]]:
    """Every report a registered job type declares (``JobType.reports``), with that job type."""
    found: dict[str, tuple[str, Report]] = {}
    for job in jobs.REGISTRY.values():
        for ref in job.reports:
            report = resolve(ref)
            if report.name in found:
                first = found[report.name][0]
                raise ValueError(f"findings report {report.name!r} declared by {first} and {job.name}")
            found[report.name] = (job.name, report)
    return found


class _View(Mapping[str, Any]):
    """A read-only mapping over the declared reports, read afresh on each use: a job type registered
    later (a plug-in, a test's) is seen as the built-in ones are."""

    def __init__(self, item: Callable[[str, Report], tuple[str, Any] | None]) -> None:
        self._item = item

    def _items(self) -> dict[str, Any]:
        return dict(kv for job, r in _declared().values() if (kv := self._item(job, r)) is not None)

    def __getitem__(self, key: str) -> Any:
        return self._items()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._items())

    def __len__(self) -> int:
        return len(self._items())


REPORTS: Mapping[str, tuple[Check, ...]] = _View(lambda job, r: (r.name, r.checks))
# Per report, each check's paper value: the paper's own number or statement (findings tables).
PAPER_VALUES: Mapping[str, Mapping[str, str]] = _View(lambda job, r: (r.name, r.paper_values))
REPORT_TITLES: Mapping[str, str] = _View(lambda job, r: (r.name, r.title))
# The report a sweep's results feed (a job type may also declare one its ratings feed).
JOB_REPORTS: Mapping[str, str] = _View(lambda job, r: (job, r.name) if r.reads == "trials" else None)
RATING_REPORTS: Mapping[str, str] = _View(lambda job, r: (job, r.name) if r.reads == "ratings" else None)
# Reports whose measurements are the host CPU's, each host CPU's trials judged apart (``in`` only).
HOST_BOUND: Mapping[str, bool] = _View(lambda job, r: (r.name, True) if r.host_bound else None)

__all__ = [
    "FAILS",
    "HOLDS",
    "HOST_BOUND",
    "INCONCLUSIVE",
    "JOB_REPORTS",
    "PAPER_VALUES",
    "RATING_REPORTS",
    "REPORTS",
    "REPORT_TITLES",
    "Check",
    "Finding",
    "Report",
    "Row",
    "Stat",
    "Verdict",
    "applicable",
    "evaluate",
    "mean_ci",
    "rating_findings",
    "render_markdown",
]


def get_report(name: str) -> tuple[Check, ...]:
    try:
        return REPORTS[name]
    except KeyError:
        raise KeyError(f"unknown findings report {name!r} (known: {', '.join(sorted(REPORTS))})") from None


def applicable(
    report: str, rows: Iterable[Mapping[str, Any]], params: Iterable[Mapping[str, Any]] | None = None
) -> list[Check]:
    """The checks of ``report`` that apply (see ``Check.applies``). ``params`` (the resolved
    parameters of every trial, e.g. all of a sweep's, finished or not) defaults to the rows'."""
    from qoelab.findings.base import normalise

    given = list(params) if params is not None else [r["params"] for r in normalise(rows)]
    return [c for c in get_report(report) if c.applies(given) is None]


def evaluate(
    report: str, rows: Iterable[Mapping[str, Any]], params: Iterable[Mapping[str, Any]] | None = None
) -> list[Finding]:
    """Every applicable check of ``report`` over the rows: one Finding per check and scope. A row
    may name its host's CPU (``{"host": {"cpu": ...}}``); a ``HOST_BOUND`` report judges each apart."""
    from qoelab.findings.base import normalise

    clean = normalise(rows, per_host=report in HOST_BOUND)
    return [f for check in applicable(report, clean, params) for f in check.evaluate(clean)]


NOT_RUN = "not run"


def rating_findings(report: str, rows: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Every check of a ratings report (``Report.reads == "ratings"``) over a campaign's rows, one
    dict per check and scope; a check that cannot run says *not run* and why (no ratings yet, or
    the campaign's conditions are not the figure's)."""
    from qoelab.findings.base import normalise

    clean = normalise(rows)
    params = [r["params"] for r in clean]
    paper = PAPER_VALUES[report]
    out: list[dict[str, Any]] = []
    for check in get_report(report):
        head = {"name": check.name, "title": check.title, "claim": check.claim, "figure": check.figure,
                "paper_value": paper.get(check.name, "")}  # fmt: skip
        why = "needs ratings: no main-phase rating yet" if not clean else check.applies(params)
        if why is not None:
            out.append({**head, "verdict": NOT_RUN, "reason": why, "scope": "", "n": 0, "lab_value": None})
            continue
        for f in check.evaluate(clean):
            rows_ = [r.to_json() for r in f.rows]
            out.append({**head, "verdict": f.verdict, "reason": f.reason, "scope": f.scope_label,
                        "n": f.trials, "lab_value": f.lab, "rows": rows_})  # fmt: skip
    return out
