"""Template filters for the dashboard: dictionary lookup, compact numbers and quantities in units.

The rules live in ``dashboard.quantities``; these filters apply them in templates.

``{{ s.value|qty:"bit/s" }}`` -> 9.5 Mbit/s with the exact value in its title.
"""

from __future__ import annotations

import math
from typing import Any

from django import template
from django.utils.html import escape, format_html
from django.utils.safestring import SafeString, mark_safe

from dashboard import trialpage
from dashboard.quantities import (
    NOTHING,
    UNIX_TIME,
    exact_quantity,
    format_number,
    format_quantity,
    is_number,
)

register = template.Library()


@register.filter
def get(mapping: Any, key: str) -> Any:
    """{{ trial.params|get:name }}; empty string when absent."""
    if isinstance(mapping, dict):
        value = mapping.get(key)
        return "" if value is None else value
    return ""


@register.filter
def inline_code(text: str) -> SafeString:
    """Plain text with `backticks` around code (a job type's notes): escaped, the code in <code>."""
    parts = str(text).split("`")
    return mark_safe(  # noqa: S308 - every part is escaped here
        "".join(f"<code>{escape(p)}</code>" if i % 2 else escape(p) for i, p in enumerate(parts))
    )


@register.filter
def num(value: Any) -> str:
    """4 significant digits, exponent for very large/small values; '–' for nothing."""
    if value is None or value == "":
        return NOTHING
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
        return NOTHING
    s = float(value)
    if s < 90:
        return f"{s:.1f} s"
    m, s = divmod(round(s), 60)
    if m < 90:
        return f"{m} min {s} s"
    h, m = divmod(m, 60)
    return f"{h} h {m} min"


# ---- quantities in units ----------------------------------------------------------------------


@register.filter
def qty(value: Any, unit: str = "") -> SafeString:
    """``{{ value|qty:"bit/s" }}``: <span class="qty" title="exact value">9.5 Mbit/s</span>."""
    return format_html(
        '<span class="qty" title="{}">{}</span>',
        exact_quantity(value, unit or ""),
        format_quantity(value, unit),
    )


@register.filter
def qty_in(value: Any, column: Any) -> SafeString:
    """A cell of a column whose header names the shown unit: the number alone, scaled to the column.

    ``column`` has ``unit`` (declared) and ``factor`` (divide by, from ``scale_for``).
    """
    unit, factor = column["unit"], column["factor"]
    if is_number(value) and math.isfinite(value) and unit != UNIX_TIME:
        text = format_number(value / factor if factor != 1.0 else value)
    else:
        text = format_quantity(value, unit)
    return format_html('<span class="qty" title="{}">{}</span>', exact_quantity(value, unit), text)


# ---- the trial table ----------------------------------------------------------------------------


@register.simple_tag
def trial_places(sweep: Any, trials: Any) -> dict[str, Any]:
    """``{% trial_places sweep trials as places %}``: ``places.by_pk`` (trial pk -> Place: point and
    repetition, counted from 1) and ``places.points`` (how many grid points the sweep has)."""
    by_pk = trialpage.trial_places(sweep, trials)
    return {"by_pk": by_pk, "points": next(iter(by_pk.values())).points if by_pk else 0}
