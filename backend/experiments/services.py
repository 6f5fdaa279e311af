"""Sweep creation, cancellation and progress; the worker-side trial moves (claim, finish).

These are plain functions: the REST views, management commands and tests call them directly.
``create_sweep`` validates the whole spec before it writes anything, so a bad spec leaves no
half-created sweep behind; every error names the field (``grid.loss[1]``) and the bound.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import logging
import math
import random
import secrets
import subprocess
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.db import transaction
from django.db.models import Avg, Count, DurationField, ExpressionWrapper, F
from pydantic import BaseModel

from experiments import jobtypes
from experiments.choices import TERMINAL, SweepOrder, TrialStatus
from experiments.models import Experiment, IllegalTransition, Sweep, Trial
from experiments.wakeup import wake_scheduler
from hosts.models import WorkerHost
from qoelab.emulation.tcp import CC_CAPABILITY_PREFIX
from qoelab.params import ParamsInvalid, validate_params

if TYPE_CHECKING:
    from qoelab.jobs.base import JobType

log = logging.getLogger("qoelab.experiments")

MAX_REPETITIONS = 1000
MAX_ERRORS = 20  # a spec with thousands of bad values still gets a readable answer


class SpecError(Exception):
    """The sweep spec is invalid; ``errors`` is ``[{"field", "message"}]``."""

    def __init__(self, errors: list[dict[str, str]]) -> None:
        self.errors = errors[:MAX_ERRORS]
        super().__init__("; ".join(f"{e['field']}: {e['message']}" for e in self.errors))


class Conflict(Exception):
    """The trial is not in a state that allows the request (HTTP 409)."""


def _is_scalar(value: Any) -> bool:
    return value is None or isinstance(value, str | int | float | bool)


def _visible_experiments(user: Any):
    qs = Experiment.objects.all()
    return qs if user.is_staff else qs.filter(owner=user)


@dataclass
class _Spec:
    experiment: Experiment | None
    new_experiment: dict[str, str] | None
    job: JobType
    name: str
    grid: dict[str, list[Any]]
    fixed: dict[str, Any]
    repetitions: int
    order: str
    seed: int


def _check_structure(spec: Any, user: Any) -> _Spec:
    """Types, presence, job type, parameter names and the trial count. Raises SpecError."""
    if not isinstance(spec, dict):
        raise SpecError([{"field": "body", "message": "must be a JSON object (the sweep spec)"}])
    errors: list[dict[str, str]] = []

    def err(field: str, message: str) -> None:
        errors.append({"field": field, "message": message})

    known_keys = {"experiment", "job_type", "name", "grid", "fixed", "repetitions", "order", "seed"}
    for key in spec:
        if key not in known_keys:
            err(str(key), f"is not a sweep field (fields: {', '.join(sorted(known_keys))})")

    # Experiment: an id of one of the user's experiments, or {name, description} to find/create.
    experiment: Experiment | None = None
    new_experiment: dict[str, str] | None = None
    raw_exp = spec.get("experiment")
    if isinstance(raw_exp, bool) or raw_exp is None:
        err("experiment", "required: an experiment id or {name, description}")
    elif isinstance(raw_exp, int) or (isinstance(raw_exp, str) and raw_exp.isdigit()):
        experiment = _visible_experiments(user).filter(pk=int(raw_exp)).first()
        if experiment is None:
            err("experiment", f"no experiment with id {raw_exp} that you can use")
    elif isinstance(raw_exp, dict):
        name = raw_exp.get("name")
        desc = raw_exp.get("description", "")
        extra = set(raw_exp) - {"name", "description"}
        if extra:
            err(f"experiment.{sorted(extra)[0]}", "is not an experiment field (fields: name, description)")
        if not isinstance(name, str) or not name.strip():
            err("experiment.name", "required: a non-empty string")
        elif len(name) > 200:
            err("experiment.name", f"must be at most 200 characters, got {len(name)}")
        if not isinstance(desc, str):
            err("experiment.description", "must be a string")
        if isinstance(name, str) and name.strip() and isinstance(desc, str):
            experiment = Experiment.objects.filter(owner=user, name=name.strip()).first()
            if experiment is None:
                new_experiment = {"name": name.strip(), "description": desc}
    else:
        err("experiment", "must be an experiment id or {name, description}")

    # Job type: from the spec, else from an existing experiment.
    job: JobType | None = None
    raw_job = spec.get("job_type", experiment.job_type if experiment else None)
    if raw_job is None:
        err("job_type", f"required (known: {jobtypes.known_names()})")
    elif not isinstance(raw_job, str):
        err("job_type", "must be a string")
    else:
        job = jobtypes.get_job(raw_job)
        if job is None:
            err("job_type", f"unknown job type {raw_job!r} (known: {jobtypes.known_names()})")
        elif experiment is not None and experiment.job_type != raw_job:
            err(
                "job_type",
                f"experiment {experiment.name!r} runs job type {experiment.job_type!r}, not {raw_job!r}",
            )

    name = spec.get("name")
    if name is None:
        name = ""
    if not isinstance(name, str):
        err("name", "must be a string")
        name = ""
    elif len(name) > 200:
        err("name", f"must be at most 200 characters, got {len(name)}")

    grid = spec.get("grid")
    fixed = spec.get("fixed", {}) if spec.get("fixed") is not None else {}
    if not isinstance(grid, dict):
        err(
            "grid",
            "required: an object {parameter: [values]}"
            if grid is None
            else "must be an object {parameter: [values]}",
        )
        grid = {}
    elif not grid:
        err("grid", "is empty: list at least one parameter with at least one value")
    for key, values in grid.items():
        if not isinstance(values, list):
            err(f"grid.{key}", "must be a list of values")
        elif not values:
            err(f"grid.{key}", "is empty: list at least one value")
        else:
            for i, v in enumerate(values):
                if not _is_scalar(v):
                    err(f"grid.{key}[{i}]", "must be a single value (string or number)")
    if not isinstance(fixed, dict):
        err("fixed", "must be an object {parameter: value}")
        fixed = {}
    for key, v in fixed.items():
        if not _is_scalar(v):
            err(f"fixed.{key}", "must be a single value (string or number)")
        if key in grid:
            err(f"fixed.{key}", "is also in grid: a parameter is either swept or fixed")
    if job is not None:
        names = jobtypes.param_names(job)
        for where, keys in (("grid", grid), ("fixed", fixed)):
            for key in keys:
                if key not in names:
                    err(
                        f"{where}.{key}",
                        f"is not a parameter of job type {job.name!r} (parameters: {', '.join(names)})",
                    )

    repetitions = spec.get("repetitions", 1)
    if isinstance(repetitions, bool) or not isinstance(repetitions, int):
        err("repetitions", f"must be a whole number, got {repetitions!r}")
        repetitions = 1
    elif not 1 <= repetitions <= MAX_REPETITIONS:
        err("repetitions", f"must be between 1 and {MAX_REPETITIONS}, got {repetitions}")
        repetitions = 1

    order = spec.get("order", SweepOrder.GRID)
    if order not in SweepOrder.values:
        err("order", f"must be one of {', '.join(SweepOrder.values)}, got {order!r}")
        order = SweepOrder.GRID

    seed = spec.get("seed")
    if seed is None:
        seed = secrets.randbelow(2**31)
    elif isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2**63:
        err("seed", f"must be a whole number from 0 to 2^63-1, got {seed!r}")
        seed = 0

    # The count is a product of list lengths, computed before anything is expanded.
    lists = [v for v in grid.values() if isinstance(v, list) and v]
    if lists and len(lists) == len(grid):
        points = math.prod(len(v) for v in lists)
        count = points * repetitions
        limit = settings.QOELAB_MAX_TRIALS_PER_SWEEP
        if count > limit:
            sizes = " × ".join(str(len(v)) for v in lists)
            err(
                "grid",
                f"would create {count} trials ({sizes} = {points} grid points × {repetitions} "
                f"repetitions); at most {limit} trials per sweep (QOELAB_MAX_TRIALS_PER_SWEEP)",
            )

    if errors:
        raise SpecError(errors)
    assert job is not None
    return _Spec(experiment, new_experiment, job, name.strip(), grid, fixed, repetitions, order, seed)


def _map_field(field: str, swept: str | None, index: int, s: _Spec) -> str:
    """Name a pydantic error field after where the user wrote the value."""
    top = field.split(".")[0]
    if top == swept:
        return f"grid.{top}[{index}]"
    if top in s.grid:
        return f"grid.{top}[0]"
    if top in s.fixed:
        return f"fixed.{top}"
    return top


def _check_values(s: _Spec) -> list[tuple[dict[str, Any], dict[str, Any], list[str]]]:
    """Validate every value, then every grid point; return (params, resolved, requires) per point."""
    model: type[BaseModel] = s.job.params
    keys = list(s.grid)
    base = {**s.fixed, **{k: s.grid[k][0] for k in keys}}
    errors: list[dict[str, str]] = []
    seen: set[tuple[str, str]] = set()

    def add(field: str, message: str) -> None:
        if (field, message) not in seen:
            seen.add((field, message))
            errors.append({"field": field, "message": message})

    # One validation per written value (sum of list lengths, not their product) pins each error
    # on the value that caused it: grid.loss[1].
    probes: list[tuple[str | None, int, dict[str, Any]]] = [(None, 0, base)]
    probes += [(k, i, {**base, k: v}) for k in keys for i, v in enumerate(s.grid[k]) if i > 0]
    for swept, i, point in probes:
        try:
            validate_params(model, point)
        except ParamsInvalid as exc:
            for e in exc.errors:
                field = _map_field(e["field"], swept, i, s)
                msg = e["message"]
                if msg == "is required":
                    msg = f"is required by job type {s.job.name!r}: set it in fixed or grid"
                add(field, msg)
    if errors:
        raise SpecError(errors)

    # Every combination, for rules that span parameters (model validators) and the SI values.
    out = []
    merged: set[str] = set()
    for combo in itertools.product(*(s.grid[k] for k in keys)):
        point = dict(zip(keys, combo, strict=True))
        params = {**s.fixed, **point}
        try:
            valid = validate_params(model, params)
        except ParamsInvalid as exc:
            where = ", ".join(f"{k}={v!r}" for k, v in point.items())
            for e in exc.errors:
                add("grid", f"the point {where} is invalid: {e['field']}: {e['message']}")
            if len(errors) >= MAX_ERRORS:
                break
            continue
        resolved = valid.model_dump(mode="json")
        for name in s.job.inapplicable(valid) if s.job.inapplicable else ():
            params.pop(name, None)
            resolved.pop(name, None)
        key = json.dumps(resolved, sort_keys=True)
        if key in merged:
            continue  # the same trial as an earlier point once what does not apply is dropped
        merged.add(key)
        out.append((params, resolved, sorted(s.job.trial_requires(valid))))
    if errors:
        raise SpecError(errors)
    _check_tcp_offered(s, out)
    return out


def _offered_algorithms(hosts: list[WorkerHost]) -> set[str]:
    return {c.removeprefix(CC_CAPABILITY_PREFIX) for h in hosts for c in h.capability_set()
            if c.startswith(CC_CAPABILITY_PREFIX)}  # fmt: skip


def _check_tcp_offered(s: _Spec, points: list[tuple[dict[str, Any], dict[str, Any], list[str]]]) -> None:
    """Refuse a TCP algorithm that no worker's kernel offers, naming it.

    Only workers that have reported their capabilities (one heartbeat) count: with none yet (a lab
    just set up, a worker still starting) nothing is known, so the sweep waits and
    ``blocked_reason`` says for what.
    """
    wanted = {r.removeprefix(CC_CAPABILITY_PREFIX) for *_, req in points for r in req
              if r.startswith(CC_CAPABILITY_PREFIX)}  # fmt: skip
    hosts = list(WorkerHost.objects.filter(enabled=True, last_heartbeat__isnull=False))
    offered = _offered_algorithms(hosts)
    missing = sorted(wanted - offered)
    if hosts and missing:
        where = "grid.tcp_cc" if "tcp_cc" in s.grid else "fixed.tcp_cc" if "tcp_cc" in s.fixed else "tcp_cc"
        raise SpecError([{
            "field": where,
            "message": f"no worker's kernel offers TCP congestion control {', '.join(map(repr, missing))} "
            f"(the workers offer {', '.join(sorted(offered)) or 'none'})",
        }])  # fmt: skip


def create_sweep(spec: Any, user: Any) -> Sweep:
    """Validate ``spec`` completely, then create the experiment (if new), sweep and all trials.

    Raises SpecError (nothing written) when anything is wrong.
    """
    s = _check_structure(spec, user)
    points = _check_values(s)

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
    from django.utils import timezone

    now = timezone.now()
    with transaction.atomic():
        Sweep.objects.filter(pk=sweep.pk, cancelled_at__isnull=True).update(cancelled_at=now)
        # One conditional UPDATE, the bulk form of Trial.mark_cancelled().
        n = Trial.objects.filter(sweep=sweep, status__in=[TrialStatus.PENDING, TrialStatus.QUEUED]).update(
            status=TrialStatus.CANCELLED, finished_at=now
        )
    sweep.refresh_from_db()
    log.info("sweep %s cancelled: %s trials stopped", sweep.pk, n)
    return n


def live_hosts_for(job: JobType):
    """Live, enabled hosts that report every capability the job type requires."""
    return [h for h in WorkerHost.objects.alive().filter(enabled=True) if job.requires <= h.capability_set()]


def blocked_reason(job_type: str, trial_requires: list[list[str]] | None = None) -> str | None:
    """Why pending trials cannot be dispatched now, or None if some host can run some of them.

    ``trial_requires``: the distinct ``Trial.requires`` of the pending trials (e.g. an rd_qoe sweep
    whose X2Go trials need X2Go tools); without it, the job type's own requirements.
    """
    job = jobtypes.get_job(job_type)
    if job is None:
        return f"job type {job_type!r} is not registered in this backend (known: {jobtypes.known_names()})"
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
            f"(they offer {', '.join(sorted(_offered_algorithms(hosts))) or 'none'})"
        )
    detail = "; ".join(f"{name} lacks {', '.join(caps)}" for name, caps in lacking.items())
    return f"no live worker has capability {', '.join(missing)} ({detail})"


def progress(sweep: Sweep) -> dict[str, Any]:
    """Counts by status, done/total, ETA from the mean duration of finished trials."""
    counts = {s: 0 for s in TrialStatus.values}
    for row in sweep.trials.values("status").annotate(n=Count("id")):
        counts[row["status"]] = row["n"]
    total = sum(counts.values())
    done = sum(counts[s] for s in TERMINAL)
    remaining = total - done
    mean = (
        sweep.trials.filter(status=TrialStatus.SUCCEEDED, started_at__isnull=False, finished_at__isnull=False)
        .annotate(d=ExpressionWrapper(F("finished_at") - F("started_at"), output_field=DurationField()))
        .aggregate(m=Avg("d"))["m"]
    )
    mean_s = mean.total_seconds() if mean is not None else None
    blocked = None
    eta_s = None
    if counts[TrialStatus.PENDING] and not sweep.is_cancelled:
        pending = sweep.trials.filter(status=TrialStatus.PENDING).values_list("requires", flat=True)
        distinct = sorted({tuple(r or ()) for r in pending.distinct()})
        blocked = blocked_reason(sweep.job_type, [list(r) for r in distinct])
    job = jobtypes.get_job(sweep.job_type)
    if mean_s is not None and remaining and job is not None:
        slots = sum(h.concurrency for h in live_hosts_for(job)) or 1
        eta_s = mean_s * math.ceil(remaining / slots)
    return {
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


# --- the worker side: claim and finish -------------------------------------------------------


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


@dataclass
class FinishOutcome:
    trial: Trial
    changed: bool
    retried: bool = False


def finish(
    trial_id: int,
    host: WorkerHost,
    status: str,
    error: str,
    result: dict[str, Any] | None,
    retryable: bool = False,
) -> FinishOutcome:
    """Record the outcome of a running trial. Idempotent; a recorded outcome is never overwritten.

    ``result`` is ``TrialResult.to_json()`` (already validated by the API layer). A failed attempt
    marked ``retryable`` goes back to pending while attempts remain.
    """
    from results.services import ingest_result

    if status not in (TrialStatus.SUCCEEDED, TrialStatus.FAILED):
        raise ValueError(f"status must be succeeded or failed, got {status!r}")
    error = (error or "").strip()
    if status == TrialStatus.FAILED and not error:
        error = "the worker reported a failure without an error text"
    with transaction.atomic():
        trial = Trial.objects.select_for_update().filter(pk=trial_id).first()
        if trial is None:
            raise Trial.DoesNotExist(f"no trial {trial_id}")
        if trial.status in TERMINAL:
            if trial.status == status and trial.host_name == host.name:
                return FinishOutcome(trial, changed=False)
            raise Conflict(
                f"trial {trial_id} is already {trial.status}; a recorded outcome is not overwritten"
            )
        if trial.status != TrialStatus.RUNNING or trial.host_id != host.pk:
            last = trial.attempt_log[-1] if trial.attempt_log else {}
            if (
                status == TrialStatus.FAILED
                and last.get("kind") == "retry"
                and last.get("host") == host.name
                and last.get("attempt") == trial.attempts
                and last.get("error") == error
            ):
                return FinishOutcome(trial, changed=False, retried=True)  # the same finish, repeated
            raise Conflict(f"trial {trial_id} is not running on host {host.name} (it is {trial.status})")

        result = result or {}
        provenance = {**trial.provenance, **(result.get("provenance") or {})}
        provenance.setdefault("backend_revision", backend_revision())
        link = result.get("link") or {}
        wake_scheduler()  # a slot frees up (or the trial is pending again): dispatch on commit

        if status == TrialStatus.FAILED and retryable and trial.attempts < trial.max_attempts:
            reason = f"attempt {trial.attempts} failed on {host.name} (transient, will retry): {error}"
            trial.back_to_pending(reason, expect={TrialStatus.RUNNING}, host_id=host.pk)
            # Tag the log entry so a repeated identical finish is recognised as a no-op.
            entry = {**trial.attempt_log[-1], "kind": "retry", "error": error}
            Trial.objects.filter(pk=trial.pk).update(attempt_log=[*trial.attempt_log[:-1], entry])
            trial.refresh_from_db()
            log.warning("trial %s: %s", trial.pk, reason)
            return FinishOutcome(trial, changed=True, retried=True)

        ingest_result(trial, result)
        if status == TrialStatus.SUCCEEDED:
            trial.mark_succeeded(host_id=host.pk, provenance=provenance, link=link)
        else:
            trial.mark_failed(
                error, expect={TrialStatus.RUNNING}, host_id=host.pk, provenance=provenance, link=link
            )
    log.info("trial %s %s on %s", trial.pk, trial.status, host.name)
    return FinishOutcome(trial, changed=True)


def tick(now: Any = None, send: Any = None) -> Any:
    """One scheduler pass (see experiments.scheduler); ``manage.py scheduler`` calls this in a loop."""
    from experiments.scheduler import tick as _tick

    return _tick(now=now, send=send)
