"""Lifecycle of experiments and sweeps: delete (with the artifacts they own), archive, re-run failures.

Deleting takes two steps, as the pages show it: ``plan_experiment_delete`` / ``plan_sweep_delete``
say exactly what would go (sweeps, trials, artifacts and their bytes, the rating campaigns that use
the sweeps' recordings) and why it may not (``DeletePlan.refusals``, plain sentences); ``delete``
computes the plan again under row locks, refuses with the same reasons, and removes the rows and the
artifact files. The REST API and the dashboard pages call the same functions.

The apps above experiments fill in their own part of a plan and remove it when the rows go
(``experiments.signals``): results counts the artifacts and removes their files
(``results.deletion``), ratings the rating campaigns that use the sweeps, with the refusals they bring
(``ratings.deletion``).

Archiving (``experiments.archiving``, with ``Refused``) only hides. ``Refused`` is imported here for
the callers that catch ``lifecycle.Refused``.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from django.db import transaction
from django.db.models import Count

from experiments import jobtypes
from experiments.archiving import Refused
from experiments.choices import ACTIVE, TrialStatus
from experiments.models import Experiment, IllegalTransition, Sweep, Trial
from experiments.services import forget_progress
from experiments.signals import deleting, deletion_planned
from experiments.wakeup import wake_scheduler

log = logging.getLogger("qoelab.experiments")


# --- deleting ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class CampaignUse:
    """A rating campaign that uses the sweeps to be deleted (it would go with them)."""

    id: int
    name: str
    owner: str
    status: str
    conditions: int
    evaluators: int
    ratings: int


@dataclass
class DeletePlan:
    """What deleting ``target`` takes with it, and why it may not go now."""

    kind: str  # "experiment" or "sweep"
    target: Experiment | Sweep
    sweeps: list[Sweep]
    trials: int
    # Filled in by the apps whose rows go with the sweeps (signals.deletion_planned): results, ratings.
    artifacts: int = 0
    artifact_bytes: int = 0
    campaigns: list[CampaignUse] = field(default_factory=list)
    refusals: list[str] = field(default_factory=list)

    @property
    def allowed(self) -> bool:
        return not self.refusals

    @property
    def ratings(self) -> int:
        return sum(c.ratings for c in self.campaigns)

    @property
    def fingerprint(self) -> str:
        """Short text of the counts: the page's POST carries it, so what goes is what was shown."""
        campaigns = ",".join(str(c.id) for c in self.campaigns)
        return (
            f"s{len(self.sweeps)}-t{self.trials}-a{self.artifacts}-b{self.artifact_bytes}"
            f"-c{campaigns}-r{self.ratings}"
        )


@dataclass(frozen=True)
class DeleteReport:
    kind: str
    name: str
    sweeps: int
    trials: int
    artifacts: int
    artifact_bytes: int
    campaigns: list[str]

    def __str__(self) -> str:
        parts = [
            counted(self.trials, "trial"),
            f"{counted(self.artifacts, 'artifact file')} ({_size(self.artifact_bytes)})",
        ]
        if self.kind == "experiment":
            parts.insert(0, counted(self.sweeps, "sweep"))
        if self.campaigns:
            named = ", ".join(f"'{name}'" for name in self.campaigns)
            parts.append(f"rating campaign{'s' if len(self.campaigns) > 1 else ''} {named}")
        return f"Deleted {self.kind} '{self.name}': " + ", ".join(parts) + "."


def counted(count: int, word: str) -> str:
    """``counted(1, "trial")`` -> "1 trial"; ``counted(2, "trial")`` -> "2 trials"."""
    return f"{count} {word}{'' if count == 1 else 's'}"


def _size(n: int) -> str:
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} bytes"


def _plan(kind: str, target: Experiment | Sweep, sweeps: list[Sweep], user: Any) -> DeletePlan:
    ids = [s.pk for s in sweeps]
    trials = Trial.objects.filter(sweep_id__in=ids)
    active = dict(
        trials.filter(status__in=list(ACTIVE))
        .order_by()
        .values("sweep_id")
        .annotate(n=Count("id"))
        .values_list("sweep_id", "n")
    )
    plan = DeletePlan(kind=kind, target=target, sweeps=sweeps, trials=trials.count())
    for s in sweeps:
        n = active.get(s.pk, 0)
        if not n:
            continue
        if kind == "sweep":
            plan.refusals.append(
                f"{counted(n, 'trial')} of this sweep {'is' if n == 1 else 'are'} queued or running: "
                "cancel the sweep first, and delete it once its running trials have finished."
            )
        else:
            plan.refusals.append(
                f"Sweep '{s.name}' has {counted(n, 'trial')} queued or running: cancel it first, and "
                "delete the experiment once its running trials have finished."
            )
    deletion_planned.send(sender=type(target), plan=plan, user=user)  # artifacts, campaigns
    return plan


