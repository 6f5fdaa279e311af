"""A sweep's ended trials as result rows: the one form the findings read from files (issue 32).

One row per succeeded or failed trial, ``{"sweep", "trial", "index", "repetition", "status",
"params": resolved (SI), "params_as_written", "summary": {name: value}, "host": {"cpu",
"bogomips", "name", "kernel"}, "provenance": {...}, "link": {...}}``, and ``"error"`` for a failed
one (the findings leave those out). ``qoelab sweep export`` writes them as JSON lines, and
``qoelab report FAMILY --from FILE`` judges them exactly as the sweep page does
(``results.findings.trial_rows`` builds the same ``params``/``summary``/``host``).
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from experiments.choices import TERMINAL, TrialStatus
from experiments.models import Sweep
from results.models import SummaryValue

EXPORTED = (TrialStatus.SUCCEEDED, TrialStatus.FAILED)
# Link verification keys worth keeping beside a row (the full record stays on the trial page).
LINK_KEYS = ("backend", "configured", "measured", "ok", "mode", "link")


def sweep_rows(sweep: Sweep) -> dict[str, Any]:
    """The sweep's ended trials as rows, and whether the sweep has finished (two queries)."""
    trials = list(
        sweep.trials.filter(status__in=EXPORTED)
        .order_by("index")
        .values(
            "id",
            "index",
            "repetition",
            "status",
            "params",
            "resolved",
            "host_name",
            "error",
            "provenance",
            "link",
            "started_at",
            "finished_at",
        )  # fmt: skip
    )
    summary: dict[int, dict[str, float]] = defaultdict(dict)
    values = SummaryValue.objects.filter(trial_id__in=[t["id"] for t in trials])
    for tid, name, value in values.values_list("trial_id", "name", "value"):
        summary[tid][name] = value
    open_trials = sweep.trials.exclude(status__in=TERMINAL).count()
    return {
        "sweep": sweep.pk,
        "job_type": sweep.job_type,
        "finished": open_trials == 0,
        "open_trials": open_trials,
        "rows": [_row(sweep.pk, t, summary[t["id"]]) for t in trials],
    }


def _row(sweep_id: int, t: dict[str, Any], summary: dict[str, float]) -> dict[str, Any]:
    prov = t["provenance"] or {}
    cpu = prov.get("host_cpu") or {}
    host = prov.get("host") or {}
    link = t["link"] or {}
    row: dict[str, Any] = {
        "sweep": sweep_id,
        "trial": t["id"],
        "index": t["index"],
        "repetition": t["repetition"],
        "status": t["status"],
        "params": t["resolved"],
        "params_as_written": t["params"],
        "summary": summary,
        "host": {
            "cpu": cpu.get("model"),
            "bogomips": cpu.get("bogomips"),
            "name": t["host_name"] or host.get("name"),
            "kernel": host.get("kernel"),
        },  # fmt: skip
        "provenance": prov,
        "link": {k: link[k] for k in LINK_KEYS if k in link},
        "started_at": t["started_at"].isoformat() if t["started_at"] else None,
        "finished_at": t["finished_at"].isoformat() if t["finished_at"] else None,
    }
    if t["status"] == TrialStatus.FAILED:
        row["error"] = t["error"] or "failed"
    return row
