"""Serializers of the worker registry and the worker-facing protocol."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from hosts.models import WorkerHost


class HeartbeatSerializer(serializers.Serializer):
    name = serializers.CharField(max_length=63)
    kernel = serializers.CharField(max_length=200, allow_blank=True)
    capabilities = serializers.DictField(child=serializers.BooleanField(), help_text="{capability: bool}")
    queues = serializers.ListField(child=serializers.CharField(max_length=200), max_length=50)
    concurrency = serializers.IntegerField(min_value=1, max_value=256)
    versions = serializers.DictField(child=serializers.CharField(max_length=200, allow_blank=True))
    running = serializers.ListField(child=serializers.IntegerField(min_value=1), max_length=1000)

    def validate_capabilities(self, value: dict[str, Any]) -> dict[str, Any]:
        if len(value) > 200:
            raise serializers.ValidationError("at most 200 capabilities")
        for key in value:
            if len(key) > 100:
                raise serializers.ValidationError(f"capability name too long: {key[:40]!r}...")
        return value

    def validate_versions(self, value: dict[str, Any]) -> dict[str, Any]:
        if len(value) > 200:
            raise serializers.ValidationError("at most 200 versions")
        return value


class HeartbeatReplySerializer(serializers.Serializer):
    name = serializers.CharField()
    queue = serializers.CharField()


class ClaimReplySerializer(serializers.Serializer):
    id = serializers.IntegerField()
    job_type = serializers.CharField()
    params = serializers.DictField(help_text="parameters as written; the worker validates them again")
    timeout_s = serializers.IntegerField()
    attempt = serializers.IntegerField()


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
        from results.services import parse_result

        return parse_result(value)


class FinishReplySerializer(serializers.Serializer):
    id = serializers.IntegerField()
    status = serializers.CharField()
    changed = serializers.BooleanField(help_text="false when this finish repeated an earlier one")


class WorkerHostSerializer(serializers.ModelSerializer):
    alive = serializers.SerializerMethodField()
    queue = serializers.CharField(read_only=True)
    running_trials = serializers.SerializerMethodField()

    class Meta:
        model = WorkerHost
        fields = [
            "id",
            "name",
            "enabled",
            "alive",
            "last_heartbeat",
            "kernel",
            "capabilities",
            "queues",
            "queue",
            "concurrency",
            "versions",
            "running_trials",
        ]
        read_only_fields = [f for f in fields if f != "enabled"]

    def get_alive(self, obj: WorkerHost) -> bool:
        return obj.is_alive()

    def get_running_trials(self, obj: WorkerHost) -> list[int]:
        return [int(x) for x in obj.running if isinstance(x, int)]


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
