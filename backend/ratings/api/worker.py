"""The worker protocol's call owned by ratings: a ``live_session`` trial reports its session and the
screens an evaluator saw; the answer says whether to release it (``ratings.live`` owns the slots)."""

from __future__ import annotations

from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response

from experiments.api.worker import TrialWorkerView
from hosts.api.views import trial_call
from ratings import live


class LiveSessionInfoSerializer(serializers.Serializer):
    websocket_url = serializers.RegexField(r"^wss?://[^\s]{3,300}$", help_text="ws://<worker>:<port>/")
    client = serializers.ChoiceField(choices=["novnc", "spice-html5", "x2go-view"])
    password = serializers.CharField(required=False, allow_blank=True, max_length=200)
    note = serializers.CharField(required=False, allow_blank=True, max_length=1000)
    protocol = serializers.CharField(required=False, max_length=20)
    link_backend = serializers.CharField(required=False, max_length=40)
    local_view = serializers.BooleanField(
        required=False,
        help_text="the evaluator sees the native client's screen over an unimpaired local path",
    )


class LiveReportSerializer(serializers.Serializer):
    """A ``live_session`` trial's report: the session once, then screens seen every few seconds."""

    session = LiveSessionInfoSerializer(required=False)
    pages_seen = serializers.IntegerField(required=False, min_value=0, max_value=100000)
    alive = serializers.BooleanField(required=False)
    error = serializers.CharField(required=False, allow_blank=True, max_length=1000)


class LiveReplySerializer(serializers.Serializer):
    release = serializers.BooleanField(help_text="true: tear the session down now")
    reason = serializers.CharField(allow_blank=True)


class LiveReportView(TrialWorkerView):
    @trial_call(
        LiveReportSerializer,
        LiveReplySerializer,
        "A live_session trial reports its session and screens; the answer says whether to release it",
    )
    def post(self, request: Request, trial_id: int) -> Response:
        ser = LiveReportSerializer(data=request.data)
        ser.is_valid(raise_exception=True)
        trial = self.running_trial(trial_id)
        if isinstance(trial, Response):
            return trial
        return Response(live.worker_report(trial.pk, self.host.pk, ser.validated_data))
