"""The client's address when the web server sits behind the lab's buffering proxy.

``make demo`` and docker-compose put nginx in front of gunicorn (docs/security.md, "The web tier"):
nginx reads every request completely before gunicorn sees it, so gunicorn's ``REMOTE_ADDR`` is the
proxy's. The proxy overwrites ``X-Forwarded-For`` with the one address it saw, and with
``QOELAB_BEHIND_PROXY=true`` this middleware makes that address ``REMOTE_ADDR``, which the
per-address login and password-reset limits count by. Without the setting the header is ignored:
a client talking to gunicorn directly could otherwise pick a new address for every request.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable

from django.conf import settings
from django.http import HttpRequest, HttpResponse


def forwarded_client(header: str) -> str | None:
    """The last address in an ``X-Forwarded-For`` value (the one our proxy wrote), or None."""
    last = header.rsplit(",", 1)[-1].strip()
    try:
        return str(ipaddress.ip_address(last))
    except ValueError:
        return None


class ProxyClientAddressMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if settings.QOELAB_BEHIND_PROXY:
            client = forwarded_client(request.META.get("HTTP_X_FORWARDED_FOR", ""))
            if client is not None:
                request.META["REMOTE_ADDR"] = client
        return self.get_response(request)
