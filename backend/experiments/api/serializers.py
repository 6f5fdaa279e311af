"""Serializers of the researcher API for experiments, sweeps and trials."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from experiments import jobtypes, services
from experiments.choices import SweepOrder, TrialStatus
from experiments.models import Experiment, Sweep, Trial


class ExperimentSerializer(serializers.ModelSerializer):
    owner = serializers.CharField(source="owner.username", read_only=True)
    sweep_count = serializers.SerializerMethodField()

    class Meta:
        model = Experiment
        fields = [
            "id",
            "name",
            "description",
            "job_type",
            "owner",
            "created_at",
            "archived_at",
            "sweep_count",
        ]
        read_only_fields = ["id", "owner", "created_at", "archived_at", "sweep_count"]

    def get_sweep_count(self, obj: Experiment) -> int:
        return obj.sweeps.count()

    def validate_job_type(self, value: str) -> str:
        if jobtypes.get_job(value) is None:
            raise serializers.ValidationError(f"unknown job type {value!r} (known: {jobtypes.known_names()})")
        if self.instance is not None and value != self.instance.job_type and self.instance.sweeps.exists():
            raise serializers.ValidationError("cannot change the job type of an experiment that has sweeps")
        return value

    def validate_name(self, value: str) -> str:
        value = value.strip()
        if not value:
            raise serializers.ValidationError("must not be blank")
        owner = self.instance.owner if self.instance else self.context["request"].user
        qs = Experiment.objects.filter(owner=owner, name=value)
        if self.instance is not None:
            qs = qs.exclude(pk=self.instance.pk)
        if qs.exists():
            raise serializers.ValidationError(f"you already have an experiment named {value!r}")
        return value


class ExperimentRefSerializer(serializers.Serializer):
    name = serializers.CharField(max_length=200)
    description = serializers.CharField(required=False, allow_blank=True)


class SweepSpecSerializer(serializers.Serializer):
    """The sweep spec (the same fields as a YAML spec file). Validated by services.create_sweep."""

    experiment = serializers.JSONField(
        help_text="an experiment id, or {name, description} to find or create one"
    )
    job_type = serializers.CharField(required=False, help_text="defaults to the experiment's job type")
    name = serializers.CharField(required=False, allow_blank=True, max_length=200)
    grid = serializers.DictField(
        child=serializers.ListField(child=serializers.JSONField()),
        help_text="{parameter: [values]}, e.g. {'rate': ['1mbit', '10mbit'], 'delay': ['0ms', '50ms']}",
    )
    fixed = serializers.DictField(
        child=serializers.JSONField(), required=False, help_text="{parameter: value}"
    )
    repetitions = serializers.IntegerField(required=False, min_value=1, max_value=services.MAX_REPETITIONS)
    order = serializers.ChoiceField(choices=SweepOrder.choices, required=False)
    seed = serializers.IntegerField(required=False, min_value=0, help_text="shuffle seed; random if omitted")


class ProgressSerializer(serializers.Serializer):
    total = serializers.IntegerField()
    done = serializers.IntegerField()
    counts = serializers.DictField(child=serializers.IntegerField(), help_text="trials per status")
    failed = serializers.IntegerField()
    running = serializers.IntegerField()
    fraction = serializers.FloatField()
    mean_trial_s = serializers.FloatField(allow_null=True)
    eta_s = serializers.FloatField(allow_null=True)
    blocked = serializers.CharField(allow_null=True, help_text="why pending trials cannot start, if so")
    cancelled = serializers.BooleanField()


class SweepSerializer(serializers.ModelSerializer):
    experiment_name = serializers.CharField(source="experiment.name", read_only=True)
    created_by = serializers.CharField(source="created_by.username", read_only=True)
    progress = serializers.SerializerMethodField()

    class Meta:
        model = Sweep
        fields = [
            "id",
            "experiment",
            "experiment_name",
            "name",
            "job_type",
            "grid",
            "grid_order",
            "fixed",
            "repetitions",
            "order",
            "seed",
            "trial_count",
            "created_by",
            "created_at",
            "cancelled_at",
            "progress",
        ]
        read_only_fields = fields

    @extend_schema_field(ProgressSerializer)
    def get_progress(self, obj: Sweep) -> dict[str, Any]:
        # A list computes every sweep's progress at once (SweepViewSet.list); one sweep on its own.
        known = self.context.get("progress", {})
        return known[obj.pk] if obj.pk in known else services.progress(obj)

    def to_representation(self, instance: Sweep) -> dict[str, Any]:
        """The fields above, read directly: DRF's generic walk cost ~100 µs per sweep, most of a
        100-sweep page (issue 33). Datetimes still go through their DRF fields (time zone, ``Z``);
        tests/backend/test_listing.py holds this equal to ``super().to_representation``."""
        stamp = self.fields["created_at"].to_representation
        return {
            "id": instance.pk,
            "experiment": instance.experiment_id,
            "experiment_name": instance.experiment.name,
            "name": instance.name,
            "job_type": instance.job_type,
            "grid": instance.grid,
            "grid_order": instance.grid_order,
            "fixed": instance.fixed,
            "repetitions": instance.repetitions,
            "order": instance.order,
            "seed": instance.seed,
            "trial_count": instance.trial_count,
            "created_by": instance.created_by.username,
            "created_at": stamp(instance.created_at),
            "cancelled_at": stamp(instance.cancelled_at) if instance.cancelled_at else None,
            "progress": self.get_progress(instance),
        }


class TrialSerializer(serializers.ModelSerializer):
    duration_s = serializers.FloatField(read_only=True, allow_null=True)
    status = serializers.ChoiceField(choices=TrialStatus.choices, read_only=True)

    class Meta:
        model = Trial
        fields = [
            "id",
            "sweep",
            "index",
            "params",
            "resolved",
            "repetition",
            "status",
            "attempts",
            "max_attempts",
            "host_name",
            "queued_at",
            "started_at",
            "finished_at",
            "duration_s",
            "error",
        ]
        read_only_fields = fields


class JobTypeSerializer(serializers.Serializer):
    name = serializers.CharField()
    title = serializers.CharField()
    description = serializers.CharField()
    params_schema = serializers.DictField(help_text="JSON schema of the parameters (x-unit gives units)")
    requires = serializers.ListField(child=serializers.CharField())
    metrics = serializers.ListField(child=serializers.DictField())
    charts = serializers.ListField(child=serializers.DictField())
    timeout_s = serializers.IntegerField()
    max_attempts = serializers.IntegerField()
    stimuli = serializers.BooleanField(help_text="its trials record sessions a rating campaign can show")


class CancelReplySerializer(serializers.Serializer):
    cancelled_trials = serializers.IntegerField()
    sweep = SweepSerializer()


class RerunReplySerializer(serializers.Serializer):
    requeued = serializers.IntegerField(help_text="failed trials put back to pending")
    sweep = SweepSerializer()


class LinkTraceUploadSerializer(serializers.Serializer):
    name = serializers.CharField(max_length=100, help_text="a file name, e.g. my-train.down")
    text = serializers.CharField(
        trim_whitespace=False,
        allow_blank=True,  # the trace parser says what an empty trace lacks
        help_text="the trace: one integer millisecond per line, one 1500-byte opportunity each (Mahimahi)",
    )


class LinkTraceSerializer(serializers.Serializer):
    id = serializers.IntegerField(allow_null=True, help_text="null for the library's traces")
    ref = serializers.CharField(help_text="what a sweep's link_trace / up_link_trace names")
    name = serializers.CharField()
    lines = serializers.IntegerField()
    period_s = serializers.FloatField()
    mean_bps = serializers.FloatField()
    sha256 = serializers.CharField()
    owner = serializers.CharField(required=False, help_text="absent for the library's traces")
    created_at = serializers.DateTimeField(required=False)
