"""A researcher's API token (``Authorization: Token <token>``), stored only as its SHA-256."""

from __future__ import annotations

from django.conf import settings
from django.db import models

from qoelab_web.tokens import hash_token


class ApiToken(models.Model):
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens")
    token_hash = models.CharField(max_length=64, unique=True)
    created = models.DateTimeField(auto_now_add=True)
    pinned = models.BooleanField(
        default=False, help_text="provisioned with a fixed value (e.g. make demo's): never evicted by logins"
    )

    class Meta:
        ordering = ["-created", "-id"]

    def __str__(self) -> str:
        return f"API token of {self.user} ({self.token_hash[:8]}…)"

    def check_token(self, token: str) -> bool:
        return self.token_hash == hash_token(token)