def plan_sweep_delete(sweep: Sweep, user: Any) -> DeletePlan:
    return _plan("sweep", sweep, [sweep], user)


def plan_experiment_delete(experiment: Experiment, user: Any) -> DeletePlan:
    return _plan("experiment", experiment, list(experiment.sweeps.order_by("created_at", "id")), user)


def delete(plan: DeletePlan, user: Any, expect: str | None = None) -> DeleteReport:
    """Delete what ``plan`` names: checked again under locks; Refused (nothing deleted) if not allowed.

    ``expect``: the fingerprint of the plan the person confirmed; if what would go has changed since
    (a new artifact, a campaign), nothing is deleted and Refused says so. The artifact files leave
    storage with their rows (the ``results`` app deletes a file with its row); once the transaction
    commits, anything left and the emptied ``artifacts/sweep-N/`` folders are removed too.
    """
    kind, target = plan.kind, plan.target
    with transaction.atomic():
        model = Experiment if kind == "experiment" else Sweep
        locked = model.objects.select_for_update().filter(pk=target.pk).first()
        if locked is None:
            raise Refused([f"The {kind} is already gone."])
        # Lock its trials too: the scheduler skips locked rows, so none is queued while we look.
        sweep_filter = (
            {"sweep__experiment_id": target.pk} if kind == "experiment" else {"sweep_id": target.pk}
        )
        list(Trial.objects.select_for_update().filter(**sweep_filter).values_list("pk", flat=True))
        fresh = (
            plan_experiment_delete(locked, user) if kind == "experiment" else plan_sweep_delete(locked, user)
        )
        if fresh.refusals:
            raise Refused(fresh.refusals)
        if expect is not None and expect != fresh.fingerprint:
            raise Refused(
                [
                    f"What deleting this {kind} would remove has changed since the confirmation was shown: "
                    "look at the list again."
                ]
            )
        deleting.send(sender=model, plan=fresh, reason=f"its {kind} '{target.name}' was deleted")
        locked.delete()
    log.info("%s %s '%s' deleted by %s: %s", kind, target.pk, target.name, user, fresh.fingerprint)
    return DeleteReport(
        kind=kind,
        name=target.name,
        sweeps=len(fresh.sweeps),
        trials=fresh.trials,
        artifacts=fresh.artifacts,
        artifact_bytes=fresh.artifact_bytes,
        campaigns=[c.name for c in fresh.campaigns],
    )


# --- re-running failed trials -----------------------------------------------------------------


def rerun_failed(sweep: Sweep, user: Any) -> int:
    """Put the sweep's failed trials back to pending with fresh attempts; returns how many.

    Each keeps its history: the failure stays in its attempt log and a ``rerun`` entry is added
    (``Trial.rerun``). Refused for a cancelled sweep and for a job type this backend does not know
    (no worker would be sent the trials).
    """
    job = jobtypes.get_job(sweep.job_type)
    with transaction.atomic():
        locked = Sweep.objects.select_for_update().filter(pk=sweep.pk).first()
        if locked is None:
            raise Refused(["The sweep is gone."])
        if locked.is_cancelled:
            raise Refused(
                [
                    f"The sweep was cancelled ({locked.cancelled_at:%Y-%m-%d %H:%M}): its failed trials are "
                    "not run again. Clone it into a new sweep instead."
                ]
            )
        if job is None:
            raise Refused(
                [
                    f"Job type {sweep.job_type!r} is not registered in this backend, so no worker would "
                    "run the trials."
                ]
            )
        who = getattr(user, "get_username", lambda: str(user))()
        n = 0
        for trial in (
            Trial.objects.select_for_update()
            .filter(sweep=locked, status=TrialStatus.FAILED)
            .order_by("index")
        ):
            try:
                trial.rerun(f"re-run requested by {who}", job.max_attempts)
            except IllegalTransition:  # changed meanwhile (cannot happen under the lock; kept safe)
                continue
            n += 1
        if n:
            forget_progress(sweep.pk)
            wake_scheduler()
    sweep.refresh_from_db()
    log.info("sweep %s: %s failed trials re-queued by %s", sweep.pk, n, user)
    return n
