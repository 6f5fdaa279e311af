"""Sweep creation, cancellation and progress; the worker-side trial moves (claim, lost trials).

These are plain functions: the REST views, management commands and tests call them directly.
``create_sweep`` validates the whole spec before it writes anything, so a bad spec leaves no
half-created sweep behind (the checks are in ``sweep_spec``).
"""

from __future__ import annotations

import contextlib
import logging
import math
import random
import subprocess
from collections.abc import Iterable
from datetime import timedelta
from functools import cache
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.core.cache import cache as shared_cache
from django.db import transaction
from django.db.models import Avg, Count, DurationField, ExpressionWrapper, F, Q
from django.utils import timezone

from experiments import jobtypes
from experiments.choices import TERMINAL, SweepOrder, TrialStatus
from experiments.models import Experiment, IllegalTransition, Sweep, Trial

# MAX_REPETITIONS and SpecError are re-exported: the API and the dashboard use them from here.
from experiments.sweep_spec import MAX_REPETITIONS as MAX_REPETITIONS
from experiments.sweep_spec import SpecError as SpecError
from experiments.sweep_spec import check_structure, check_values, offered_algorithms
from experiments.wakeup import wake_scheduler
from hosts.models import WorkerHost
from qoelab.emulation.tcp import CC_CAPABILITY_PREFIX

if TYPE_CHECKING:
    from qoelab.jobtype import JobType

log = logging.getLogger("qoelab.experiments")


class Conflict(Exception):
    """The trial is not in a state that allows the request (HTTP 409)."""


def create_sweep(spec: Any, user: Any) -> Sweep:
    """Validate ``spec`` completely, then create the experiment (if new), sweep and all trials.

    Raises SpecError (nothing written) when anything is wrong.
    """
    s = check_structure(spec, user)
    points = check_values(s)

    order: list[tuple[int, dict[str, Any], dict[str, Any], list[str]]] = [
        (rep, *point) for rep in range(s.repetitions) for point in points
    ]
    if s.order == SweepOrder.RANDOM:
        random.Random(s.seed).shuffle(order)

    with transaction.atomic():
        experiment = s.experiment
        if experiment is None:
            assert s.new_experiment is not None
            experiment, _ = Experiment.objects.get_or_create(
                owner=user,
                name=s.new_experiment["name"],
                defaults={"description": s.new_experiment["description"], "job_type": s.job.name},
            )
            if experiment.job_type != s.job.name:
                raise SpecError(
                    [{"field": "job_type", "message": f"experiment runs job type {experiment.job_type!r}"}]
                )
        name = s.name or f"sweep {experiment.sweeps.count() + 1}"
        sweep = Sweep.objects.create(
            experiment=experiment,
            name=name,
            job_type=s.job.name,
            grid=s.grid,
            grid_order=list(s.grid),
            fixed=s.fixed,
            repetitions=s.repetitions,
            order=s.order,
            seed=s.seed,
            trial_count=len(order),
            created_by=user,
        )
        Trial.objects.bulk_create(
            [
                Trial(
                    sweep=sweep,
                    index=i,
                    params=params,
                    resolved=resolved,
                    requires=requires,
                    repetition=rep,
                    max_attempts=s.job.max_attempts,
                )
                for i, (rep, params, resolved, requires) in enumerate(order)
            ],
            batch_size=2000,
        )
        wake_scheduler()
    log.info("sweep %s created: %s trials of %s by %s", sweep.pk, len(order), s.job.name, user)
    return sweep


def cancel_sweep(sweep: Sweep) -> int:
    """Stop the sweep: pending and queued trials become cancelled; running ones finish.

    Queued trials may still have a Celery message in Redis; the worker's claim then answers 409
    and the task exits without running. Returns the number of trials cancelled.
    """
    now = timezone.now()
    with transaction.atomic():
        Sweep.objects.filter(pk=sweep.pk, cancelled_at__isnull=True).update(cancelled_at=now)
        # One conditional UPDATE, the bulk form of Trial.mark_cancelled().
        n = Trial.objects.filter(sweep=sweep, status__in=[TrialStatus.PENDING, TrialStatus.QUEUED]).update(
            status=TrialStatus.CANCELLED, finished_at=now
        )
        forget_progress(sweep.pk)
    sweep.refresh_from_db()
    log.info("sweep %s cancelled: %s trials stopped", sweep.pk, n)
    return n


def live_hosts_for(job: JobType, hosts: list[WorkerHost] | None = None) -> list[WorkerHost]:
    """Live, enabled hosts that report every capability the job type requires."""
    if hosts is None:
        hosts = list(WorkerHost.objects.alive().filter(enabled=True))
    return [h for h in hosts if job.requires <= h.capability_set()]


