"""The thesis' findings checked by code: named checks over a finished sweep's results.

``evaluate("ch4", rows)`` runs every check of a report that applies to the rows (plain dicts
``{"params": resolved SI values, "summary": {metric: value}}`` of succeeded trials) and returns one
:class:`Finding` per check and scope. ``REPORTS`` maps a report name to its checks, ``JOB_REPORTS``
a job type to the report that reads its results. See docs/findings.md.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from qoelab.findings import ch2, ch3, ch4, sb001, tc002
from qoelab.findings.base import FAILS, HOLDS, INCONCLUSIVE, Check, Finding, Row, Stat, Verdict, mean_ci
from qoelab.findings.markdown import render_markdown

REPORTS: dict[str, tuple[Check, ...]] = {
    "ch2": ch2.CHECKS,
    "ch3": ch3.CHECKS,
    "ch4": ch4.CHECKS,
    "tc002": tc002.CHECKS,
    "sb001": sb001.CHECKS,
}
# Per report, each check's paper value: the paper's own number or statement (findings tables).
PAPER_VALUES: dict[str, dict[str, str]] = {
    "ch2": ch2.PAPER_VALUES,
    "ch3": ch3.PAPER_VALUES,
    "ch4": ch4.PAPER_VALUES,
    "tc002": tc002.PAPER_VALUES,
    "sb001": sb001.PAPER_VALUES,
}
REPORT_TITLES: dict[str, str] = {
    "ch2": "Thesis chapter 2 (§2.6): BDL-APT, parallel IP-SAN sessions tuned by APT",
    "ch3": "Thesis chapter 3 (§3.5-3.6): VOSE, offload engines emulated in software",
    "ch4": "Thesis chapter 4 (§4.6): remote-desktop protocols compared",
    "tc002": "Paper 002 (§3-§6): thin-client traffic over a shared bottleneck, on Linux TCP",
    "sb001": "Thesis 001 (Ch. 4–6): NFS, iSCSI and Swift behind an emulated WAN",
}
JOB_REPORTS: dict[str, str] = {
    "rd_qoe": "ch4",
    "storage_apt": "ch2",
    "vose": "ch3",
    "thinclient_tcp": "tc002",
    "storage_bench": "sb001",
}
# Reports whose measurements are the host CPU's: the storage client is a QEMU guest, under TCG as
# fast as the machine emulating it (two machines ran the same rounds 1.7-2.1 times apart,
# docs/storage-bench.md), so each host CPU's trials are judged apart rather than pooled.
HOST_BOUND: frozenset[str] = frozenset({"sb001"})

__all__ = [
    "FAILS",
    "HOLDS",
    "HOST_BOUND",
    "INCONCLUSIVE",
    "JOB_REPORTS",
    "PAPER_VALUES",
    "REPORTS",
    "REPORT_TITLES",
    "Check",
    "Finding",
    "Row",
    "Stat",
    "Verdict",
    "applicable",
    "evaluate",
    "mean_ci",
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
