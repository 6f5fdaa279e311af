"""A per-evaluator submission limit (fixed window in Django's cache) shared by the pages and the API.

One real person rates a condition every minute or so; a script hammering the submit endpoint with a
leaked link is stopped. The rate is ``QOELAB_RATINGS_SUBMIT_RATE`` ("<count>/<sec|min|hour>").
"""

from __future__ import annotations

import os
import time

from django.conf import settings
from django.core.cache import cache

DEFAULT_RATE = "30/min"
PERIODS = {"s": 1, "sec": 1, "m": 60, "min": 60, "h": 3600, "hour": 3600}


def rate() -> tuple[int, int]:
    raw = getattr(settings, "QOELAB_RATINGS_SUBMIT_RATE", None) or os.environ.get(
        "QOELAB_RATINGS_SUBMIT_RATE", DEFAULT_RATE
    )
    count, _, period = str(raw).partition("/")
    if not count.strip().isdigit() or period.strip() not in PERIODS:
        raise ValueError(f"QOELAB_RATINGS_SUBMIT_RATE must look like 30/min, got {raw!r}")
    return int(count), PERIODS[period.strip()]


def allow(evaluator_id: int, bucket: str = "submit") -> tuple[bool, int]:
    """Count one request; (allowed, seconds until the window resets)."""
    limit, period = rate()
    window = int(time.time() // period)
    key = f"qoelab:ratings:{bucket}:{evaluator_id}:{window}"
    cache.add(key, 0, timeout=period + 5)
    try:
        n = cache.incr(key)
    except ValueError:  # evicted between add and incr
        cache.set(key, 1, timeout=period + 5)
        n = 1
    wait = period - int(time.time() % period)
    return n <= limit, wait
