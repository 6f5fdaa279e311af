"""A sweep's results as the worker library's findings checks read them (qoelab.findings).

The checks get one row per succeeded trial, ``{"params": Trial.resolved, "summary": {name: value},
"host": {"cpu": model, "bogomips": ...}}`` (the SummaryValue rows; the CPU where the job type
records it), and decide whether the thesis' findings hold; applicability is judged on every
trial's resolved parameters, so a sweep still running already shows which checks it feeds.
See docs/findings.md.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from typing import Any

from experiments.choices import TrialStatus
from experiments.models import Sweep, Trial
from qoelab import findings
from results.models import SummaryValue


def report_for(job_type: str) -> str | None:
    """The findings report that reads results of this job type (None: no thesis findings)."""
    return findings.JOB_REPORTS.get(job_type)


def trial_rows(sweeps: Iterable[Sweep]) -> list[dict[str, Any]]:
    """Succeeded trials of the sweeps: id, sweep, resolved params and summary values."""
    ids = [s.pk for s in sweeps]
    trials = list(
        Trial.objects.filter(sweep_id__in=ids, status=TrialStatus.SUCCEEDED)
        .order_by("sweep_id", "index")
        .values("id", "sweep_id", "resolved", "provenance__host_cpu__model", "provenance__host_cpu__bogomips")
    )
    summary: dict[int, dict[str, float]] = defaultdict(dict)
    for tid, name, value in SummaryValue.objects.filter(trial_id__in=[t["id"] for t in trials]).values_list(
        "trial_id", "name", "value"
    ):
        summary[tid][name] = value
    # The CPU that ran the trial, where its job type records one (``host_cpu``): a host-bound report
    # (qoelab.findings.HOST_BOUND) judges each machine's trials apart (model and clock).
    return [
        {"id": t["id"], "sweep": t["sweep_id"], "params": t["resolved"], "summary": summary[t["id"]],
         "host": {"cpu": t["provenance__host_cpu__model"], "bogomips": t["provenance__host_cpu__bogomips"]}}
        for t in trials
    ]  # fmt: skip


def sweep_findings(sweep: Sweep, with_trials: bool = False) -> dict[str, Any]:
    """The applicable checks of the sweep's report, evaluated: ``findings`` is empty when the job
    type has no report or no check applies."""
    report = report_for(sweep.job_type)
    out: dict[str, Any] = {"sweep": sweep.pk, "job_type": sweep.job_type, "report": report}
    if report is None:
        return {**out, "title": None, "succeeded_trials": 0, "counts": {}, "findings": [],
                **({"trials": []} if with_trials else {})}  # fmt: skip
    rows = trial_rows([sweep])
    params = list(sweep.trials.values_list("resolved", flat=True))
    found = findings.evaluate(report, rows, params)
    return {
        **out,
        "title": findings.REPORT_TITLES.get(report, report),
        "succeeded_trials": len(rows),
        "counts": {
            v: sum(f.verdict == v for f in found)
            for v in (findings.HOLDS, findings.FAILS, findings.INCONCLUSIVE)
        },  # fmt: skip
        "findings": [f.to_json() for f in found],
        **({"trials": rows} if with_trials else {}),
    }
