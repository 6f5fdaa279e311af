"""The worker protocol's trial moves owned by experiments: a heartbeat (lost trials go back to
pending), a claim (queued -> running, one conditional update) and the text of an uploaded link
trace that a running trial names (``upload:N``)."""

from __future__ import annotations

from django.http import HttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response

from experiments import jobtypes, link_traces
from experiments import services as trial_services
from experiments.choices import TrialStatus
from experiments.models import LinkTrace, Trial
from hosts import services as host_services
from hosts.api.serializers import HeartbeatReplySerializer, HeartbeatSerializer
from hosts.api.views import WORKER_TAG, WorkerAPIView, conflict, not_found
from qoelab_web.api import DetailSerializer, ErrorSerializer


class ClaimReplySerializer(serializers.Serializer):
    id = serializers.IntegerField()
    job_type = serializers.CharField()
    params = serializers.DictField(help_text="parameters as written; the worker validates them again")
    timeout_s = serializers.IntegerField()
    attempt = serializers.IntegerField()


# A worker call on one of its trials (no docstring: drf-spectacular would show it on every such call).
class TrialWorkerView(WorkerAPIView):
    def running_trial(self, trial_id: int) -> Trial | Response:
        """The trial if it is running on this host, else the 404 or 409 answer to send."""
        trial = Trial.objects.filter(pk=trial_id).first()
        if trial is None:
            return not_found(trial_id)
        if trial.host_id != self.host.pk or trial.status != TrialStatus.RUNNING:
            return conflict(
                f"trial {trial_id} is not running on host {self.host.name} (it is {trial.status})"
            )
        return trial


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
        host_services.heartbeat(self.host, ser.validated_data)
        trial_services.requeue_lost(self.host, ser.validated_data["running"])
        return Response({"name": self.host.name, "queue": self.host.queue})


class ClaimView(TrialWorkerView):
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
            return not_found(trial_id)
        except trial_services.Conflict as exc:
            return conflict(str(exc))
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


class LinkTraceInputView(TrialWorkerView):
    @extend_schema(
        tags=WORKER_TAG,
        responses={
            (200, "text/plain"): OpenApiResponse(OpenApiTypes.STR),
            404: DetailSerializer,
            409: DetailSerializer,
        },
        summary="Fetch an uploaded link trace that a running trial's parameters name (upload:N)",
    )
    def get(self, request: Request, trial_id: int, trace_id: int) -> HttpResponse | Response:
        trial = self.running_trial(trial_id)
        if isinstance(trial, Response):
            return trial
        if trace_id not in link_traces.named_by(trial.params or {}):
            return Response({"detail": f"trial {trial_id} does not name upload:{trace_id}"},
                            status=status.HTTP_404_NOT_FOUND)  # fmt: skip
        trace = LinkTrace.objects.filter(pk=trace_id).first()
        if trace is None:
            return Response({"detail": f"no uploaded trace {trace_id}"}, status=status.HTTP_404_NOT_FOUND)
        response = HttpResponse(trace.text, content_type="text/plain; charset=ascii")
        response["X-Trace-Name"] = trace.name
        response["X-Trace-Sha256"] = trace.sha256
        return response
