"""The Reproduce page: the thesis' experiments as presets, their size and duration, one-click start.

Remote desktop (chapter 4): durations come from this lab's own finished ``rd_qoe`` trials: a trial
costs a fixed overhead per protocol and server mode (link set-up and verification, desktop and
session, teardown, upload: the median of duration − updates × (T + Q + P) over past trials) plus,
per page, the pauses Q + P and T: measured at that condition, or the T of the nearest past
condition (distance in log rate, delay and log loss) scaled by a simple model (``model_t_s``).
Before a protocol has run here, defaults measured on a 2-core host and the model stand in, and the
page says so. A rating campaign's duration is per evaluator, from the time between this lab's past
rating submissions. Storage APT (chapter 2): a trial is its steady window, APT's steps × delta and
a fixed overhead, the last two from this lab's past storage-APT trials.
"""

from __future__ import annotations

import functools
import math
import statistics
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from experiments import jobtypes
from experiments import services as experiments_services
from experiments.choices import TrialStatus
from experiments.models import Sweep, Trial
from qoelab import presets
from qoelab.params import validate_params
from results.models import SummaryValue

# Before a protocol has run here: its fixed cost per trial (set-up, link verification, teardown,
# upload) and its bytes per page change, both as measured on a 2-core host (docs/rd-benchmark.md).
DEFAULT_OVERHEAD_S = {"vnc": 15.0, "spice": 18.0, "x2go": 28.0}
DEFAULT_BYTES = {"vnc": 138e3, "spice": 150e3, "x2go": 100e3}
VM_EXTRA_S = 15.0  # a guest restored from its snapshot (docs/vm.md)
MSS = 1448
DEFAULT_CONDITION_S = 90.0  # DCR: the reference, 5 screens through the desktop, the scores
CONTROL_CONDITIONS = 4  # two training anchors, a gold trap and a consistency repeat
MAX_PAST_TRIALS = 3000
MAX_RATING_GAP_S = 1800.0  # a longer gap between two submissions is a break, not a condition


@dataclass(frozen=True)
class PastTrial:
    protocol: str
    server: str
    rate_bps: float
    delay_s: float
    loss_pct: float
    duration_s: float
    updates: float
    t_s: float
    wait_s: float  # Q + P per update

    @property
    def overhead_s(self) -> float:
        return max(0.0, self.duration_s - self.updates * (self.t_s + self.wait_s))


def _condition(params: dict[str, Any]) -> tuple[str, str, float, float, float]:
    return (
        str(params.get("protocol")),
        str(params.get("server") or "namespace"),
        float(params.get("rate") or 10e9),
        float(params.get("delay") or 0.0),
        float(params.get("loss") or 0.0),
    )


def past_trials() -> list[PastTrial]:
    """This lab's most recent succeeded ``rd_qoe`` trials with their T and update count."""
    rows = list(
        Trial.objects.filter(
            sweep__job_type="rd_qoe",
            status=TrialStatus.SUCCEEDED,
            started_at__isnull=False,
            finished_at__isnull=False,
        )
        .order_by("-finished_at")
        .values("id", "resolved", "started_at", "finished_at")[:MAX_PAST_TRIALS]
    )
    values: dict[int, dict[str, float]] = defaultdict(dict)
    for s in SummaryValue.objects.filter(trial_id__in=[r["id"] for r in rows], name__in=("T_ms", "n")).values(
        "trial_id", "name", "value"
    ):
        values[s["trial_id"]][s["name"]] = s["value"]
    out = []
    for r in rows:
        v, p = values.get(r["id"], {}), r["resolved"] or {}
        if "T_ms" not in v or "n" not in v:
            continue
        protocol, server, rate, delay, loss = _condition(p)
        out.append(
            PastTrial(
                protocol=protocol,
                server=server,
                rate_bps=rate,
                delay_s=delay,
                loss_pct=loss,
                duration_s=(r["finished_at"] - r["started_at"]).total_seconds(),
                updates=v["n"],
                t_s=v["T_ms"] / 1e3,
                wait_s=float(p.get("quiet") or 0.5) + float(p.get("pause") or 0.5),
            )
        )
    return out


def _distance(a: tuple[str, str, float, float, float], b: PastTrial) -> float:
    # One decade of rate ~ 50 ms of delay ~ one decade of loss: each moves T by a similar order.
    return (
        abs(math.log10(a[2] / b.rate_bps))
        + abs(a[3] - b.delay_s) / 0.05
        + abs(math.log10((1 + 100 * a[4]) / (1 + 100 * b.loss_pct)))
    )


