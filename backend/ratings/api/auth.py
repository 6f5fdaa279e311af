"""Evaluator authentication for the API: ``Authorization: Evaluator <token>`` and nothing else.

Evaluator views accept only this scheme (no session, no user token), and researcher views never
accept it, so a rating link opens exactly one evaluator's own tasks.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import AnonymousUser
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from rest_framework import authentication, exceptions, permissions
from rest_framework.request import Request

from ratings.invitations import evaluator_for_token
from ratings.models import Evaluator

KEYWORD = "Evaluator"


class EvaluatorTokenAuthentication(authentication.BaseAuthentication):
    def authenticate(self, request: Request) -> tuple[Any, Evaluator] | None:
        header = authentication.get_authorization_header(request).decode("latin-1").split()
        if not header or header[0] != KEYWORD:
            return None
        if len(header) != 2:
            raise exceptions.AuthenticationFailed("expected 'Authorization: Evaluator <token>'")
        evaluator = evaluator_for_token(header[1])
        if evaluator is None:
            raise exceptions.AuthenticationFailed("this rating link is not valid (it may have been replaced)")
        return AnonymousUser(), evaluator

    def authenticate_header(self, request: Request) -> str:
        return KEYWORD


class IsEvaluator(permissions.BasePermission):
    message = "needs an evaluator link token (Authorization: Evaluator <token>)"

    def has_permission(self, request: Request, view: Any) -> bool:
        return isinstance(request.auth, Evaluator)


class EvaluatorTokenScheme(OpenApiAuthenticationExtension):
    target_class = "ratings.api.auth.EvaluatorTokenAuthentication"
    name = "evaluatorToken"

    def get_security_definition(self, auto_schema: Any) -> dict[str, str]:
        return {
            "type": "apiKey",
            "in": "header",
            "name": "Authorization",
            "description": "Evaluator link token: `Authorization: Evaluator <token>` (the invitation link)",
        }
