"""The worker-facing protocol (docs/architecture.md) and the researchers' host list."""

from __future__ import annotations

import logging
from typing import Any

from django.conf import settings
from django.db import transaction
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import mixins, status, viewsets
from rest_framework.exceptions import ParseError, ValidationError
from rest_framework.parsers import FormParser, MultiPartParser
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from experiments import jobtypes
from experiments import services as trial_services
from experiments.choices import TrialStatus
from experiments.models import Trial
from experiments.permissions import IsResearcher, IsStaffOrReadOnly
from hosts import services
from hosts.api.serializers import (
    ArtifactReplySerializer,
    ArtifactUploadSerializer,
    ClaimReplySerializer,
    FinishReplySerializer,
    FinishSerializer,
    HeartbeatReplySerializer,
    HeartbeatSerializer,
    LiveReplySerializer,
    LiveReportSerializer,
    WorkerHostSerializer,
)
from hosts.auth import HostTokenAuthentication, IsWorkerHost
from hosts.models import WorkerHost
from qoelab.params import ParamsInvalid
from qoelab_web.api import DetailSerializer, ErrorSerializer, errors_response, flatten
from results import kinds, uploads
from results.models import Artifact
from results.services import ArtifactRejected, ArtifactTooLarge, store_artifact

log = logging.getLogger("qoelab.hosts")

WORKER_TAG = ["worker protocol"]


class WorkerAPIView(APIView):
    authentication_classes = [HostTokenAuthentication]
    permission_classes = [IsWorkerHost]
    # A trial's report carries its samples: larger than a researcher's JSON (qoelab_web.parsers).
    max_json_bytes = settings.DATA_UPLOAD_MAX_MEMORY_SIZE

    @property
    def host(self) -> WorkerHost:
        return self.request.auth

    def running_trial(self, trial_id: int) -> Trial | Response:
        """The trial if it is running on this host, else the 404 or 409 answer to send."""
        trial = Trial.objects.filter(pk=trial_id).first()
        if trial is None:
            return _not_found(trial_id)
        if trial.host_id != self.host.pk or trial.status != TrialStatus.RUNNING:
            return _conflict(
                f"trial {trial_id} is not running on host {self.host.name} (it is {trial.status})"
            )
        return trial


def _conflict(message: str) -> Response:
    return Response({"detail": message}, status=status.HTTP_409_CONFLICT)


def _not_found(trial_id: int) -> Response:
    return Response({"detail": f"no trial {trial_id}"}, status=status.HTTP_404_NOT_FOUND)


class HeartbeatView(WorkerAPIView):
    @extend_schema(
        tags=WORKER_TAG,
        request=HeartbeatSerializer,
        responses={200: HeartbeatReplySerializer, 400: ErrorSerializer, 403: DetailSerializer},
        summary="Report this host's facts; keeps it alive for the scheduler",
    )
    def post(self, request: Request) -> Response:
        ser = HeartbeatSerializer(data=request.data)
        ser.is_valid(raise_exception=True)
        if ser.validated_data["name"] != self.host.name:
            return Response(
                {
                    "detail": f"this token belongs to host {self.host.name!r}, "
                    f"not {ser.validated_data['name']!r}"
                },
                status=status.HTTP_403_FORBIDDEN,
            )
        services.heartbeat(self.host, ser.validated_data)
        return Response({"name": self.host.name, "queue": self.host.queue})


class ClaimView(WorkerAPIView):
    @extend_schema(
        tags=WORKER_TAG,
        request=None,
        responses={200: ClaimReplySerializer, 404: DetailSerializer, 409: DetailSerializer},
        summary="Start a trial queued for this host (one conditional update; 409 if no longer queued)",
    )
    def post(self, request: Request, trial_id: int) -> Response:
        try:
            trial = trial_services.claim(trial_id, self.host)
        except Trial.DoesNotExist:
            return _not_found(trial_id)
        except trial_services.Conflict as exc:
            return _conflict(str(exc))
        job = jobtypes.get_job(trial.sweep.job_type)
        return Response(
            {
                "id": trial.pk,
                "job_type": trial.sweep.job_type,
                "params": trial.params,
                "timeout_s": job.timeout_s if job else 600,
                "attempt": trial.attempts,
            }
        )


def trial_call(request: Any, reply: Any, summary: str, ok: int = 200) -> Any:
    """The schema of a worker call on one trial: 400 bad body, 404 unknown trial, 409 wrong state."""
    return extend_schema(
        tags=WORKER_TAG,
        request=request,
        responses={ok: reply, 400: ErrorSerializer, 404: DetailSerializer, 409: DetailSerializer},
        summary=summary,
    )


