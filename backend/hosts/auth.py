"""``Authorization: Host <token>``: how a lab host's worker authenticates to the API."""

from __future__ import annotations

from typing import Any

from django.utils.functional import cached_property
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from rest_framework import authentication, exceptions, permissions

from hosts.models import WorkerHost, hash_token


class HostPrincipal:
    """Stands in for request.user on worker calls; request.auth is the WorkerHost."""

    is_authenticated = True
    is_anonymous = False
    is_staff = False
    is_superuser = False

    def __init__(self, host: WorkerHost) -> None:
        self.host = host

    @cached_property
    def username(self) -> str:
        return f"host:{self.host.name}"

    def has_perm(self, perm: str, obj: Any = None) -> bool:
        return False

    def __str__(self) -> str:
        return self.username


class HostTokenAuthentication(authentication.BaseAuthentication):
    keyword = "Host"

    def authenticate(self, request: Any) -> tuple[HostPrincipal, WorkerHost] | None:
        parts = authentication.get_authorization_header(request).split()
        if not parts or parts[0].lower() != self.keyword.lower().encode():
            return None
        if len(parts) != 2:
            raise exceptions.AuthenticationFailed("Authorization: Host <token> takes exactly one token")
        try:
            token = parts[1].decode()
        except UnicodeError:
            raise exceptions.AuthenticationFailed("the host token must be ASCII") from None
        host = WorkerHost.objects.filter(token_hash=hash_token(token)).first()
        if host is None:
            raise exceptions.AuthenticationFailed("unknown host token (create one: manage.py add_host NAME)")
        # A disabled host still authenticates, so trials it is running can finish; it just gets
        # no new ones (the scheduler skips it and claims are refused). Revoke with a new token.
        return HostPrincipal(host), host

    def authenticate_header(self, request: Any) -> str:
        return self.keyword


class IsWorkerHost(permissions.BasePermission):
    message = "this endpoint is for lab-host workers (Authorization: Host <token>)"

    def has_permission(self, request: Any, view: Any) -> bool:
        return isinstance(request.auth, WorkerHost)


class HostTokenScheme(OpenApiAuthenticationExtension):
    target_class = "hosts.auth.HostTokenAuthentication"
    name = "hostToken"

    def get_security_definition(self, auto_schema: Any) -> dict[str, str]:
        return {
            "type": "apiKey",
            "in": "header",
            "name": "Authorization",
            "description": "Per-host worker token: `Authorization: Host <token>` (manage.py add_host NAME)",
        }