def blocked_reason(
    job_type: str, trial_requires: list[list[str]] | None = None, hosts: list[WorkerHost] | None = None
) -> str | None:
    """Why pending trials cannot be dispatched now, or None if some host can run some of them.

    ``trial_requires``: the distinct ``Trial.requires`` of the pending trials (e.g. an rd_qoe sweep
    whose X2Go trials need X2Go tools); without it, the job type's own requirements. ``hosts``: the
    live, enabled hosts if the caller has read them already.
    """
    job = jobtypes.get_job(job_type)
    if job is None:
        return f"job type {job_type!r} is not registered in this backend (known: {jobtypes.known_names()})"
    if hosts is None:
        hosts = list(WorkerHost.objects.alive().filter(enabled=True))
    if not hosts:
        return f"no live worker (none sent a heartbeat in the last {settings.QOELAB_HEARTBEAT_TIMEOUT} s)"
    needs = [job.requires | frozenset(r) for r in (trial_requires or [[]])]
    for need in needs:
        lacking = {h.name: sorted(need - h.capability_set()) for h in hosts}
        if not all(lacking.values()):
            return None
    lacking = {h.name: sorted(needs[0] - h.capability_set()) for h in hosts}
    missing = sorted(set().union(*lacking.values()))
    algorithms = [m.removeprefix(CC_CAPABILITY_PREFIX) for m in missing if m.startswith(CC_CAPABILITY_PREFIX)]
    if algorithms:
        return (
            f"no live worker's kernel offers TCP congestion control {', '.join(map(repr, algorithms))} "
            f"(they offer {', '.join(sorted(offered_algorithms(hosts))) or 'none'})"
        )
    detail = "; ".join(f"{name} lacks {', '.join(caps)}" for name, caps in lacking.items())
    return f"no live worker has capability {', '.join(missing)} ({detail})"


def progress(sweep: Sweep) -> dict[str, Any]:
    """Counts by status, done/total, ETA from the mean duration of finished trials.

    Every open sweep page polls this: the counts and the mean come from one aggregate query, and
    the hosts are read (once) only when pending trials need a reason or the ETA needs the slots.
    """
    return progress_many([sweep])[sweep.pk]


# Read once: the enum's ``values`` property builds a new list at each call (100 per listed page).
_STATUSES: tuple[str, ...] = tuple(TrialStatus.values)


def progress_many(sweeps: Iterable[Sweep]) -> dict[int, dict[str, Any]]:
    """``progress`` of each sweep, in a number of queries that does not grow with their number
    (the sweep list showed 100 sweeps with 100+ queries, issue 33): one aggregate grouped by sweep,
    one read of the pending trials' requirements, and the hosts at most once."""
    sweeps = list(sweeps)
    if not sweeps:
        return {}
    timed = Q(status=TrialStatus.SUCCEEDED, started_at__isnull=False, finished_at__isnull=False)
    rows = (
        Trial.objects.filter(sweep_id__in=[s.pk for s in sweeps])
        .order_by()
        .values("sweep_id")
        .annotate(
            **{f"n_{s}": Count("id", filter=Q(status=s)) for s in _STATUSES},
            mean=Avg(
                ExpressionWrapper(F("finished_at") - F("started_at"), output_field=DurationField()),
                filter=timed,
            ),
        )
    )
    aggs = {r["sweep_id"]: r for r in rows}
    empty = {**{f"n_{s}": 0 for s in _STATUSES}, "mean": None}
    pending_ids = [
        s.pk for s in sweeps if aggs.get(s.pk, empty)[f"n_{TrialStatus.PENDING}"] and not s.is_cancelled
    ]
    requires: dict[int, set[tuple[str, ...]]] = {}
    if pending_ids:
        for sweep_id, req in (
            Trial.objects.filter(sweep_id__in=pending_ids, status=TrialStatus.PENDING)
            .order_by()
            .values_list("sweep_id", "requires")
            .distinct()
        ):
            requires.setdefault(sweep_id, set()).add(tuple(req or ()))
    hosts: list[WorkerHost] | None = None
    out = {}
    for sweep in sweeps:
        agg = aggs.get(sweep.pk, empty)
        counts = {s: agg[f"n_{s}"] for s in _STATUSES}
        total = sum(counts.values())
        done = sum(counts[s] for s in TERMINAL)
        remaining = total - done
        mean_s = agg["mean"].total_seconds() if agg["mean"] is not None else None
        job = jobtypes.get_job(sweep.job_type)
        pending = sweep.pk in requires
        want_eta = mean_s is not None and remaining and job is not None
        if hosts is None and (pending or want_eta):
            hosts = list(WorkerHost.objects.alive().filter(enabled=True))
        blocked = None
        if pending:
            blocked = blocked_reason(sweep.job_type, [list(r) for r in sorted(requires[sweep.pk])], hosts)
        eta_s = None
        if want_eta:
            slots = sum(h.concurrency for h in live_hosts_for(job, hosts or [])) or 1
            eta_s = mean_s * math.ceil(remaining / slots)
        out[sweep.pk] = {
            "total": total,
            "done": done,
            "counts": counts,
            "failed": counts[TrialStatus.FAILED],
            "running": counts[TrialStatus.RUNNING],
            "fraction": done / total if total else 1.0,
            "mean_trial_s": mean_s,
            "eta_s": eta_s,
            "blocked": blocked,
            "cancelled": sweep.is_cancelled,
        }
    return out


