"""GET /api/status/: database, pending migrations, Redis and each worker's last heartbeat.

Open to anyone, for the compose healthcheck; it answers 503 when the database or Redis is down
or migrations are pending, so ``curl -f`` fails. Worker liveness is reported, not required.
Anonymous callers get only ``ok``; the details (server versions, worker names and capabilities)
go to researchers, the people who may list ``/api/hosts/`` (session or API token).
"""

from __future__ import annotations

import functools
from typing import Any

from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, connections
from django.db.migrations.executor import MigrationExecutor
from django.db.models import Count, Q
from django.utils import timezone
from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from accounts.permissions import is_researcher
from qoelab_web.api import DetailSerializer


class CheckSerializer(serializers.Serializer):
    ok = serializers.BooleanField()
    detail = serializers.CharField()


class WorkerStatusSerializer(serializers.Serializer):
    name = serializers.CharField()
    enabled = serializers.BooleanField()
    alive = serializers.BooleanField()
    last_heartbeat = serializers.DateTimeField(allow_null=True)
    seconds_since_heartbeat = serializers.FloatField(allow_null=True)
    capabilities = serializers.ListField(child=serializers.CharField())
    running = serializers.IntegerField()


class StatusSerializer(serializers.Serializer):
    ok = serializers.BooleanField(help_text="database and Redis answer, no migration pending")
    # The rest only for researchers (anonymous callers get only ``ok``).
    database = CheckSerializer(required=False)
    migrations = CheckSerializer(required=False)
    redis = CheckSerializer(required=False)
    workers = WorkerStatusSerializer(many=True, required=False)
    heartbeat_timeout_s = serializers.IntegerField(required=False)


def check_database() -> dict[str, Any]:
    try:
        with connections[DEFAULT_DB_ALIAS].cursor() as cur:
            cur.execute("SELECT version()")
            version = cur.fetchone()[0]
        return {"ok": True, "detail": version.split(",")[0]}
    except Exception as exc:  # any driver error means "down"; the message says which
        return {"ok": False, "detail": f"{type(exc).__name__}: {exc}".strip()}


# Once every migration is applied only new code can add one, and new code means a new process: a
# process that has seen "all applied" need not build the migration graph again on every poll.
_all_applied = False


def check_migrations() -> dict[str, Any]:
    global _all_applied
    if _all_applied:
        return {"ok": True, "detail": "all applied"}
    try:
        executor = MigrationExecutor(connections[DEFAULT_DB_ALIAS])
        plan = executor.migration_plan(executor.loader.graph.leaf_nodes())
    except Exception as exc:
        return {"ok": False, "detail": f"cannot read migrations: {exc}"}
    if plan:
        names = ", ".join(f"{m.app_label}.{m.name}" for m, _ in plan[:5])
        return {"ok": False, "detail": f"{len(plan)} pending (run manage.py migrate): {names}"}
    _all_applied = True
    return {"ok": True, "detail": "all applied"}


@functools.cache
def _redis(url: str) -> Any:
    import redis

    # One pooled client per process and URL: a poll reuses its connection instead of opening one.
    return redis.Redis.from_url(url, socket_connect_timeout=2, socket_timeout=2)


def check_redis() -> dict[str, Any]:
    try:
        version = _redis(settings.REDIS_URL).info("server").get("redis_version", "?")
        return {"ok": True, "detail": f"redis {version}"}
    except Exception as exc:
        return {"ok": False, "detail": f"{type(exc).__name__}: {exc}"}


def workers() -> list[dict[str, Any]]:
    from experiments.choices import ACTIVE
    from hosts.models import WorkerHost

    now = timezone.now()
    out = []
    hosts = WorkerHost.objects.annotate(n_running=Count("trials", filter=Q(trials__status__in=list(ACTIVE))))
    for host in hosts:
        out.append(
            {
                "name": host.name,
                "enabled": host.enabled,
                "alive": host.is_alive(now),
                "last_heartbeat": host.last_heartbeat,
                "seconds_since_heartbeat": (now - host.last_heartbeat).total_seconds()
                if host.last_heartbeat
                else None,
                "capabilities": sorted(host.capability_set()),
                "running": host.n_running,
            }
        )
    return out


def collect(details: bool = True) -> dict[str, Any]:
    db = check_database()
    migrations = check_migrations() if db["ok"] else {"ok": False, "detail": "database unreachable"}
    red = check_redis()
    ok = db["ok"] and migrations["ok"] and red["ok"]
    if not details:
        return {"ok": ok}
    return {
        "ok": ok,
        "database": db,
        "migrations": migrations,
        "redis": red,
        "workers": workers() if db["ok"] else [],
        "heartbeat_timeout_s": settings.QOELAB_HEARTBEAT_TIMEOUT,
    }


class StatusView(APIView):
    # The API's default authentication: logged-in researchers (page session or API token) see the
    # details; a wrong token answers 403.
    permission_classes = [AllowAny]

    @extend_schema(
        tags=["status"], responses={200: StatusSerializer, 403: DetailSerializer, 503: StatusSerializer}
    )
    def get(self, request: Request) -> Response:
        data = collect(details=is_researcher(request.user))
        return Response(data, status=200 if data["ok"] else 503)
