"""The scheduler's work, one ``tick()`` at a time (``manage.py scheduler`` loops over it).

Each tick: (1) trials of hosts whose heartbeat went stale go back to pending while attempts remain,
else fail with the reason; (2) trials queued too long without a claim (a lost Celery message) go back
to pending; (3) pending trials are dispatched to live, enabled hosts whose capabilities cover the
job type's requirements, never more than a host's free slots, each with a conditional UPDATE and
then a Celery message on ``host.<name>``.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from experiments import jobtypes
from experiments.choices import ACTIVE, TrialStatus
from experiments.models import IllegalTransition, Trial
from hosts.models import WorkerHost

log = logging.getLogger("qoelab.scheduler")

Sender = Callable[[int, str], str]


@dataclass
class TickReport:
    requeued: list[int] = field(default_factory=list)
    failed: list[int] = field(default_factory=list)
    lost_messages: list[int] = field(default_factory=list)
    dispatched: dict[str, list[int]] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return bool(self.requeued or self.failed or self.lost_messages or self.dispatched or self.errors)

    def __str__(self) -> str:
        sent = sum(len(v) for v in self.dispatched.values())
        parts = [
            f"dispatched {sent}"
            + (f" ({', '.join(f'{h}: {len(v)}' for h, v in self.dispatched.items())})" if sent else ""),
            f"requeued {len(self.requeued)}",
            f"failed {len(self.failed)}",
            f"lost messages {len(self.lost_messages)}",
        ]
        if self.errors:
            parts.append("errors: " + "; ".join(self.errors))
        return ", ".join(parts)


def reap_stale_hosts(report: TickReport, now: datetime) -> None:
    """Queued/running trials of hosts without a recent heartbeat: retry or fail, with the reason."""
    for host in WorkerHost.objects.stale(now).filter(trials__status__in=list(ACTIVE)).distinct():
        last = host.last_heartbeat.isoformat(timespec="seconds") if host.last_heartbeat else "never"
        for trial in Trial.objects.filter(host=host, status__in=list(ACTIVE)):
            reason = f"worker {host.name} stopped heartbeating (last heartbeat {last})"
            try:
                if trial.status == TrialStatus.QUEUED:
                    # Never started, so no attempt was used: it simply goes elsewhere.
                    trial.back_to_pending(reason + " before it claimed the trial", host_id=host.pk)
                    report.requeued.append(trial.pk)
                elif trial.attempts < trial.max_attempts:
                    trial.back_to_pending(
                        f"{reason}; attempt {trial.attempts} lost, retrying", host_id=host.pk
                    )
                    report.requeued.append(trial.pk)
                else:
                    trial.mark_failed(
                        f"{reason}; attempt {trial.attempts} of {trial.max_attempts} lost", host_id=host.pk
                    )
                    report.failed.append(trial.pk)
            except IllegalTransition:
                continue  # finished or moved meanwhile
            log.warning("trial %s: %s", trial.pk, reason)


def requeue_lost_messages(report: TickReport, now: datetime) -> None:
    """Trials queued long ago but never claimed: the Celery message is gone (Redis restart, purge)."""
    limit = settings.QOELAB_QUEUED_TIMEOUT
    cutoff = now - timedelta(seconds=limit)
    for trial in Trial.objects.filter(status=TrialStatus.QUEUED, queued_at__lt=cutoff):
        reason = f"queued on {trial.host_name} for over {limit} s without being claimed (message lost?)"
        try:
            trial.back_to_pending(reason, expect={TrialStatus.QUEUED})
        except IllegalTransition:
            continue
        report.lost_messages.append(trial.pk)
        log.warning("trial %s: %s", trial.pk, reason)


def dispatch(report: TickReport, now: datetime, send: Sender) -> None:
    from qoelab_web.celery import host_queue

    for host in WorkerHost.objects.alive(now).filter(enabled=True):
        caps = host.capability_set()
        job_types = jobtypes.runnable_by(caps)
        if not job_types:
            continue
        with transaction.atomic():
            # Lock the host row so two schedulers cannot both fill the same free slots.
            WorkerHost.objects.select_for_update().filter(pk=host.pk).first()
            busy = Trial.objects.filter(host=host, status__in=list(ACTIVE)).count()
            free = host.concurrency - busy
            if free <= 0:
                continue
            picked = list(
                Trial.objects.select_for_update(skip_locked=True, of=("self",))
                .filter(
                    status=TrialStatus.PENDING,
                    sweep__cancelled_at__isnull=True,
                    sweep__job_type__in=job_types,
                    # The trial's own needs (e.g. its protocol's tools): a JSON array contained in caps.
                    requires__contained_by=sorted(caps),
                )
                .order_by("sweep_id", "index")
                .values_list("pk", flat=True)[:free]
            )
            if not picked:
                continue
            Trial.objects.filter(pk__in=picked, status=TrialStatus.PENDING).update(
                status=TrialStatus.QUEUED, host=host, host_name=host.name, queued_at=now
            )
        for trial_id in picked:
            try:
                task_id = send(trial_id, host.name)
            except Exception as exc:  # the broker is down: undo, report, stop this tick
                msg = f"cannot send trial {trial_id} to {host_queue(host.name)}: {type(exc).__name__}: {exc}"
                report.errors.append(msg)
                log.error(msg)
                undo = Trial.objects.filter(pk__in=picked, status=TrialStatus.QUEUED, host=host)
                for trial in undo:
                    with contextlib.suppress(IllegalTransition):  # claimed or cancelled meanwhile
                        trial.back_to_pending(f"not sent: {msg}", expect={TrialStatus.QUEUED})
                return
            Trial.objects.filter(pk=trial_id).update(celery_task_id=task_id)
            report.dispatched.setdefault(host.name, []).append(trial_id)
        log.info("sent %s trials to %s", len(picked), host_queue(host.name))


def tick(now: datetime | None = None, send: Sender | None = None) -> TickReport:
    """One scheduler pass. ``send`` publishes a trial (default: Celery to host.<name>)."""
    from qoelab_web.celery import send_run_trial

    now = now or timezone.now()
    report = TickReport()
    reap_stale_hosts(report, now)
    requeue_lost_messages(report, now)
    dispatch(report, now, send or send_run_trial)
    return report
