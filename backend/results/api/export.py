"""GET /api/sweeps/<id>/export/: a sweep's ended trials as result rows (``results.export``)."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from accounts.permissions import IsResearcher
from qoelab_web.api import DetailSerializer
from results.api.access import visible_sweep
from results.export import sweep_rows


class ExportSerializer(serializers.Serializer):
    sweep = serializers.IntegerField()
    job_type = serializers.CharField()
    finished = serializers.BooleanField(help_text="no trial is pending, queued or running")
    open_trials = serializers.IntegerField(help_text="trials not yet ended (not exported)")
    rows = serializers.ListField(
        child=serializers.DictField(),
        help_text="one per succeeded or failed trial: sweep, trial, index, repetition, status, params "
        "(resolved, SI), params_as_written, summary, host {cpu, bogomips, name, kernel}, provenance, "
        "link, started_at, finished_at, and error for a failed trial",
    )


class SweepExportView(APIView):
    permission_classes = [IsResearcher]

    @extend_schema(
        tags=["sweeps"],
        responses={200: ExportSerializer, 404: DetailSerializer},
        summary="The sweep's ended trials as result rows (what `qoelab sweep export` writes)",
    )
    def get(self, request: Request, pk: int) -> Response:
        return Response(sweep_rows(visible_sweep(request, pk)))
