"""POST /api/auth/token/ {username, password} -> {token}: an API token for scripts and the CLI."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.authtoken.views import ObtainAuthToken

from qoelab_web.api import ErrorSerializer


class TokenReplySerializer(serializers.Serializer):
    token = serializers.CharField()


class ObtainTokenView(ObtainAuthToken):
    @extend_schema(
        tags=["auth"],
        request=ObtainAuthToken.serializer_class,
        responses={200: TokenReplySerializer, 400: ErrorSerializer},
        summary="Exchange a username and password for an API token (Authorization: Token <token>)",
    )
    def post(self, request, *args, **kwargs):  # type: ignore[no-untyped-def]
        return super().post(request, *args, **kwargs)