def _progress_key(sweep_pk: int) -> str:
    return f"sweep-progress:{sweep_pk}"


def forget_progress(sweep_pk: int) -> None:
    """Drop the shared progress answer once a re-run or a cancel commits. Issue 33: a re-run within
    the cache's second of a page load got the cached "finished" on the new page, whose script then
    hid Cancel and stopped updating while the trials ran."""
    transaction.on_commit(lambda: shared_cache.delete(_progress_key(sweep_pk)))


def progress_for_polling(sweep: Sweep) -> dict[str, Any]:
    """``progress`` through the shared cache for ``QOELAB_PROGRESS_CACHE_S`` seconds.

    Two hundred pages polling one sweep then cost one computation per interval between them; the
    answer is at most that old. The sweep detail (``progress`` in its body) is always computed.
    """
    ttl = settings.QOELAB_PROGRESS_CACHE_S
    if ttl <= 0:
        return progress(sweep)
    key = _progress_key(sweep.pk)
    value = shared_cache.get(key)
    if value is None:
        value = progress(sweep)
        shared_cache.set(key, value, ttl)
    return value


# --- the worker side: claim and lost trials (finish is results.finish) ------------------------


@cache
def backend_revision() -> str:
    """Code revision of this backend: QOELAB_CODE_REVISION, else ``git describe`` of the checkout."""
    if settings.QOELAB_CODE_REVISION:
        return settings.QOELAB_CODE_REVISION
    try:
        out = subprocess.run(
            ["git", "-C", str(settings.REPO_DIR), "describe", "--always", "--dirty", "--abbrev=12"],
            capture_output=True,
            text=True,
            timeout=5,
            check=True,
        )
        return out.stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def claim(trial_id: int, host: WorkerHost) -> Trial:
    """queued-for-this-host -> running, as one conditional UPDATE. Conflict if anything else."""
    trial = Trial.objects.select_related("sweep").filter(pk=trial_id).first()
    if trial is None:
        raise Trial.DoesNotExist(f"no trial {trial_id}")
    provenance = {
        "host": {
            "name": host.name,
            "kernel": host.kernel,
            "capabilities": host.capabilities,
            "versions": host.versions,
        },
        "backend_revision": backend_revision(),
    }
    if not host.enabled:
        with contextlib.suppress(IllegalTransition):
            trial.back_to_pending(
                f"host {host.name} is disabled", expect={TrialStatus.QUEUED}, host_id=host.pk
            )
        raise Conflict(f"host {host.name} is disabled; trial {trial_id} goes to another host")
    try:
        trial.mark_running(host, provenance=provenance)
    except IllegalTransition as exc:
        where = f" on host {trial.host_name}" if trial.host_name and trial.host_name != host.name else ""
        raise Conflict(
            f"trial {trial_id} is not queued for host {host.name} (it is {exc.current}{where})"
        ) from None
    log.info("trial %s claimed by %s (attempt %s)", trial.pk, host.name, trial.attempts)
    return trial


def requeue_lost(host: WorkerHost, running: list[int]) -> list[int]:
    """Trials this host runs but no longer reports go back to pending (or fail when out of attempts).

    A trial marked running on this host for longer than the heartbeat timeout that the worker does
    not list in ``running`` was lost (the worker restarted mid-trial). Returns their ids.
    """
    now = timezone.now()
    grace = now - timedelta(seconds=settings.QOELAB_HEARTBEAT_TIMEOUT)
    lost = Trial.objects.filter(host=host, status=TrialStatus.RUNNING, started_at__lt=grace).exclude(
        pk__in=running
    )
    out = []
    for trial in lost:
        reason = f"worker {host.name} no longer reports this trial as running (worker restarted?)"
        try:
            if trial.attempts < trial.max_attempts:
                trial.back_to_pending(reason, expect={TrialStatus.RUNNING}, host_id=host.pk)
            else:
                trial.mark_failed(reason, expect={TrialStatus.RUNNING}, host_id=host.pk)
        except IllegalTransition:
            continue  # it finished meanwhile
        log.warning("trial %s: %s", trial.pk, reason)
        out.append(trial.pk)
    return out


def tick(now: Any = None, send: Any = None) -> Any:
    """One scheduler pass (see experiments.scheduler); ``manage.py scheduler`` calls this in a loop."""
    from experiments.scheduler import tick as _tick

    return _tick(now=now, send=send)
