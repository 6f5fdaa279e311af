"""The Reproduce page: the papers' experiments as presets, their size and duration, one-click start.

Every job type declares its presets (``qoelab.presets``) and how long its trials take here
(``JobType.estimate``, from this lab's past succeeded trials of that type, which this module reads
as ``qoelab.estimate.PastRun`` rows). A rating campaign's duration is per evaluator, from the time
between this lab's past rating submissions.
"""

from __future__ import annotations

import functools
import statistics
from collections import defaultdict
from typing import Any

from experiments import jobtypes
from experiments import services as experiments_services
from experiments.choices import TrialStatus
from experiments.models import Sweep, Trial
from qoelab import presets
from qoelab.estimate import PastRun, median_wall_time
from qoelab.jobtype import resolve
from qoelab.params import validate_params
from results.models import SummaryValue

DEFAULT_CONDITION_S = 90.0  # DCR: the reference, 5 screens through the desktop, the scores
CONTROL_CONDITIONS = 4  # two training anchors, a gold trap and a consistency repeat
MAX_PAST_TRIALS = 3000
MAX_RATING_GAP_S = 1800.0  # a longer gap between two submissions is a break, not a condition


def past_runs(job_type: str) -> list[PastRun]:
    """This lab's most recent succeeded trials of ``job_type`` with the summary values its estimate
    declares (``JobType.estimate.metrics``)."""
    job = jobtypes.get_job(job_type)
    metrics = job.estimate.metrics if job and job.estimate else ()
    rows = list(
        Trial.objects.filter(sweep__job_type=job_type, status=TrialStatus.SUCCEEDED,
                             started_at__isnull=False, finished_at__isnull=False)
        .order_by("-finished_at").values("id", "resolved", "started_at", "finished_at")[:MAX_PAST_TRIALS]
    )  # fmt: skip
    values: dict[int, dict[str, float]] = defaultdict(dict)
    if metrics:
        for s in SummaryValue.objects.filter(trial_id__in=[r["id"] for r in rows], name__in=metrics).values(
            "trial_id", "name", "value"
        ):
            values[s["trial_id"]][s["name"]] = s["value"]
    return [
        PastRun(
            r["resolved"] or {}, values.get(r["id"], {}), (r["finished_at"] - r["started_at"]).total_seconds()
        )
        for r in rows
    ]


def worker_slots(job_type: str) -> tuple[int, bool]:
    """Trial slots of live workers able to run the job type (1 when none is live: said on the page)."""
    job = jobtypes.get_job(job_type)
    hosts = experiments_services.live_hosts_for(job) if job else []
    slots = sum(h.concurrency for h in hosts)
    return (slots, True) if slots else (1, False)


def seconds_per_condition() -> tuple[float, int]:
    """Median time between an evaluator's consecutive rating submissions here, and how many gaps."""
    from ratings.models import Rating

    times: dict[int, list[Any]] = defaultdict(list)
    for evaluator, condition, created in Rating.objects.order_by("created").values_list(
        "evaluator_id", "condition_id", "created"
    ):
        times[evaluator].append((condition, created))
    gaps = []
    for seq in times.values():
        firsts: dict[int, Any] = {}
        for cond, t in seq:
            firsts.setdefault(cond, t)
        ordered = sorted(firsts.values())
        gaps += [(b - a).total_seconds() for a, b in zip(ordered, ordered[1:], strict=False)]
    gaps = [g for g in gaps if 0 < g <= MAX_RATING_GAP_S]
    return (statistics.median(gaps), len(gaps)) if gaps else (DEFAULT_CONDITION_S, 0)


def _points(preset: presets.Preset, size: presets.Size) -> list[dict[str, Any]]:
    job = jobtypes.get_job(preset.job_type)
    assert job is not None
    return [
        validate_params(job.params, point).model_dump(mode="json") for point in preset.unique_points(size)
    ]


