"""GET /api/sweeps/<id>/tables/: the job type's results tables in a paper's layout (Tables 6.1-6.3)."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from accounts.permissions import IsResearcher
from experiments import jobtypes
from qoelab_web.api import DetailSerializer
from results.api.access import visible_sweep
from results.tables import sweep_tables


class TableCellSerializer(serializers.Serializer):
    mean = serializers.CharField(allow_null=True, help_text="formatted mean (null: no trial in this cell)")
    ci = serializers.CharField(allow_null=True, help_text="half width of the 95 % Student-t interval")
    n = serializers.IntegerField(help_text="succeeded trials behind the mean")
    value = serializers.FloatField(required=False, help_text="the unrounded mean")
    reference = serializers.CharField(allow_null=True, help_text="the paper's value for this cell")


class TableRowSerializer(serializers.Serializer):
    label = serializers.CharField(help_text="the row, e.g. '100 Mbit/s +50 ms'")
    cells = TableCellSerializer(many=True, help_text="one per column, in the order of columns")


class TableSerializer(serializers.Serializer):
    key = serializers.CharField()
    title = serializers.CharField()
    y = serializers.CharField(help_text="the summary metric in the cells")
    columns = serializers.ListField(child=serializers.CharField())
    rows = TableRowSerializer(many=True)
    reference_title = serializers.CharField(help_text="where the bracketed values come from")


class SweepTablesSerializer(serializers.Serializer):
    sweep = serializers.IntegerField()
    tables = TableSerializer(many=True, help_text="the job type's tables with at least one cell here")


class SweepTablesView(APIView):
    permission_classes = [IsResearcher]

    @extend_schema(
        tags=["sweeps"],
        responses={200: SweepTablesSerializer, 404: DetailSerializer},
        summary="The sweep's results in the layout of the paper's tables, the paper's values beside",
    )
    def get(self, request: Request, pk: int) -> Response:
        sweep = visible_sweep(request, pk)
        return Response({"sweep": sweep.pk, "tables": sweep_tables(sweep, jobtypes.get_job(sweep.job_type))})
