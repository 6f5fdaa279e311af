"""Finishing a trial: its outcome and its result are recorded together (results owns both).

``finish`` is idempotent and never overwrites a recorded outcome; a retryable failure sends the trial
back to pending while attempts remain. ``fail_unstorable_finish`` fails a running trial whose finish
could not be stored, with the reason, rather than leave it running with its result lost.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from django.db import transaction

from experiments.choices import TERMINAL, TrialStatus
from experiments.models import Trial
from experiments.services import Conflict, backend_revision
from experiments.wakeup import wake_scheduler
from hosts.models import WorkerHost
from results.services import ingest_result

log = logging.getLogger("qoelab.results")


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


def fail_unstorable_finish(trial_id: int, host: WorkerHost, errors: list[dict[str, str]]) -> bool:
    """A finish from ``host`` whose body cannot be stored fails its running trial with the reason.

    Otherwise the trial would stay ``running`` with its result lost (the worker has moved on).
    True if the trial was failed; a trial not running on this host is left alone.
    """
    problems = "; ".join(f"{e['field']}: {e['message']}" for e in errors[:10])
    reason = f"the worker's finish could not be stored ({problems})"[:20000]
    with transaction.atomic():
        trial = Trial.objects.select_for_update().filter(pk=trial_id).first()
        if trial is None or trial.status != TrialStatus.RUNNING or trial.host_id != host.pk:
            return False
        wake_scheduler()
        trial.mark_failed(reason, expect={TrialStatus.RUNNING}, host_id=host.pk)
    log.warning("trial %s failed on %s: %s", trial_id, host.name, reason)
    return True
