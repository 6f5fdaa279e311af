"""Serializers of the worker registry: a host's heartbeat and the researchers' host list."""

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
