"""The OpenAPI schema class: documents the answers the API really gives (issue 14, finding 8).

drf-spectacular documents what a view declares. Here every operation also gets the error answers
the API-wide rules produce, unless the view declared its own:

- 400 ``Error`` everywhere: any query string or body may break the input rules of
  ``qoelab_web.parsers`` (NUL, lone surrogates, nesting), and list pages check ``limit``/``offset``;
- 403 ``Detail`` where a permission is needed, and 401 when the view's first authentication scheme
  sends a ``WWW-Authenticate`` challenge (DRF answers 403 otherwise);
- 404 ``Detail`` for a path with parameters (an unknown id or name);
- 429 ``Detail`` where the view has throttles.

A list is documented as a page only where DRF paginates it: the ``list`` action.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.openapi import AutoSchema as SpectacularAutoSchema
from rest_framework.permissions import AllowAny

JSON = ["application/json"]


class AutoSchema(SpectacularAutoSchema):
    def _get_paginator(self) -> Any:
        # DRF's ListModelMixin.list is the only place that paginates; an action returning a list
        # (POST /api/campaigns/{id}/invite/) answers a plain array.
        if getattr(self.view, "action", "list") != "list":
            return None
        return super()._get_paginator()

    def _error_responses(self) -> dict[str, Any]:
        from qoelab_web.api import DetailSerializer, ErrorSerializer

        view = self.view
        out: dict[str, Any] = {"400": ErrorSerializer}
        if not all(isinstance(p, AllowAny) for p in view.get_permissions()):
            out["403"] = DetailSerializer
            authenticators = view.get_authenticators()
            if authenticators and authenticators[0].authenticate_header(view.request) is not None:
                out["401"] = DetailSerializer
        if "{" in self.path:
            out["404"] = DetailSerializer
        if view.get_throttles():
            out["429"] = DetailSerializer
        return out

    def _get_response_bodies(self, direction: str = "response") -> dict[str, Any]:
        responses = super()._get_response_bodies(direction)
        if direction != "response":
            return responses
        for code, serializer in self._error_responses().items():
            if code not in responses:
                responses[code] = self._get_response_for_code(serializer, code, JSON, direction)
        return dict(sorted(responses.items()))
