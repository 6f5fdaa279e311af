"""/api/studies/: imported rating sets (researchers, owner-only). Created from the file's text in
JSON; read-only afterwards; ``GET /api/studies/<id>/`` carries the analysis (ratings/studies.py)."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from drf_spectacular.utils import extend_schema, extend_schema_view
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.request import Request
from rest_framework.response import Response

from accounts.permissions import IsResearcher
from qoelab_web.api import ErrorSerializer, errors_response
from ratings import studies
from ratings.choices import RatingMethod, StudyFormat
from ratings.models import ImportedStudy

FIELDS = ["id", "name", "source", "method", "file_format", "scale_low", "scale_high", "file_name",
          "n_votes", "n_raters", "n_stimuli", "created"]  # fmt: skip


class StudySerializer(serializers.ModelSerializer):
    class Meta:
        model = ImportedStudy
        fields = FIELDS
        read_only_fields = FIELDS


class StudyDetailSerializer(StudySerializer):
    quantity = serializers.SerializerMethodField(
        help_text='what the scores are: "ACR MOS", "ACR-HR DMOS", "DCR score"'
    )
    analysis = serializers.SerializerMethodField(
        help_text="{mean, p910}: each in `qoelab ratings analyze --json`'s shape, or {error} if it cannot fit"
    )

    class Meta(StudySerializer.Meta):
        fields = [*FIELDS, "quantity", "analysis"]
        read_only_fields = fields

    def get_quantity(self, obj: ImportedStudy) -> str:
        return studies.report.METHODS[obj.method]

    def get_analysis(self, obj: ImportedStudy) -> dict[str, Any]:
        return studies.analyze(obj)


class StudyCreateSerializer(serializers.Serializer):
    name = serializers.CharField(max_length=200)
    source = serializers.CharField(required=False, allow_blank=True, default="")
    votes_csv = serializers.CharField(trim_whitespace=False, max_length=studies.MAX_FILE_BYTES,
                                      help_text="the rating file's text (CSV, UTF-8)")  # fmt: skip
    file_name = serializers.CharField(required=False, allow_blank=True, default="", max_length=255)
    file_format = serializers.ChoiceField(choices=StudyFormat.choices, default=StudyFormat.LONG)
    method = serializers.ChoiceField(choices=RatingMethod.choices, default=RatingMethod.ACR)
    scale_low = serializers.FloatField(default=1.0, min_value=-1e6, max_value=1e6)
    scale_high = serializers.FloatField(default=5.0, min_value=-1e6, max_value=1e6)


@extend_schema(tags=["studies"])
@extend_schema_view(
    create=extend_schema(
        request=StudyCreateSerializer, responses={201: StudyDetailSerializer, 400: ErrorSerializer}
    ),
    retrieve=extend_schema(responses={200: StudyDetailSerializer}),
    destroy=extend_schema(responses={204: None}),
)
class StudyViewSet(
    mixins.ListModelMixin, mixins.RetrieveModelMixin, mixins.DestroyModelMixin, viewsets.GenericViewSet
):
    """Rating sets collected elsewhere, imported read-only and analysed like a campaign's ratings."""

    queryset = ImportedStudy.objects.none()
    serializer_class = StudySerializer
    permission_classes = [IsResearcher]

    def get_queryset(self) -> QuerySet:
        qs = ImportedStudy.objects.visible_to(self.request.user)
        return qs.defer("votes_csv") if self.action == "list" else qs

    def get_serializer_class(self) -> type[serializers.Serializer]:
        return StudyDetailSerializer if self.action == "retrieve" else StudySerializer

    def create(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        body = StudyCreateSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        d = body.validated_data
        try:
            study = studies.import_study(
                request.user, name=d["name"], text=d["votes_csv"], file_format=d["file_format"],
                method=d["method"], scale=(d["scale_low"], d["scale_high"]), source=d["source"],
                file_name=d["file_name"],
            )  # fmt: skip
        except studies.StudyError as err:
            field = "votes_csv" if err.field == "file" else err.field
            return errors_response([{"field": field, "message": err.message}])
        return Response(StudyDetailSerializer(study).data, status=status.HTTP_201_CREATED)
