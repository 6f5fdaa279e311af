"""Artifact download for researchers (streamed from storage, never a public media URL)."""

from __future__ import annotations

from django.http import FileResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework.exceptions import NotFound
from rest_framework.request import Request
from rest_framework.views import APIView

from accounts.permissions import IsResearcher
from qoelab_web.api import DetailSerializer
from results import kinds
from results.models import Artifact


class ArtifactDownloadView(APIView):
    permission_classes = [IsResearcher]

    @extend_schema(
        tags=["trials"],
        responses={
            (200, "application/octet-stream"): OpenApiResponse(OpenApiTypes.BINARY),
            404: DetailSerializer,
        },
        summary="Download one artifact of a trial",
    )
    def get(self, request: Request, artifact_id: int) -> FileResponse:
        qs = Artifact.objects.select_related("trial__sweep__experiment").visible_to(request.user)
        artifact = qs.filter(pk=artifact_id).first()
        if artifact is None:
            raise NotFound(f"no artifact {artifact_id}")
        try:
            return kinds.file_response(artifact)  # its kind's content type, as an attachment
        except FileNotFoundError:
            raise NotFound(f"the file of artifact {artifact_id} is missing from storage (pruned?)") from None
