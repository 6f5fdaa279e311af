"""POST /api/auth/token/ {username, password} -> {token}: an API token for scripts and the CLI.

Also the login form: both refuse with 429 + Retry-After past the failed-login limits
(qoelab_web/throttles.py). The token is stored only as a hash (accounts.ApiToken), so each call
issues a new one: the old ones keep working (the newest 20 per user are kept).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from django.conf import settings
from django.contrib.auth import views as auth_views
from django.contrib.auth.forms import AuthenticationForm
from django.core.exceptions import ValidationError as DjangoValidationError
from django.http import HttpRequest, HttpResponse
from drf_spectacular.utils import extend_schema
from rest_framework import exceptions, renderers, serializers
from rest_framework.authtoken.serializers import AuthTokenSerializer
from rest_framework.response import Response
from rest_framework.settings import api_settings
from rest_framework.views import APIView

from accounts.services import issue_token
from qoelab_web.api import ErrorSerializer
from qoelab_web.baseurl import BaseUrlMissing, site_base_url
from qoelab_web.throttles import count, hit, parse_rate, refused_wait


class TokenReplySerializer(serializers.Serializer):
    token = serializers.CharField()


class ObtainTokenView(APIView):
    # DRF's ObtainAuthToken's request and answer, but the token row keeps only a hash.
    throttle_classes = ()
    permission_classes = ()
    # DRF's view hard-codes its parsers; ours bound JSON depth and refuse NUL (docs/security.md).
    parser_classes = api_settings.DEFAULT_PARSER_CLASSES
    renderer_classes = (renderers.JSONRenderer,)
    serializer_class = AuthTokenSerializer

    @extend_schema(
        tags=["auth"],
        request=AuthTokenSerializer,
        responses={200: TokenReplySerializer, 400: ErrorSerializer, 429: ErrorSerializer},
        summary="Exchange a username and password for an API token (Authorization: Token <token>)",
    )
    def post(self, request, *args, **kwargs):  # type: ignore[no-untyped-def]
        serializer = AuthTokenSerializer(data=request.data, context={"request": request, "view": self})
        if not serializer.is_valid():
            if wait := refused_wait(request):
                raise exceptions.Throttled(wait, detail="Too many failed logins.")
            raise exceptions.ValidationError(serializer.errors)
        return Response({"token": issue_token(serializer.validated_data["user"])})


class ThrottledAuthenticationForm(AuthenticationForm):
    def get_invalid_login_error(self) -> DjangoValidationError:
        if wait := refused_wait(self.request):
            return DjangoValidationError(
                "Too many failed logins for this account or address: try again in %(wait)d s.",
                code="throttled",
                params={"wait": wait},
            )
        return super().get_invalid_login_error()


class LoginView(auth_views.LoginView):
    """/accounts/login/: Django's, with the throttled form (LoginThrottleMiddleware makes it a 429)."""

    authentication_form = ThrottledAuthenticationForm


class PasswordResetView(auth_views.PasswordResetView):
    """/accounts/password_reset/: Django's, with the mail's link built from ``QOELAB_BASE_URL``
    (never the request's Host header: the demo accepts any host, so a forged one put its own host in
    the link) and throttled per client address (``QOELAB_PASSWORD_RESETS_PER_ADDRESS``)."""

    def post(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        limit, period = parse_rate(
            settings.QOELAB_PASSWORD_RESETS_PER_ADDRESS, "QOELAB_PASSWORD_RESETS_PER_ADDRESS"
        )
        key = f"reset:addr:{request.META.get('REMOTE_ADDR')}"
        n, wait = count(key, period)
        if n >= limit:
            response = HttpResponse(f"Too many password resets from this address; try again in {wait} s.",
                                    status=429, content_type="text/plain")  # fmt: skip
            response["Retry-After"] = str(wait)
            return response
        hit(key, period)
        return super().post(request, *args, **kwargs)

    def form_valid(self, form: Any) -> HttpResponse:
        try:
            base = urlsplit(site_base_url(self.request))
        except BaseUrlMissing as exc:
            form.add_error(None, str(exc).replace("invite links", "password-reset links"))
            return self.form_invalid(form)
        self.extra_email_context = {
            **(self.extra_email_context or {}),
            "domain": base.netloc,
            "site_name": base.netloc,
            "protocol": base.scheme,
        }
        return super().form_valid(form)
