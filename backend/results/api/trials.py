"""GET /api/trials/ and /api/trials/<id>/: trials of your sweeps; the detail carries what each one
produced (summary, samples, series, artifacts)."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from django.urls import reverse
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_field, extend_schema_view
from rest_framework import serializers, viewsets
from rest_framework.exceptions import ValidationError

from accounts.permissions import IsResearcher
from experiments.api.serializers import TrialSerializer
from experiments.choices import TrialStatus
from experiments.models import Trial
from qoelab_web.api import int_param
from results.models import Artifact


class ArtifactSerializer(serializers.ModelSerializer):
    download_url = serializers.SerializerMethodField()

    class Meta:
        model = Artifact
        fields = ["id", "attempt", "kind", "name", "size", "sha256", "created", "download_url"]
        read_only_fields = fields

    def get_download_url(self, obj: Artifact) -> str:
        return reverse("artifact-download", args=[obj.pk])


class SampleOutSerializer(serializers.Serializer):
    kind = serializers.CharField()
    index = serializers.IntegerField()
    values = serializers.DictField()


class SeriesOutSerializer(serializers.Serializer):
    name = serializers.CharField()
    t = serializers.ListField(child=serializers.FloatField())
    value = serializers.ListField(child=serializers.FloatField())


class TrialDetailSerializer(TrialSerializer):
    summary = serializers.SerializerMethodField()
    samples = serializers.SerializerMethodField()
    series = serializers.SerializerMethodField()
    artifacts = ArtifactSerializer(many=True, read_only=True)

    class Meta(TrialSerializer.Meta):
        fields = [
            *TrialSerializer.Meta.fields,
            "attempt_log",
            "provenance",
            "link",
            "summary",
            "samples",
            "series",
            "artifacts",
        ]
        read_only_fields = fields

    @extend_schema_field(serializers.DictField(child=serializers.FloatField()))
    def get_summary(self, obj: Trial) -> dict[str, float]:
        return dict(obj.summary.values_list("name", "value"))

    @extend_schema_field(SampleOutSerializer(many=True))
    def get_samples(self, obj: Trial) -> list[dict[str, Any]]:
        return list(obj.samples.values("kind", "index", "values"))

    @extend_schema_field(SeriesOutSerializer(many=True))
    def get_series(self, obj: Trial) -> list[dict[str, Any]]:
        out: dict[str, dict[str, Any]] = {}
        for name, t, value in obj.series.values_list("name", "t", "value"):
            s = out.setdefault(name, {"name": name, "t": [], "value": []})
            s["t"].append(t)
            s["value"].append(value)
        return list(out.values())


@extend_schema(tags=["trials"])
@extend_schema_view(
    list=extend_schema(
        parameters=[
            OpenApiParameter("sweep", int, description="only this sweep"),
            OpenApiParameter("status", str, enum=TrialStatus.values, description="only this status"),
        ]
    )
)
class TrialViewSet(viewsets.ReadOnlyModelViewSet):
    """Trials of your sweeps; the detail carries summary, samples, series and artifacts."""

    queryset = Trial.objects.none()
    permission_classes = [IsResearcher]

    def get_serializer_class(self) -> type:
        return TrialDetailSerializer if self.action == "retrieve" else TrialSerializer

    def get_queryset(self) -> QuerySet:
        qs = Trial.objects.visible_to(self.request.user)
        if (sweep := int_param(self.request, "sweep")) is not None:
            qs = qs.filter(sweep_id=sweep)
        if st := self.request.query_params.get("status"):
            if st not in TrialStatus.values:
                raise ValidationError(
                    {"status": [f"must be one of {', '.join(TrialStatus.values)}, got {st!r}"]}
                )
            qs = qs.filter(status=st)
        return qs.order_by("sweep_id", "index")
