"""Template filters for the dashboard: dictionary lookup and compact numbers."""

from __future__ import annotations

import math
from typing import Any

from django import template

register = template.Library()


@register.filter
def get(mapping: Any, key: str) -> Any:
    """{{ trial.params|get:name }}; empty string when absent."""
    if isinstance(mapping, dict):
        value = mapping.get(key)
        return "" if value is None else value
    return ""


@register.filter
def num(value: Any) -> str:
    """4 significant digits, exponent for very large/small values; '–' for nothing."""
    if value is None or value == "":
        return "–"
    try:
        x = float(value)
    except (TypeError, ValueError):
        return str(value)
    if not math.isfinite(x):
        return str(x)
    if x != 0 and (abs(x) >= 1e6 or abs(x) < 1e-3):
        return f"{x:.4g}"
    return f"{x:.4g}" if abs(x) < 1e4 else f"{x:,.0f}"


@register.filter
def seconds(value: Any) -> str:
    """A duration in seconds as '12.3 s' / '4 min 5 s'."""
    if value is None:
        return "–"
    s = float(value)
    if s < 90:
        return f"{s:.1f} s"
    m, s = divmod(round(s), 60)
    if m < 90:
        return f"{m} min {s} s"
    h, m = divmod(m, 60)
    return f"{h} h {m} min"
