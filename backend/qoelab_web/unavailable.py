"""The 500 handler: a database that does not answer is a 503 the caller can retry, not a crash.

While PostgreSQL restarts, every request that needs it fails with a driver error. Django would
answer 500 ("the server is broken"); this answers 503 with ``Retry-After`` and says that nothing
was saved. The evaluator's rating form is a plain POST, so the HTML answer carries the posted
fields in a "Send again" form: the evaluator's answer survives the restart without JavaScript,
and because submitting is idempotent (``ratings.flow.submit_ratings``) sending it twice stores it
once. The page is rendered without the request context (no session, no user): those need the
database too. Every other error keeps Django's own 500 page.
"""

from __future__ import annotations

import sys

from django.db import InterfaceError, OperationalError
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.template.loader import render_to_string
from django.templatetags.static import static
from django.views.defaults import server_error

RETRY_AFTER_S = 5
MESSAGE = "The lab's database is not answering (it may be restarting); nothing was saved."


def database_down(exc: BaseException | None) -> bool:
    # Walk the chain: Django wraps the driver's error, DRF and our code may wrap it again.
    while exc is not None:
        if isinstance(exc, OperationalError | InterfaceError):
            return True
        exc = exc.__cause__ or exc.__context__
    return False


def handler500(request: HttpRequest) -> HttpResponse:
    if not database_down(sys.exc_info()[1]):
        return server_error(request)
    if request.path_info.startswith("/api/"):
        response: HttpResponse = JsonResponse(
            {"detail": f"{MESSAGE} Try again in {RETRY_AFTER_S} s."}, status=503
        )
    else:
        fields = [(k, v) for k in request.POST for v in request.POST.getlist(k)] if request.POST else []
        html = render_to_string(
            "503.html",
            {
                "message": MESSAGE,
                "retry_after": RETRY_AFTER_S,
                "resend": request.method == "POST",
                "fields": fields,
                "action": request.get_full_path(),
                "css": static("qoelab/qoelab.css"),
            },
        )
        response = HttpResponse(html, status=503)
    response["Retry-After"] = str(RETRY_AFTER_S)
    response["Cache-Control"] = "no-store"
    return response
