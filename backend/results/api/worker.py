"""The worker protocol's calls owned by results: upload an artifact, fetch a capture another trial
made (``trial:N`` inputs), and finish a trial with its result (``results.finish``)."""

from __future__ import annotations

import logging
from typing import Any

from django.db import transaction
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import serializers, status
from rest_framework.exceptions import ParseError, ValidationError
from rest_framework.parsers import FormParser, MultiPartParser
from rest_framework.request import Request
from rest_framework.response import Response

from experiments import jobtypes
from experiments.api.worker import TrialWorkerView
from experiments.models import Trial
from experiments.services import Conflict
from hosts.api.views import WORKER_TAG, conflict, not_found, trial_call
from qoelab.params import ParamsInvalid
from qoelab_web.api import DetailSerializer, ErrorSerializer, errors_response, flatten
from results import finish as trial_finish
from results import kinds, uploads
from results.models import Artifact
from results.services import ArtifactRejected, ArtifactTooLarge, parse_result, store_artifact

log = logging.getLogger("qoelab.hosts")


class ArtifactUploadSerializer(serializers.Serializer):
    file = serializers.FileField()
    kind = serializers.RegexField(r"^[a-z][a-z0-9_-]{0,31}$", help_text="pcap, video, log, json, ...")
    sha256 = serializers.RegexField(r"^[0-9a-fA-F]{64}$", help_text="hex SHA-256 of the file")


class ArtifactReplySerializer(serializers.Serializer):
    id = serializers.IntegerField()
    size = serializers.IntegerField()
    sha256 = serializers.CharField()


class FinishSerializer(serializers.Serializer):
    status = serializers.ChoiceField(choices=["succeeded", "failed"])
    error = serializers.CharField(allow_blank=True, required=False, default="", max_length=20000)
    retryable = serializers.BooleanField(
        required=False, default=False, help_text="the failure is transient: retry while attempts remain"
    )
    result = serializers.JSONField(required=False, default=dict, help_text="TrialResult.to_json()")

    def validate_result(self, value: Any) -> dict[str, Any]:
        return parse_result(value)


class FinishReplySerializer(serializers.Serializer):
    id = serializers.IntegerField()
    status = serializers.CharField()
    changed = serializers.BooleanField(help_text="false when this finish repeated an earlier one")


class ArtifactUploadView(TrialWorkerView):
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


class CaptureInputView(TrialWorkerView):
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


class FinishView(TrialWorkerView):
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
            trial_finish.fail_unstorable_finish(trial_id, self.host, errors)
            raise
        data: dict[str, Any] = ser.validated_data
        try:
            outcome = trial_finish.finish(
                trial_id, self.host, data["status"], data["error"], data["result"], data["retryable"]
            )
        except Trial.DoesNotExist:
            return not_found(trial_id)
        except Conflict as exc:
            return conflict(str(exc))
        return Response({"id": outcome.trial.pk, "status": outcome.trial.status, "changed": outcome.changed})
