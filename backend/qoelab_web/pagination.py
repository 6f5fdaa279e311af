"""List pagination: ``?limit=&offset=`` checked strictly (400 naming the parameter) and capped.

DRF's LimitOffsetPagination ignores a malformed limit and passes any size to the database, where
a limit or offset beyond bigint ends in a 500. Here both must be whole numbers in range.
"""

from __future__ import annotations

from typing import Any

from rest_framework.exceptions import ValidationError
from rest_framework.pagination import LimitOffsetPagination
from rest_framework.request import Request

MAX_LIMIT = 1000
MAX_OFFSET = 2**31 - 1


class BoundedLimitOffsetPagination(LimitOffsetPagination):
    max_limit = MAX_LIMIT

    @staticmethod
    def _whole(request: Request, name: str, lo: int, hi: int) -> int | None:
        raw = request.query_params.get(name)
        if raw is None or raw == "":
            return None
        if not (raw.isascii() and raw.isdigit()) or not lo <= int(raw) <= hi:
            raise ValidationError({name: [f"must be a whole number from {lo} to {hi}, got {raw[:40]!r}"]})
        return int(raw)

    def get_limit(self, request: Request) -> int | None:
        limit = self._whole(request, self.limit_query_param, 1, self.max_limit)
        return self.default_limit if limit is None else limit

    def get_offset(self, request: Request) -> int:
        return self._whole(request, self.offset_query_param, 0, MAX_OFFSET) or 0

    def get_schema_operation_parameters(self, view: Any) -> list[dict[str, Any]]:
        params = super().get_schema_operation_parameters(view)
        bounds = {
            self.limit_query_param: {"minimum": 1, "maximum": self.max_limit},
            self.offset_query_param: {"minimum": 0, "maximum": MAX_OFFSET},
        }
        for p in params:
            p["schema"] = {**p["schema"], **bounds.get(p["name"], {})}
        return params
