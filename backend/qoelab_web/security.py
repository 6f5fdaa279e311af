"""The Content-Security-Policy every response carries (docs/security.md).

Pages load scripts and styles only from this origin's static files: no inline script, no style
attribute, no ``eval``, no plugin, no other site framing them. So a file that slipped into a page's
origin could not run anything, and a template that grows an inline script fails in the browser
tests (they fail on any console error, which is where Chromium reports a violation).

Allowances, each for a named page:
- ``connect-src``: the live evaluator page's noVNC / spice-html5 clients open a WebSocket to the
  proxy the lab worker runs, on another host and port (``QOELAB_CSP_CONNECT_SRC``, default any
  ``ws:``/``wss:``; narrow it to the lab hosts in a deployment).
- ``media-src``/``img-src`` ``blob:``: spice-html5 plays video streams and audio from MediaSource
  blobs; ``data:`` images are cursors and icons (noVNC, the admin, Swagger UI).
- ``frame-src 'self'``: the live reference pages in the evaluator page's iframe, which set a
  policy of their own (``ratings.evaluator_views.LIVE_REFERENCE_CSP``).
- pages under ``/api/`` (Swagger UI at ``/api/docs/``, Redoc, DRF's browsable API): ``style-src
  'unsafe-inline'`` (Swagger UI and Redoc inject ``<style>`` elements, DRF's templates use style
  attributes) and a ``blob:`` worker (Redoc); still no inline script.

A view that sets its own policy keeps it (stored files: ``results.kinds.FILE_CSP``).
"""

from __future__ import annotations

from collections.abc import Callable

from django.conf import settings
from django.http import HttpRequest, HttpResponse

HEADER = "Content-Security-Policy"
API_PAGES = "/api/"


def _join(directives: dict[str, str]) -> str:
    return "; ".join(f"{name} {value}" for name, value in directives.items())


def page_policy(connect_src: str) -> dict[str, str]:
    return {
        "default-src": "'self'",
        "script-src": "'self'",
        "style-src": "'self'",
        "img-src": "'self' data: blob:",
        "media-src": "'self' blob:",
        "font-src": "'self'",
        "connect-src": f"'self' {connect_src}".strip(),
        "worker-src": "'self'",
        "frame-src": "'self'",
        "frame-ancestors": "'none'",
        "object-src": "'none'",
        "base-uri": "'none'",
        "form-action": "'self'",
    }


class ContentSecurityPolicyMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response
        policy = page_policy(getattr(settings, "QOELAB_CSP_CONNECT_SRC", "ws: wss:"))
        self.page = _join(policy)
        self.api_pages = _join(
            {**policy, "style-src": "'self' 'unsafe-inline'", "worker-src": "'self' blob:"}
        )

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if HEADER not in response:
            response[HEADER] = self.api_pages if request.path.startswith(API_PAGES) else self.page
        return response
