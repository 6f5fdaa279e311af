"""Counters in the shared cache behind the login throttle (and the evaluator limit's cache).

Every gunicorn worker and every web container counts in the same place: ``CACHES["default"]`` is
Redis (``QOELAB_CACHE_URL``, default ``REDIS_URL``), never per-process memory, where each of N
workers would allow the whole rate. Windows are fixed (``<count>/<n><unit>``, e.g. ``10/15min``).

Login: failed passwords are counted per username and per client address, on every path that checks
a password (the login form, the admin's, ``POST /api/auth/token/``), because they all go through
``ThrottledModelBackend``. Past the limit the password is not even checked and the answer is 429
with ``Retry-After``.
"""

from __future__ import annotations

import hashlib
import re
import time
from typing import Any

from django.conf import settings
from django.contrib.auth.backends import ModelBackend
from django.core.cache import cache
from django.core.exceptions import ImproperlyConfigured, PermissionDenied

PERIODS = {"s": 1, "sec": 1, "m": 60, "min": 60, "h": 3600, "hour": 3600}
RATE_RE = re.compile(r"^\s*(\d+)\s*/\s*(\d*)\s*([a-z]+)\s*$")
# The attribute a refused login leaves on the request, read by the views and LoginThrottleMiddleware.
WAIT_ATTR = "qoelab_login_wait"


def parse_rate(raw: str, name: str = "rate") -> tuple[int, int]:
    """``"10/15min"`` -> (10, 900): at most 10 in each 900-second window."""
    m = RATE_RE.match(str(raw).lower())
    if not m or m.group(3) not in PERIODS or m.group(2) == "0":
        raise ImproperlyConfigured(f"{name} must look like 30/min or 10/15min, got {raw!r}")
    return int(m.group(1)), int(m.group(2) or 1) * PERIODS[m.group(3)]


def _window(key: str, period: int) -> tuple[str, int]:
    now = time.time()
    return f"throttle:{key}:{period}:{int(now // period)}", max(1, period - int(now % period))


def count(key: str, period: int) -> tuple[int, int]:
    """(hits in the current window, seconds until it ends)."""
    ckey, wait = _window(key, period)
    return int(cache.get(ckey) or 0), wait


def hit(key: str, period: int) -> int:
    """Count one hit in the current window; returns the count so far (atomic INCR in Redis)."""
    ckey, _ = _window(key, period)
    cache.add(ckey, 0, timeout=period + 5)
    try:
        return cache.incr(ckey)
    except ValueError:  # expired between add and incr
        cache.set(ckey, 1, timeout=period + 5)
        return 1


def reset(key: str, period: int) -> None:
    cache.delete(_window(key, period)[0])


def _limits() -> tuple[tuple[int, int], tuple[int, int]]:
    return (
        parse_rate(settings.QOELAB_LOGIN_FAILURES_PER_USER, "QOELAB_LOGIN_FAILURES_PER_USER"),
        parse_rate(settings.QOELAB_LOGIN_FAILURES_PER_ADDRESS, "QOELAB_LOGIN_FAILURES_PER_ADDRESS"),
    )


def _keys(request: Any, username: str) -> tuple[str, str | None]:
    # Hashed: a key never carries a username (or a password typed into the username field) in clear.
    user = "login:user:" + hashlib.sha256(username.strip().lower().encode()).hexdigest()[:32]
    addr = request.META.get("REMOTE_ADDR") if request is not None else None
    return user, (f"login:addr:{addr}" if addr else None)


def login_wait(request: Any, username: str) -> int:
    """0 when a password may be checked now, else the seconds until the refusing window ends."""
    (user_limit, user_period), (addr_limit, addr_period) = _limits()
    user_key, addr_key = _keys(request, username)
    waits = []
    n, wait = count(user_key, user_period)
    if n >= user_limit:
        waits.append(wait)
    if addr_key is not None:
        n, wait = count(addr_key, addr_period)
        if n >= addr_limit:
            waits.append(wait)
    return max(waits, default=0)


def login_failed(request: Any, username: str) -> None:
    (_, user_period), (_, addr_period) = _limits()
    user_key, addr_key = _keys(request, username)
    hit(user_key, user_period)
    if addr_key is not None:
        hit(addr_key, addr_period)


def login_succeeded(request: Any, username: str) -> None:
    # The owner got in: their typos no longer count against them (the address's count stays).
    (_, user_period), _ = _limits()
    reset(_keys(request, username)[0], user_period)


def refused_wait(request: Any) -> int:
    """Seconds to wait if this request's login was refused by the throttle, else 0."""
    return int(getattr(request, WAIT_ATTR, 0) or getattr(getattr(request, "_request", None), WAIT_ATTR, 0))


class ThrottledModelBackend(ModelBackend):
    """Django's username/password check, refused (without checking) past the failure limits."""

    def authenticate(
        self, request: Any, username: str | None = None, password: str | None = None, **kwargs: Any
    ):  # type: ignore[no-untyped-def]
        if username is None:
            username = kwargs.get(self.get_user_model_username_field())
        if username is None or password is None:
            return None
        wait = login_wait(request, username)
        if wait:
            for r in (request, getattr(request, "_request", None)):  # DRF's Request wraps Django's
                if r is not None:
                    setattr(r, WAIT_ATTR, wait)
            raise PermissionDenied("too many failed logins")  # authenticate() stops at this
        user = super().authenticate(request, username=username, password=password, **kwargs)
        if user is None:
            login_failed(request, username)
        else:
            login_succeeded(request, username)
        return user

    @staticmethod
    def get_user_model_username_field() -> str:
        from django.contrib.auth import get_user_model

        return get_user_model().USERNAME_FIELD


class LoginThrottleMiddleware:
    """A form page that re-rendered after a throttled login answers 429 with Retry-After."""

    def __init__(self, get_response: Any) -> None:
        self.get_response = get_response

    def __call__(self, request: Any) -> Any:
        response = self.get_response(request)
        wait = refused_wait(request)
        if wait:
            if response.status_code < 300:
                response.status_code = 429
            if response.status_code == 429:
                response["Retry-After"] = str(wait)
        return response