def model_t_s(protocol: str, rate_bps: float, delay_s: float, loss_pct: float) -> float:
    """A rough T: a page's bytes at the link's rate, or at what TCP reaches under loss (Mathis et
    al.), plus three round trips (the click, the request, the last segment's ACK). Used to carry a
    measured T over to a nearby condition, and alone before anything was measured."""
    rtt = max(2 * delay_s, 1e-4)
    p = loss_pct / 100
    tcp = rate_bps if p <= 0 else min(rate_bps, 8 * MSS / rtt * math.sqrt(1.5 / p))
    return 8 * DEFAULT_BYTES.get(protocol, 140e3) / tcp + 3 * rtt


def estimate_trial(resolved: dict[str, Any], past: list[PastTrial]) -> tuple[float, str]:
    """Seconds one trial at ``resolved`` (SI params) takes here, and the basis: measured/nearest/default."""
    cond = _condition(resolved)
    protocol, server = cond[:2]
    pages = int(resolved.get("pages") or 5)
    wait = float(resolved.get("quiet") or 0.5) + float(resolved.get("pause") or 0.5)
    model = model_t_s(protocol, *cond[2:])
    same = [t for t in past if (t.protocol, t.server) == (protocol, server)]
    if not same:
        overhead = DEFAULT_OVERHEAD_S.get(protocol, 30.0) + (VM_EXTRA_S if server == "vm" else 0.0)
        return overhead + pages * (model + wait), "default"
    overhead = statistics.median(t.overhead_s for t in same)
    nearest = min(same, key=lambda t: _distance(cond, t))
    if _distance(cond, nearest) < 1e-6:
        return overhead + pages * (nearest.t_s + wait), "measured"
    scaled = nearest.t_s * model / model_t_s(protocol, nearest.rate_bps, nearest.delay_s, nearest.loss_pct)
    return overhead + pages * (scaled + wait), "nearest"


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


# ---- storage APT --------------------------------------------------------------------------------

# Before a storage-APT trial has run here: its fixed cost (link, verification, target, sessions,
# teardown) and APT's steps to converge, as measured on a 2-core host (docs/storage-apt.md).
DEFAULT_APT_OVERHEAD_S = 6.0
DEFAULT_APT_STEPS = 8.0


def apt_costs() -> tuple[float, float, int]:
    """(overhead s per trial, APT's mean steps, trials they rest on) from this lab's storage-APT
    trials: overhead = duration - steady window - warm-up - APT's steps x delta."""
    rows = list(
        Trial.objects.filter(sweep__job_type="storage_apt", status=TrialStatus.SUCCEEDED,
                             started_at__isnull=False, finished_at__isnull=False)
        .order_by("-finished_at").values("id", "resolved", "started_at", "finished_at")[:MAX_PAST_TRIALS]
    )  # fmt: skip
    steps = dict(
        SummaryValue.objects.filter(trial_id__in=[r["id"] for r in rows], name="steps").values_list(
            "trial_id", "value"
        )
    )
    overheads = []
    for r in rows:
        p = r["resolved"] or {}
        busy = float(p.get("steady") or 0) + float(p.get("warmup") or 0)
        busy += steps.get(r["id"], 0.0) * float(p.get("delta") or 0)
        overheads.append((r["finished_at"] - r["started_at"]).total_seconds() - busy)
    if not overheads:
        return DEFAULT_APT_OVERHEAD_S, DEFAULT_APT_STEPS, 0
    mean_steps = statistics.fmean(steps.values()) if steps else DEFAULT_APT_STEPS
    return max(0.0, statistics.median(overheads)), mean_steps, len(overheads)


def estimate_apt_trial(resolved: dict[str, Any], overhead_s: float, steps: float) -> float:
    """APT searches for steps x delta; fixed and vanilla warm up instead. Then the steady window."""
    if resolved.get("mode") == "apt":
        before = steps * float(resolved.get("delta") or 5.0)
    else:
        before = float(resolved.get("warmup") or 0.0)
    return overhead_s + before + float(resolved.get("steady") or 30.0)


def _plan_apt(preset: presets.Preset, size: presets.Size) -> tuple[float, str]:
    overhead, steps, n = apt_costs()
    reps = preset.repetitions[size]
    total = sum(estimate_apt_trial(p, overhead, steps) * reps for p in _points(preset, size))
    if n:
        basis = f"{overhead:.0f} s per trial and {steps:.1f} APT steps, from {n} storage-APT trials here"
    else:
        basis = (
            f"{overhead:.0f} s per trial and {steps:.0f} APT steps (defaults: no storage-APT trial here yet)"
        )
    return total, basis


DEFAULT_STREAM_OVERHEAD_S = 5.0


