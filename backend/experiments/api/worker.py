"""The worker protocol's trial moves owned by experiments: a heartbeat (lost trials go back to
pending) and a claim (queued -> running, one conditional update)."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response

from experiments import jobtypes
from experiments import services as trial_services
from experiments.choices import TrialStatus
from experiments.models import Trial
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
