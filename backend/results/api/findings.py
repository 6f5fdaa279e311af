"""GET /api/sweeps/<id>/findings/: the thesis' findings checked on a sweep's results."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from accounts.permissions import IsResearcher
from qoelab_web.api import DetailSerializer
from results.api.access import visible_sweep
from results.findings import sweep_findings


class FindingRowSerializer(serializers.Serializer):
    condition = serializers.CharField(help_text="e.g. 'rate 1 Mbit/s, delay 50 ms'")
    protocol = serializers.CharField(help_text="the series: a protocol, with its own settings when they vary")
    quantity = serializers.CharField(help_text="what the numbers are, with their unit: 'T (ms)'")
    n = serializers.IntegerField(help_text="trials (repetitions) behind the mean")
    mean = serializers.FloatField(allow_null=True)
    ci_low = serializers.FloatField(allow_null=True, help_text="95 % Student-t interval (null for n < 2)")
    ci_high = serializers.FloatField(allow_null=True)


class FindingSerializer(serializers.Serializer):
    name = serializers.CharField(help_text="the check's name, e.g. x2go_best_t_low_rate")
    title = serializers.CharField()
    claim = serializers.CharField(help_text="the thesis' claim as the check tests it")
    figure = serializers.CharField(help_text="the thesis figure, e.g. 'Fig. 4.6 (a)'")
    verdict = serializers.ChoiceField(choices=["holds", "does not hold", "inconclusive"])
    reason = serializers.CharField(help_text="one sentence with the numbers that decided")
    scope = serializers.DictField(help_text="values of other varying parameters (e.g. server) judged apart")
    scope_label = serializers.CharField()
    rows = FindingRowSerializer(many=True)


class FindingTrialSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    sweep = serializers.IntegerField()
    params = serializers.DictField(help_text="the trial's resolved (SI) parameters")
    summary = serializers.DictField(child=serializers.FloatField())
    host = serializers.DictField(help_text="{'cpu': the CPU model that ran it; null if its job records none}")


class FindingsSerializer(serializers.Serializer):
    sweep = serializers.IntegerField()
    job_type = serializers.CharField()
    report = serializers.CharField(allow_null=True, help_text="the findings report (null: none for this job)")
    title = serializers.CharField(allow_null=True)
    succeeded_trials = serializers.IntegerField()
    counts = serializers.DictField(child=serializers.IntegerField(), help_text="findings per verdict")
    findings = FindingSerializer(many=True)
    trials = FindingTrialSerializer(many=True, required=False, help_text="only with ?trials=1")


class SweepFindingsView(APIView):
    permission_classes = [IsResearcher]

    @extend_schema(
        tags=["sweeps"],
        parameters=[
            OpenApiParameter(
                "trials", bool, description="also return the succeeded trials' params and summaries"
            )
        ],
        responses={200: FindingsSerializer, 404: DetailSerializer},
        summary="The thesis' findings that apply to the sweep, each checked on its results",
    )
    def get(self, request: Request, pk: int) -> Response:
        sweep = visible_sweep(request, pk)
        with_trials = request.query_params.get("trials", "").lower() in ("1", "true", "yes", "on")
        return Response(sweep_findings(sweep, with_trials=with_trials))
