"""Absolute links sent outside the site (evaluators' invite links) come from ``QOELAB_BASE_URL``.

``request.build_absolute_uri`` trusts the request's Host header: with ``QOELAB_ALLOWED_HOSTS=*`` (the
demo's) or a proxy that passes any Host, a forged header would put someone else's host in front of
a fresh evaluator token. Without the setting, the request is used only when ``QOELAB_DEBUG`` is true
(a development machine); otherwise :class:`BaseUrlMissing` says which setting to add, before any
evaluator is created.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core import checks
from django.http import HttpRequest


class BaseUrlMissing(Exception):
    message = (
        "invite links need QOELAB_BASE_URL, the address evaluators reach this site at "
        "(e.g. https://lab.example.org): set it in the web service's environment and restart it"
    )

    def __init__(self) -> None:
        super().__init__(self.message)


def site_base_url(request: HttpRequest) -> str:
    """``scheme://host[:port]`` without a trailing slash; raises :class:`BaseUrlMissing`."""
    if settings.QOELAB_BASE_URL:
        return settings.QOELAB_BASE_URL
    if settings.DEBUG:
        return request.build_absolute_uri("/").rstrip("/")
    raise BaseUrlMissing()


@checks.register(checks.Tags.security, deploy=True)
def check_base_url(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """``manage.py check --deploy`` names a missing or plain-HTTP base URL before an invite fails."""
    base = settings.QOELAB_BASE_URL
    if not base:
        return [checks.Warning(BaseUrlMissing.message, id="qoelab.W001")]
    if settings.SECURE_SSL_REDIRECT and base.startswith("http://"):
        return [
            checks.Warning(
                f"QOELAB_BASE_URL is {base} but the site redirects to HTTPS: invite links should be https://",
                id="qoelab.W002",
            )
        ]
    return []
