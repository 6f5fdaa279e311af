"""GET /api/sweeps/<id>/aggregate/: mean and 95 % CI (Student t) of a metric per x value and series."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from accounts.permissions import IsResearcher
from experiments import jobtypes
from qoelab_web.api import ErrorSerializer, errors_response
from results.api.access import visible_sweep
from results.services import aggregate


class AggregatePointSerializer(serializers.Serializer):
    x = serializers.JSONField()
    mean = serializers.FloatField()
    ci_low = serializers.FloatField(allow_null=True)
    ci_high = serializers.FloatField(allow_null=True)
    sd = serializers.FloatField(allow_null=True)
    n = serializers.IntegerField()


class AggregateSeriesSerializer(serializers.Serializer):
    value = serializers.JSONField(help_text="the series parameter's value (null without series)")
    points = AggregatePointSerializer(many=True)


class AggregateSerializer(serializers.Serializer):
    metric = serializers.CharField()
    x = serializers.CharField()
    series_param = serializers.CharField(allow_null=True)
    source = serializers.CharField()
    series = AggregateSeriesSerializer(many=True)


class AggregateQuerySerializer(serializers.Serializer):
    metric = serializers.RegexField(
        r"^[A-Za-z_][A-Za-z0-9_.:-]{0,63}$", help_text="summary metric or sample value"
    )
    x = serializers.CharField(help_text="parameter on the x axis; with source=series, t (the time)")
    series = serializers.CharField(required=False, help_text="parameter splitting the points into series")
    source = serializers.ChoiceField(
        choices=["summary", "samples", "series", "curve"], default="summary", required=False
    )


class SweepAggregateView(APIView):
    permission_classes = [IsResearcher]

    @extend_schema(
        tags=["sweeps"],
        # As when this was an action of the sweeps' viewset: the schema stays the same.
        description="Sweeps of your experiments with their progress.",
        parameters=[
            OpenApiParameter(
                "id", int, OpenApiParameter.PATH, description="A unique integer value identifying this sweep."
            ),
            AggregateQuerySerializer,
        ],
        responses={200: AggregateSerializer, 400: ErrorSerializer},
        summary="Mean and 95 % CI (Student t) of a metric per x value and series value",
    )
    def get(self, request: Request, pk: int) -> Response:
        sweep = visible_sweep(request, pk)
        query = AggregateQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        q = query.validated_data
        job = jobtypes.get_job(sweep.job_type)
        names = jobtypes.param_names(job) if job else list(sweep.grid) + list(sweep.fixed)
        if q.get("source") == "series":
            names = [*names, "t"]  # a time series' own time
        errors = [
            {
                "field": f,
                "message": f"is not a parameter of job type {sweep.job_type!r} "
                f"(parameters: {', '.join(names)})",
            }
            for f in ("x", "series")
            if q.get(f) and q[f] not in names
        ]
        if errors:
            return errors_response(errors)
        return Response(aggregate(sweep, q["metric"], q["x"], q.get("series"), q.get("source", "summary")))
