"""Status and option sets of experiments, sweeps and trials."""

from django.db import models


class TrialStatus(models.TextChoices):
    PENDING = "pending", "pending"
    QUEUED = "queued", "queued"
    RUNNING = "running", "running"
    SUCCEEDED = "succeeded", "succeeded"
    FAILED = "failed", "failed"
    CANCELLED = "cancelled", "cancelled"


TERMINAL = frozenset({TrialStatus.SUCCEEDED, TrialStatus.FAILED, TrialStatus.CANCELLED})
ACTIVE = frozenset({TrialStatus.QUEUED, TrialStatus.RUNNING})

# The only moves a trial may make. Terminal states have no exits, so a recorded outcome
# (above all a failure) is never overwritten. The one exception is deliberate and not a move of
# this table: a researcher's re-run of a failed trial (``Trial.rerun``), which keeps the failure in
# the trial's attempt log.
TRANSITIONS: dict[str, frozenset[str]] = {
    TrialStatus.PENDING: frozenset({TrialStatus.QUEUED, TrialStatus.CANCELLED, TrialStatus.FAILED}),
    TrialStatus.QUEUED: frozenset(
        {TrialStatus.RUNNING, TrialStatus.PENDING, TrialStatus.CANCELLED, TrialStatus.FAILED}
    ),
    TrialStatus.RUNNING: frozenset({TrialStatus.SUCCEEDED, TrialStatus.FAILED, TrialStatus.PENDING}),
    TrialStatus.SUCCEEDED: frozenset(),
    TrialStatus.FAILED: frozenset(),
    TrialStatus.CANCELLED: frozenset(),
}


class SweepOrder(models.TextChoices):
    GRID = "grid", "grid (in the order written)"
    RANDOM = "random", "random (shuffled with the stored seed)"
