"""API-wide request and response rules that no single view owns.

- A query string holding text PostgreSQL cannot store (a NUL) answers 400 naming the parameter,
  by the same rule as request bodies (``qoelab_web.parsers``).
- Every error under /api/ is JSON ``{"detail": ...}``: an unknown URL, a path converter that does
  not match (``/api/hosts/trials/-1/claim/``) or a form body past Django's size limit would
  otherwise get Django's HTML page.
"""

from __future__ import annotations

from collections.abc import Callable

from django.http import HttpRequest, HttpResponse, JsonResponse

from qoelab_web.parsers import query_problems


def _is_api(request: HttpRequest) -> bool:
    return request.path_info.startswith("/api/")


class ApiInputMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if _is_api(request) and (problems := query_problems(request.GET)):
            return JsonResponse(
                {"errors": problems, "detail": "; ".join(f"{p['field']}: {p['message']}" for p in problems)},
                status=400,
            )
        response = self.get_response(request)
        if (
            response.status_code >= 400
            and _is_api(request)
            and not hasattr(response, "accepted_renderer")  # DRF answered it: JSON, or HTML asked for
            and not response.get("Content-Type", "").startswith("application/json")
        ):
            return _as_json(request, response)
        return response


def _as_json(request: HttpRequest, response: HttpResponse) -> JsonResponse:
    """Django's own error page (a form body past DATA_UPLOAD_MAX_MEMORY_SIZE is its HTML 400) as
    the API's JSON, same status and headers such as Retry-After and Allow (issue 33)."""
    if response.status_code == 404:
        detail = f"no API endpoint or object at {request.path_info}"
    elif response.status_code == 400:
        detail = (
            "the request could not be read: its body is malformed or larger than this endpoint takes "
            "(forms: at most QOELAB_MAX_REQUEST_BYTES; JSON: see docs/security.md)"
        )
    else:
        detail = f"{response.status_code} {response.reason_phrase}"
    out = JsonResponse({"detail": detail}, status=response.status_code)
    for header in ("Retry-After", "Allow", "WWW-Authenticate"):
        if header in response:
            out[header] = response[header]
    return out
