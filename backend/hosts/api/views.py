"""The worker protocol's base (host-token authentication, the shared answers) and the researchers' host list.

Each call of the protocol lives with the app that owns what it changes (docs/architecture.md):
heartbeat and claim in ``experiments.api.worker``, artifacts, capture inputs and finish in
``results.api.worker``, a live session's report in ``ratings.api.worker``; ``qoelab_web.api_urls``
routes them all under ``/api/hosts/``.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from drf_spectacular.utils import extend_schema
from rest_framework import mixins, status, viewsets
from rest_framework.response import Response
from rest_framework.views import APIView

from accounts.permissions import IsResearcher, IsStaffOrReadOnly
from hosts.api.serializers import WorkerHostSerializer
from hosts.auth import HostTokenAuthentication, IsWorkerHost
from hosts.models import WorkerHost
from qoelab_web.api import DetailSerializer, ErrorSerializer

WORKER_TAG = ["worker protocol"]


class WorkerAPIView(APIView):
    authentication_classes = [HostTokenAuthentication]
    permission_classes = [IsWorkerHost]
    # A trial's report carries its samples: larger than a researcher's JSON (qoelab_web.parsers).
    max_json_bytes = settings.DATA_UPLOAD_MAX_MEMORY_SIZE

    @property
    def host(self) -> WorkerHost:
        return self.request.auth


def conflict(message: str) -> Response:
    return Response({"detail": message}, status=status.HTTP_409_CONFLICT)


def not_found(trial_id: int) -> Response:
    return Response({"detail": f"no trial {trial_id}"}, status=status.HTTP_404_NOT_FOUND)


def trial_call(request: Any, reply: Any, summary: str, ok: int = 200) -> Any:
    """The schema of a worker call on one trial: 400 bad body, 404 unknown trial, 409 wrong state."""
    return extend_schema(
        tags=WORKER_TAG,
        request=request,
        responses={ok: reply, 400: ErrorSerializer, 404: DetailSerializer, 409: DetailSerializer},
        summary=summary,
    )


@extend_schema(tags=["hosts"])
class WorkerHostViewSet(
    mixins.ListModelMixin, mixins.RetrieveModelMixin, mixins.UpdateModelMixin, viewsets.GenericViewSet
):
    """Lab hosts with their capabilities and last heartbeat; staff may enable or disable a host."""

    queryset = WorkerHost.objects.all()
    serializer_class = WorkerHostSerializer
    permission_classes = [IsResearcher, IsStaffOrReadOnly]
    lookup_field = "name"
    lookup_value_regex = r"[a-z0-9][a-z0-9._-]{0,62}"
    pagination_class = None
    http_method_names = ["get", "patch", "head", "options"]
