"""Host registration and heartbeats."""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from hosts.models import WorkerHost, new_token

log = logging.getLogger("qoelab.hosts")

# Path segments of the worker protocol under /api/hosts/.
RESERVED_NAMES = frozenset({"heartbeat", "trials"})


def add_host(
    name: str, token: str | None = None, concurrency: int | None = None
) -> tuple[WorkerHost, str, bool]:
    """Create host ``name`` or set its token; returns (host, token, created).

    With ``token`` given the call is idempotent (the demo passes a fixed token); without it a new
    random token is issued, replacing the old one.
    """
    if name in RESERVED_NAMES:
        from django.core.exceptions import ValidationError

        raise ValidationError({"name": [f"{name!r} is reserved by the API; choose another host name"]})
    token = token or new_token()
    with transaction.atomic():
        host = WorkerHost.objects.select_for_update().filter(name=name).first()
        created = host is None
        if host is None:
            host = WorkerHost(name=name)
        host.set_token(token)
        if concurrency is not None:
            host.concurrency = concurrency
        host.full_clean()
        host.save()
    return host, token, created


def heartbeat(host: WorkerHost, data: dict[str, Any]) -> list[int]:
    """Store what the worker reports; requeue trials this host runs but no longer reports.

    A trial marked running on this host for longer than the heartbeat timeout that the worker does
    not list in ``running`` was lost (the worker restarted mid-trial). Returns their ids.
    """
    from experiments.choices import TrialStatus
    from experiments.models import IllegalTransition, Trial

    now = timezone.now()
    WorkerHost.objects.filter(pk=host.pk).update(
        kernel=data["kernel"],
        capabilities=data["capabilities"],
        queues=data["queues"],
        concurrency=data["concurrency"],
        versions=data["versions"],
        running=data["running"],
        last_heartbeat=now,
    )
    host.refresh_from_db()
    grace = now - timedelta(seconds=settings.QOELAB_HEARTBEAT_TIMEOUT)
    lost = Trial.objects.filter(host=host, status=TrialStatus.RUNNING, started_at__lt=grace).exclude(
        pk__in=data["running"]
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
