"""Host registration and heartbeats."""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.utils import timezone

from hosts.models import WorkerHost, new_token

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


def heartbeat(host: WorkerHost, data: dict[str, Any]) -> None:
    """Store what the worker reports (``experiments.services.requeue_lost`` handles its missing trials)."""
    WorkerHost.objects.filter(pk=host.pk).update(
        kernel=data["kernel"],
        capabilities=data["capabilities"],
        queues=data["queues"],
        concurrency=data["concurrency"],
        versions=data["versions"],
        running=data["running"],
        last_heartbeat=timezone.now(),
    )
    host.refresh_from_db()