class ArtifactUploadView(WorkerAPIView):
    parser_classes = [MultiPartParser, FormParser]

    @extend_schema(
        tags=WORKER_TAG,
        request={"multipart/form-data": ArtifactUploadSerializer},
        parameters=[
            OpenApiParameter(
                "kind",
                str,
                description="the artifact's kind, as in the form: its size limit is checked before the "
                "body is read (optional for older workers; then the largest limit applies until the "
                "form is read)",
            )
        ],
        responses={
            201: ArtifactReplySerializer,
            400: ErrorSerializer,
            404: DetailSerializer,
            409: DetailSerializer,
            411: ErrorSerializer,
            413: ErrorSerializer,
        },
        summary="Upload one artifact of a running trial (kind checked against content, SHA-256 verified)",
    )
    def post(self, request: Request, trial_id: int) -> Response:
        # Everything that can refuse the upload without its bytes is decided before the body is read:
        # the trial runs on this host, the kind is known, the declared length fits its limit.
        trial = self.running_trial(trial_id)
        if isinstance(trial, Response):
            return trial
        declared_kind = request.query_params.get("kind")
        try:
            cap = kinds.max_upload_bytes(declared_kind)
        except kinds.ContentMismatch as exc:
            return errors_response([{"field": exc.field, "message": exc.message}])
        what = f"a {declared_kind}" if declared_kind else "an artifact"
        refusal = uploads.declared_length_refusal(request.META, cap, what)
        if refusal is not None:
            code, message = refusal
            log.info("trial %s: upload from %s refused unread: %s", trial.pk, self.host, message)
            return errors_response([{"field": "file", "message": message}], status=code)
        capped = uploads.cap_request(request._request, cap)
        data = request.data  # the body is read here, streamed through the cap
        if capped.exceeded:
            message = f"is larger than {cap} bytes, the limit of {what} (QOELAB_MAX_ARTIFACT_BYTES)"
            return errors_response([{"field": "file", "message": message}], status=413)
        ser = ArtifactUploadSerializer(data=data)
        ser.is_valid(raise_exception=True)
        if declared_kind and ser.validated_data["kind"] != declared_kind:
            message = f"is {ser.validated_data['kind']!r} in the form but {declared_kind!r} in the URL"
            return errors_response([{"field": "kind", "message": message}])
        try:
            with transaction.atomic():
                artifact = store_artifact(
                    trial,
                    ser.validated_data["file"],
                    ser.validated_data["kind"],
                    ser.validated_data["sha256"],
                )
        except ArtifactTooLarge as exc:
            return errors_response([{"field": exc.field, "message": exc.message}], status=413)
        except ArtifactRejected as exc:
            return errors_response([{"field": exc.field, "message": exc.message}])
        log.info(
            "trial %s: artifact %s (%s bytes) from %s", trial.pk, artifact.name, artifact.size, self.host
        )
        return Response(
            {"id": artifact.pk, "size": artifact.size, "sha256": artifact.sha256},
            status=status.HTTP_201_CREATED,
        )


class CaptureInputView(WorkerAPIView):
    @extend_schema(
        tags=WORKER_TAG,
        responses={
            (200, "application/vnd.tcpdump.pcap"): OpenApiResponse(OpenApiTypes.BINARY),
            404: DetailSerializer,
            409: DetailSerializer,
        },
        summary="Fetch the packet capture of a trial that a running trial's parameters name (trial:N)",
    )
    def get(self, request: Request, trial_id: int, source_id: int) -> Any:
        trial = self.running_trial(trial_id)
        if isinstance(trial, Response):
            return trial
        job = jobtypes.get_job(trial.sweep.job_type)
        params = trial.params or {}
        named = {str(params.get(name, "")).strip() for name in (job.capture_params if job else ())}
        if f"trial:{source_id}" not in named:
            return Response({"detail": f"trial {trial_id} does not name trial {source_id} as an input"},
                            status=status.HTTP_404_NOT_FOUND)  # fmt: skip
        artifact = Artifact.objects.filter(trial_id=source_id, kind="pcap").order_by("-attempt", "id").first()
        if artifact is None:
            return Response({"detail": f"trial {source_id} has no packet capture"},
                            status=status.HTTP_404_NOT_FOUND)  # fmt: skip
        try:
            return kinds.file_response(artifact)
        except FileNotFoundError:
            return Response({"detail": f"the capture of trial {source_id} is missing from storage (pruned?)"},
                            status=status.HTTP_404_NOT_FOUND)  # fmt: skip


class LiveReportView(WorkerAPIView):
    @trial_call(
        LiveReportSerializer,
        LiveReplySerializer,
        "A live_session trial reports its session and screens; the answer says whether to release it",
    )
    def post(self, request: Request, trial_id: int) -> Response:
        from ratings import live  # the ratings app owns the slots; hosts only carries the report

        ser = LiveReportSerializer(data=request.data)
        ser.is_valid(raise_exception=True)
        trial = self.running_trial(trial_id)
        if isinstance(trial, Response):
            return trial
        return Response(live.worker_report(trial.pk, self.host.pk, ser.validated_data))


class FinishView(WorkerAPIView):
    @trial_call(
        FinishSerializer,
        FinishReplySerializer,
        "Record a trial's outcome and result (idempotent; never overwrites a recorded outcome)",
    )
    def post(self, request: Request, trial_id: int) -> Response:
        try:
            ser = FinishSerializer(data=request.data)
            ser.is_valid(raise_exception=True)
        except (ValidationError, ParseError, ParamsInvalid) as exc:
            # The worker has finished and will not send this result again: fail the trial with the
            # reason rather than leave it running with its result lost (the 400 still says why).
            errors = exc.errors if isinstance(exc, ParamsInvalid) else flatten(exc.detail)
            trial_services.fail_unstorable_finish(trial_id, self.host, errors)
            raise
        data: dict[str, Any] = ser.validated_data
        try:
            outcome = trial_services.finish(
                trial_id, self.host, data["status"], data["error"], data["result"], data["retryable"]
            )
        except Trial.DoesNotExist:
            return _not_found(trial_id)
        except trial_services.Conflict as exc:
            return _conflict(str(exc))
        return Response({"id": outcome.trial.pk, "status": outcome.trial.status, "changed": outcome.changed})


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
