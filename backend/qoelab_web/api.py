"""API-wide pieces: the error shape every 4xx uses, and the exception handler producing it.

Every invalid input answers ``{"errors": [{"field": "grid.loss[1]", "message": "..."}], "detail":
"grid.loss[1]: ..."}`` so scripts and the UI can point at the field.
"""

from __future__ import annotations

from typing import Any

from rest_framework import serializers
from rest_framework.exceptions import ValidationError
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler

from qoelab.params import ParamsInvalid


class FieldErrorSerializer(serializers.Serializer):
    field = serializers.CharField()
    message = serializers.CharField()


class ErrorSerializer(serializers.Serializer):
    detail = serializers.CharField()
    errors = FieldErrorSerializer(many=True, required=False)


class DetailSerializer(serializers.Serializer):
    detail = serializers.CharField()


def flatten(detail: Any, prefix: str = "") -> list[dict[str, str]]:
    """DRF's nested error dict/list into ``[{field, message}]`` with dotted/indexed paths."""
    out: list[dict[str, str]] = []
    if isinstance(detail, dict):
        for key, value in detail.items():
            name = (
                prefix if key in ("non_field_errors", "__all__") else (f"{prefix}.{key}" if prefix else key)
            )
            out.extend(flatten(value, name))
    elif isinstance(detail, list):
        if all(not isinstance(x, dict | list) for x in detail):
            out.extend({"field": prefix or "body", "message": str(x)} for x in detail)
        else:
            for i, value in enumerate(detail):
                out.extend(flatten(value, f"{prefix}[{i}]"))
    else:
        out.append({"field": prefix or "body", "message": str(detail)})
    return out


def int_param(request: Any, name: str) -> int | None:
    """A whole-number query parameter (``?sweep=3``); None when absent, a 400 naming it when not a number."""
    raw = request.query_params.get(name)
    if raw in (None, ""):
        return None
    if not raw.isdigit():
        raise ValidationError({name: [f"must be a whole number, got {raw!r}"]})
    return int(raw)


def errors_response(errors: list[dict[str, str]], status: int = 400) -> Response:
    return Response(
        {"errors": errors, "detail": "; ".join(f"{e['field']}: {e['message']}" for e in errors)},
        status=status,
    )


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    if isinstance(exc, ParamsInvalid):
        return errors_response(exc.errors)
    if isinstance(exc, ValidationError):
        return errors_response(flatten(exc.detail))
    return drf_exception_handler(exc, context)
