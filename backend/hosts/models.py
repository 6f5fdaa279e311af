"""A lab host running a qoelab worker; it authenticates with a per-host token stored hashed."""

from __future__ import annotations

import secrets
from datetime import datetime, timedelta

from django.conf import settings
from django.core.validators import RegexValidator
from django.db import models
from django.utils import timezone

from qoelab_web.tokens import hash_token, new_token  # noqa: F401 (new_token: used via hosts.models)

# Host names become Celery queue names (host.<name>) and URL parts: keep them plain.
host_name_validator = RegexValidator(
    r"^[a-z0-9][a-z0-9._-]{0,62}$",
    "a host name is 1-63 lower-case letters, digits, '.', '_' or '-', starting with a letter or digit",
)


class WorkerHostQuerySet(models.QuerySet):
    def alive(self, now: datetime | None = None) -> WorkerHostQuerySet:
        now = now or timezone.now()
        cutoff = now - timedelta(seconds=settings.QOELAB_HEARTBEAT_TIMEOUT)
        return self.filter(last_heartbeat__gte=cutoff)

    def stale(self, now: datetime | None = None) -> WorkerHostQuerySet:
        now = now or timezone.now()
        cutoff = now - timedelta(seconds=settings.QOELAB_HEARTBEAT_TIMEOUT)
        return self.filter(models.Q(last_heartbeat__lt=cutoff) | models.Q(last_heartbeat__isnull=True))


class WorkerHost(models.Model):
    name = models.CharField(max_length=63, unique=True, validators=[host_name_validator])
    token_hash = models.CharField(max_length=64, unique=True)
    kernel = models.CharField(max_length=200, blank=True)
    capabilities = models.JSONField(default=dict, blank=True, help_text="{capability: bool}")
    queues = models.JSONField(default=list, blank=True)
    concurrency = models.PositiveIntegerField(default=1)
    versions = models.JSONField(default=dict, blank=True, help_text="{tool: version}")
    running = models.JSONField(default=list, blank=True, help_text="trial ids at the last heartbeat")
    last_heartbeat = models.DateTimeField(null=True, blank=True)
    enabled = models.BooleanField(default=True)
    created_at = models.DateTimeField(auto_now_add=True)

    objects = WorkerHostQuerySet.as_manager()

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    @property
    def queue(self) -> str:
        return f"host.{self.name}"

    def capability_set(self) -> frozenset[str]:
        """Capabilities the worker reported as available (value exactly True)."""
        caps = self.capabilities if isinstance(self.capabilities, dict) else {}
        return frozenset(k for k, v in caps.items() if v is True)

    def is_alive(self, now: datetime | None = None) -> bool:
        if self.last_heartbeat is None:
            return False
        now = now or timezone.now()
        return now - self.last_heartbeat <= timedelta(seconds=settings.QOELAB_HEARTBEAT_TIMEOUT)

    def set_token(self, token: str) -> None:
        self.token_hash = hash_token(token)

    def check_token(self, token: str) -> bool:
        return secrets.compare_digest(self.token_hash, hash_token(token))