def _plan_stream(preset: presets.Preset, size: presets.Size) -> tuple[float, str]:
    """Job types that run for a ``duration`` (vose, thinclient_tcp): that plus the median overhead of
    this lab's own trials of the type (calibration, namespaces, start-up), or a default before there
    is one."""
    rows = list(
        Trial.objects.filter(sweep__job_type=preset.job_type, status=TrialStatus.SUCCEEDED,
                             started_at__isnull=False, finished_at__isnull=False)
        .order_by("-finished_at").values("resolved", "started_at", "finished_at")[:MAX_PAST_TRIALS]
    )  # fmt: skip
    overheads = [
        (r["finished_at"] - r["started_at"]).total_seconds()
        - float((r["resolved"] or {}).get("duration") or 0)
        for r in rows
    ]
    overhead = max(0.0, statistics.median(overheads)) if overheads else DEFAULT_STREAM_OVERHEAD_S
    reps = preset.repetitions[size]
    total = sum((overhead + float(p.get("duration") or 10.0)) * reps for p in _points(preset, size))
    source = f"from {len(rows)} such trials here" if rows else "a default: no such trial here yet"
    return total, f"{overhead:.0f} s per trial besides its stream ({source})"


DEFAULT_STORAGE_TRIAL_S = 150.0  # a guest boot (~35 s under TCG), a target, a short family


def _plan_storage(preset: presets.Preset, size: presets.Size) -> tuple[float, str]:
    """storage_bench: the median wall time of this lab's own trials of the same family (a guest boot
    and a target dominate short runs), or a default before there is one."""
    rows = list(
        Trial.objects.filter(sweep__job_type=preset.job_type, status=TrialStatus.SUCCEEDED,
                             started_at__isnull=False, finished_at__isnull=False)
        .order_by("-finished_at").values("resolved", "started_at", "finished_at")[:MAX_PAST_TRIALS]
    )  # fmt: skip
    by_family: dict[str, list[float]] = defaultdict(list)
    for r in rows:
        by_family[(r["resolved"] or {}).get("family", "")].append(
            (r["finished_at"] - r["started_at"]).total_seconds()
        )
    reps = preset.repetitions[size]
    total = 0.0
    for point in _points(preset, size):
        past = by_family.get(str(point.get("family", "metadata")))
        total += (statistics.median(past) if past else DEFAULT_STORAGE_TRIAL_S) * reps
    source = f"from {len(rows)} such trials here" if rows else "a default: no such trial here yet"
    return total, f"the median trial of each family ({source}; {DEFAULT_STORAGE_TRIAL_S:.0f} s without one)"


def plan(preset: presets.Preset, size: presets.Size, past: list[PastTrial] | None = None) -> dict[str, Any]:
    """Trials (or conditions), the estimated wall time and what the estimate rests on."""
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
    if preset.job_type in ("storage_apt", "vose", "thinclient_tcp", "storage_bench"):
        planners = {"storage_apt": _plan_apt, "storage_bench": _plan_storage}
        planner = planners.get(preset.job_type, _plan_stream)
        total, basis = planner(preset, size)
        return {"size": size, "units": preset.trial_count(size), "unit": "trials", "seconds": total / slots,
                "per_evaluator": False, "basis": f"{basis}; {slot_text}"}  # fmt: skip
    past = past_trials() if past is None else past
    reps = preset.repetitions[size]
    counts: dict[str, int] = defaultdict(int)
    total = 0.0
    for point in _points(preset, size):
        seconds, basis = estimate_trial(point, past)
        total += seconds * reps
        counts[basis] += reps
    labels = {
        "measured": "at a condition measured here",
        "nearest": "from the nearest condition measured here",
        "default": "from defaults (no trial of their protocol measured here yet)",
    }
    parts = [f"{counts[b]} trials {label}" for b, label in labels.items() if counts[b]]
    return {
        "size": size,
        "units": preset.trial_count(size),
        "unit": "trials",
        "seconds": total / slots,
        "per_evaluator": False,
        "basis": f"{'; '.join(parts)}; {slot_text}; {len(past)} past trials",
    }


def start(preset: presets.Preset, size: presets.Size, user: Any) -> tuple[str, Any]:
    """Create the sweep or the rating campaign; return (``"sweep"`` | ``"campaign"``, the new object)."""
    if preset.kind == "sweep":
        sweep: Sweep = experiments_services.create_sweep(preset.sweep_spec(size), user)
        return "sweep", sweep
    from ratings.campaigns import create_campaign
    from ratings.choices import CampaignMode

    campaign = create_campaign(
        user,
        name=f"Thesis {preset.figure}: {preset.title} ({size})",
        description=preset.description,
        mode=CampaignMode.LIVE,  # the thesis' evaluators operated the desktops themselves
        conditions=preset.conditions(size),
    )
    return "campaign", campaign


def chapters() -> list[dict[str, Any]]:
    """Every chapter's presets, each with a plan per size, for the page."""
    past = past_trials()
    return [
        {
            "report": chapter.report,
            "heading": chapter.heading,
            "note": chapter.note,
            "rows": [
                {"preset": p, "plans": [plan(p, size, past) for size in presets.SIZES]}  # type: ignore[arg-type]
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