def plan(preset: presets.Preset, size: presets.Size, past: list[PastRun] | None = None) -> dict[str, Any]:
    """Trials (or conditions), the estimated wall time and what the estimate rests on. ``past``:
    this lab's runs of the preset's job type (read here when not given)."""
    if preset.kind == "campaign":
        per, n_gaps = seconds_per_condition()
        n = preset.trial_count(size) + CONTROL_CONDITIONS
        return {
            "size": size,
            "units": n,
            "unit": "conditions",
            "seconds": n * per,
            "per_evaluator": True,
            "basis": f"{per:.0f} s per condition, the median of {n_gaps} gaps between rating submissions here"
            if n_gaps
            else f"{per:.0f} s per condition (a default: no ratings recorded here yet)",
        }
    slots, live = worker_slots(preset.job_type)
    slot_text = f"{slots} live worker slot(s)" if live else "one slot (no worker is live now)"
    job = jobtypes.get_job(preset.job_type)
    estimate = resolve(job.estimate.ref) if job and job.estimate else median_wall_time
    past = past_runs(preset.job_type) if past is None else past
    total, basis = estimate(_points(preset, size), preset.repetitions[size], past)
    return {"size": size, "units": preset.trial_count(size), "unit": "trials", "seconds": total / slots,
            "per_evaluator": False, "basis": f"{basis}; {slot_text}"}  # fmt: skip


CAMPAIGN_MODES = ("live", "recorded")


def start(preset: presets.Preset, size: presets.Size, user: Any, mode: str = "live") -> tuple[str, Any]:
    """Create the sweep or the rating campaign; return (``"sweep"`` | ``"campaign"``, the new object).

    A campaign is ``live`` (the thesis' way: the evaluators operate the desktops) or ``recorded``: a
    sweep first records one session per condition, and the campaign is made from that sweep (it
    opens once the recordings exist). Both are made in one transaction or not at all.
    """
    if preset.kind == "sweep":
        sweep: Sweep = experiments_services.create_sweep(preset.sweep_spec(size), user)
        return "sweep", sweep
    from django.db import transaction

    from ratings.campaigns import create_campaign
    from ratings.choices import CampaignMode

    if mode not in CAMPAIGN_MODES:
        raise ValueError(f"mode must be one of {', '.join(CAMPAIGN_MODES)}, got {mode!r}")
    name = f"Thesis {preset.figure}: {preset.title} ({size}{', recorded' if mode == 'recorded' else ''})"
    if mode == "live":
        campaign = create_campaign(user, name=name, description=preset.description,
                                   mode=CampaignMode.LIVE, conditions=preset.conditions(size))  # fmt: skip
        return "campaign", campaign
    with transaction.atomic():
        recording = experiments_services.create_sweep(preset.recording_sweep_spec(size), user)
        campaign = create_campaign(user, name=name, description=preset.description,
                                   mode=CampaignMode.RECORDED, sweep=recording)  # fmt: skip
    return "campaign", campaign


def chapters() -> list[dict[str, Any]]:
    """Every chapter's presets, each with a plan per size, for the page."""
    past: dict[str, list[PastRun]] = {}
    for chapter in presets.chapters():
        for p in chapter.presets:
            if p.kind == "sweep" and p.job_type not in past:
                past[p.job_type] = past_runs(p.job_type)
    return [
        {
            "report": chapter.report,
            "heading": chapter.heading,
            "note": chapter.note,
            "rows": [
                {"preset": p, "plans": [plan(p, size, past.get(p.job_type)) for size in presets.SIZES]}  # type: ignore[arg-type]
                for p in chapter.presets
            ],
        }
        for chapter in presets.chapters()
    ]


def committed_verdicts() -> dict[str, Any]:
    """The lab's verdicts on its committed result files (``qoelab report all --from-committed``),
    computed once per set of file versions: the files change only with a new checkout."""
    from qoelab.errors import QoelabError
    from qoelab.findings import committed

    paths = [committed.REPO / s.path for fam in committed.COMMITTED.values() for s in fam.sources]
    try:
        stamp = tuple((str(p), p.stat().st_mtime_ns) for p in paths)
    except OSError:
        return {"error": "the committed result files are not part of this installation", "families": {}}
    try:
        return _committed_verdicts(stamp)
    except QoelabError as err:
        return {"error": str(err), "families": {}}


@functools.lru_cache(maxsize=2)
def _committed_verdicts(stamp: tuple[tuple[str, int], ...]) -> dict[str, Any]:
    from qoelab.findings import committed

    report = committed.committed_report()
    shares = committed.decisive_share(report)
    for name, fam in report["families"].items():
        fam["decided"], fam["total"] = shares[name]
    return report
