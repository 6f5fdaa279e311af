"""Experiment -> Sweep (a parameter grid) -> Trial (one run of one grid point and repetition).

Trial status moves only through :meth:`Trial.transition`, a conditional UPDATE that changes the
row only if it is still in a state the move is allowed from (see ``choices.TRANSITIONS``). Two
processes racing on the same trial therefore cannot both win, and a terminal outcome stays.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import models
from django.utils import timezone

from accounts.visibility import owned_by
from experiments.choices import TRANSITIONS, SweepOrder, TrialStatus


class IllegalTransition(Exception):
    """The trial is not in a state the requested move is allowed from (or changed meanwhile)."""

    def __init__(self, trial_id: int, current: str | None, target: str) -> None:
        self.trial_id = trial_id
        self.current = current
        self.target = target
        super().__init__(f"trial {trial_id} cannot go from {current or 'gone'} to {target}")


class Experiment(models.Model):
    objects = owned_by("owner").as_manager()
    name = models.CharField(max_length=200)
    description = models.TextField(blank=True)
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="experiments")
    job_type = models.CharField(max_length=64)
    created_at = models.DateTimeField(auto_now_add=True)
    archived_at = models.DateTimeField(
        null=True, blank=True, help_text="set: hidden (with its sweeps) from the default lists"
    )

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [models.UniqueConstraint(fields=["owner", "name"], name="experiment_unique_owner_name")]
        permissions = [("researcher", "Is a researcher: runs experiments and sees their results")]

    def __str__(self) -> str:
        return self.name


class Sweep(models.Model):
    objects = owned_by("experiment__owner").as_manager()
    experiment = models.ForeignKey(Experiment, on_delete=models.CASCADE, related_name="sweeps")
    name = models.CharField(max_length=200)
    job_type = models.CharField(max_length=64, help_text="copied from the experiment at creation")
    # JSONB does not keep key order, so the written order of grid parameters is kept apart.
    grid = models.JSONField(default=dict, help_text="{parameter: [values]}")
    grid_order = models.JSONField(default=list, help_text="grid parameter names as written")
    fixed = models.JSONField(default=dict, blank=True, help_text="{parameter: value}")
    repetitions = models.PositiveIntegerField(default=1)
    order = models.CharField(max_length=10, choices=SweepOrder.choices, default=SweepOrder.GRID)
    seed = models.BigIntegerField(help_text="shuffle seed (random order); stored so the order reproduces")
    trial_count = models.PositiveIntegerField(default=0)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="sweeps_created"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    cancelled_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        # The sweep list's order: a page of the newest sweeps reads an index, not a sort of all of
        # them (issue 33: 10,000 sweeps).
        indexes = [models.Index(fields=["-created_at", "-id"], name="sweep_newest_first")]

    def __str__(self) -> str:
        return f"{self.experiment.name} / {self.name}"

    @property
    def is_cancelled(self) -> bool:
        return self.cancelled_at is not None


class Trial(models.Model):
    objects = owned_by("sweep__experiment__owner").as_manager()
    sweep = models.ForeignKey(Sweep, on_delete=models.CASCADE, related_name="trials")
    index = models.PositiveIntegerField(help_text="execution order within the sweep")
    params = models.JSONField(help_text="parameters as written (fixed + grid point)")
    resolved = models.JSONField(help_text="parameters in SI units after validation")
    requires = models.JSONField(
        default=list, blank=True, help_text="capabilities a host must report to run this trial"
    )
    repetition = models.PositiveIntegerField(default=0)
    status = models.CharField(
        max_length=10, choices=TrialStatus.choices, default=TrialStatus.PENDING, db_index=True
    )
    attempts = models.PositiveIntegerField(default=0, help_text="runs started (claims)")
    max_attempts = models.PositiveIntegerField(default=2)
    host = models.ForeignKey(
        "hosts.WorkerHost", null=True, blank=True, on_delete=models.SET_NULL, related_name="trials"
    )
    host_name = models.CharField(max_length=63, blank=True, help_text="kept if the host row goes")
    queued_at = models.DateTimeField(null=True, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    error = models.TextField(blank=True)
    attempt_log = models.JSONField(
        default=list, blank=True, help_text="one entry per ended attempt or lost dispatch, with its reason"
    )
    provenance = models.JSONField(default=dict, blank=True)
    link = models.JSONField(default=dict, blank=True, help_text="link verification of this trial")
    celery_task_id = models.CharField(max_length=64, blank=True)

    class Meta:
        ordering = ["sweep_id", "index"]
        constraints = [models.UniqueConstraint(fields=["sweep", "index"], name="trial_unique_sweep_index")]
        indexes = [models.Index(fields=["status", "sweep"], name="trial_status_sweep")]

    def __str__(self) -> str:
        return f"trial {self.pk} ({self.status})"

    @property
    def duration_s(self) -> float | None:
        if self.started_at and self.finished_at:
            return (self.finished_at - self.started_at).total_seconds()
        return None

    def transition(
        self,
        target: str,
        *,
        expect: frozenset[str] | set[str] | None = None,
        host_id: int | None = None,
        **fields: Any,
    ) -> None:
        """Move to ``target`` if the row is still in an allowed source state; else IllegalTransition.

        ``expect`` narrows the allowed source states (e.g. only ``queued`` for a claim);
        ``host_id`` additionally requires the row to belong to that host. ``fields`` are written in
        the same UPDATE (F expressions allowed). The instance is refreshed afterwards.
        """
        sources = {s for s, targets in TRANSITIONS.items() if target in targets}
        if expect is not None:
            sources &= set(expect)
        qs = Trial.objects.filter(pk=self.pk, status__in=sources)
        if host_id is not None:
            qs = qs.filter(host_id=host_id)
        changed = qs.update(status=target, **fields)
        if changed != 1:
            current = Trial.objects.filter(pk=self.pk).values_list("status", flat=True).first()
            if current is not None:
                self.status = current
            raise IllegalTransition(self.pk, current, target)
        self.refresh_from_db()

    # Named moves; each is one conditional UPDATE.

    def mark_queued(self, host: Any) -> None:
        self.transition(
            TrialStatus.QUEUED,
            expect={TrialStatus.PENDING},
            host=host,
            host_name=host.name,
            queued_at=timezone.now(),
        )

    def mark_running(self, host: Any, provenance: dict[str, Any] | None = None) -> None:
        self.transition(
            TrialStatus.RUNNING,
            expect={TrialStatus.QUEUED},
            host_id=host.pk,
            started_at=timezone.now(),
            finished_at=None,
            attempts=models.F("attempts") + 1,
            provenance=provenance if provenance is not None else self.provenance,
        )

    def mark_succeeded(self, host_id: int | None = None, **fields: Any) -> None:
        self.transition(
            TrialStatus.SUCCEEDED,
            expect={TrialStatus.RUNNING},
            host_id=host_id,
            finished_at=timezone.now(),
            error="",
            **fields,
        )

    def mark_failed(
        self, error: str, *, expect: set[str] | None = None, host_id: int | None = None, **fields: Any
    ) -> None:
        # Default to the state we read, so the attempt log we write matches the row we change.
        self.transition(
            TrialStatus.FAILED,
            expect=expect if expect is not None else {self.status},
            host_id=host_id,
            finished_at=timezone.now(),
            error=error,
            attempt_log=self._log_entry(error),
            **fields,
        )

    def back_to_pending(
        self, reason: str, *, expect: set[str] | None = None, host_id: int | None = None
    ) -> None:
        """Give the trial another chance (lost worker, lost message, transient error)."""
        self.transition(
            TrialStatus.PENDING,
            expect=expect if expect is not None else {self.status},
            host_id=host_id,
            host=None,
            queued_at=None,
            started_at=None,
            celery_task_id="",
            attempt_log=self._log_entry(reason),
        )

    def rerun(self, reason: str, attempts: int) -> None:
        """failed -> pending with ``attempts`` fresh attempts: a researcher's re-run of a failed trial.

        The one way out of ``failed`` (``TRANSITIONS`` gives it none, so no worker or scheduler move
        can overwrite a failure). The failure stays in ``attempt_log`` (its own entry, written when
        it failed) and a ``rerun`` entry records the re-queue; ``attempts`` keeps counting, so the new
        runs' artifacts get new attempt numbers beside the old ones.
        """
        entry = {**self._log_entry(reason)[-1], "kind": "rerun", "error": self.error}
        # ``attempts`` too: a stale instance (the trial re-ran and failed again meanwhile) changes nothing.
        changed = Trial.objects.filter(pk=self.pk, status=TrialStatus.FAILED, attempts=self.attempts).update(
            status=TrialStatus.PENDING,
            max_attempts=models.F("attempts") + attempts,
            host=None,
            queued_at=None,
            started_at=None,
            finished_at=None,
            error="",
            celery_task_id="",
            attempt_log=[*list(self.attempt_log or []), entry],
        )
        if changed != 1:
            current = Trial.objects.filter(pk=self.pk).values_list("status", flat=True).first()
            raise IllegalTransition(self.pk, current, TrialStatus.PENDING)
        self.refresh_from_db()

    def mark_cancelled(self) -> None:
        self.transition(
            TrialStatus.CANCELLED,
            expect={TrialStatus.PENDING, TrialStatus.QUEUED},
            finished_at=timezone.now(),
        )

    def _log_entry(self, reason: str) -> list[dict[str, Any]]:
        entry = {
            "attempt": self.attempts,
            "status": self.status,
            "host": self.host_name,
            "started_at": self.started_at.isoformat() if self.started_at else None,
            "ended_at": timezone.now().isoformat(),
            "reason": reason,
        }
        return [*list(self.attempt_log or []), entry]


class LinkTrace(models.Model):
    """A link trace a researcher uploaded (Mahimahi's format, ``qoelab.emulation.traces``), which
    sweeps name as ``upload:<id>`` in ``link_trace``/``up_link_trace``. Checked when uploaded; the
    text is kept as sent, so its SHA-256 is the one every trial's provenance records."""

    objects = owned_by("owner").as_manager()
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="link_traces")
    name = models.CharField(max_length=100, help_text="a file name: letters, digits, '.', '_', '-'")
    text = models.TextField()
    sha256 = models.CharField(max_length=64)
    lines = models.PositiveIntegerField()
    period_ms = models.PositiveBigIntegerField()
    mean_bps = models.FloatField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.UniqueConstraint(fields=["owner", "sha256"], name="linktrace_unique_owner_sha256")
        ]

    def __str__(self) -> str:
        return f"{self.ref} ({self.name})"

    @property
    def ref(self) -> str:
        return f"upload:{self.pk}"
