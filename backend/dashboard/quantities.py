"""Quantities as a person reads them: compact numbers and values in their units (the trial page,
the charts' axes, the template filters in ``templatetags.qoelab_dashboard``).

``qty`` shows a value in its unit with a readable prefix and the exact value in the title
(``{{ s.value|qty:"bit/s" }}`` -> 9.5 Mbit/s, title "9,500,000 bit/s"). The rules (docs/dashboard.md,
"The trial page"):

- bit/s and B scale by 1000: bit/s, kbit/s, Mbit/s, Gbit/s; B, kB, MB, GB (kB = 1000 B, as the charts).
- s (and ns, µs) scale to the largest of s, ms, µs, ns that keeps the number at least 1.
- ms stays ms, % stays % (the thesis' units: T in ms compares across trials as written).
- Anything else is a plain number with its unit as declared (sessions, ticks/bit) or none.
- Numbers keep 4 significant digits; from 1,000 on they are whole numbers with digit grouping
  (never an exponent, except below 0.001 where 3 significant digits are shown as 1.23e-05).
"""

from __future__ import annotations

import math
from datetime import UTC, datetime
from typing import Any

NOTHING = "–"
UNIX_TIME = "unix time"  # a ``*_at`` number: seconds since 1970 (shown as a UTC date)
SIGNIFICANT = 4

# Unit -> (the unit's size in the family's base unit, the family's ladder: (size, name), largest first).
_RATE = ((1e9, "Gbit/s"), (1e6, "Mbit/s"), (1e3, "kbit/s"), (1.0, "bit/s"))
_BYTES = ((1e9, "GB"), (1e6, "MB"), (1e3, "kB"), (1.0, "B"))
_TIME = ((1.0, "s"), (1e-3, "ms"), (1e-6, "µs"), (1e-9, "ns"))
SCALED: dict[str, tuple[float, tuple[tuple[float, str], ...]]] = {
    "bit/s": (1.0, _RATE),
    "B": (1.0, _BYTES),
    "s": (1.0, _TIME),
    "µs": (1e-6, _TIME),
    "ns": (1e-9, _TIME),
}


def is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _rounded(x: float) -> float:
    return float(f"{x:.{SIGNIFICANT}g}")


def format_number(x: float | int) -> str:
    """'12', '0.8734', '965.3', '1,234,567', '1.23e-05': 4 significant digits, grouping from 1,000."""
    if isinstance(x, int):
        return f"{x:,}"
    if not math.isfinite(x):
        return str(x)
    if x == 0:
        return "0"
    r = _rounded(x)
    if abs(r) >= 1000:
        return f"{x:,.0f}"
    if abs(r) < 1e-3:
        return f"{x:.3g}"
    decimals = max(0, SIGNIFICANT - 1 - math.floor(math.log10(abs(r))))
    text = f"{r:.{decimals}f}"
    return text.rstrip("0").rstrip(".") if "." in text else text


def exact_number(value: Any) -> str:
    """Every digit of the stored value, grouped: 123456.0 -> '123,456'; 0.1 -> '0.1'."""
    if isinstance(value, int):
        return f"{value:,}"
    if not math.isfinite(value):
        return str(value)
    if value == int(value) and abs(value) < 1e16:
        return f"{int(value):,}"
    return format(value, ",")  # the shortest text that reads back as this float (repr), grouped


def scale_for(unit: str, magnitude: float) -> tuple[float, str]:
    """(divide by, shown unit) for values of ``unit`` around ``magnitude`` (in ``unit``).

    Scaled families pick the largest prefix that keeps the rounded number at least 1; others are
    shown as they are.
    """
    if unit not in SCALED:
        return 1.0, unit
    size, ladder = SCALED[unit]
    base = abs(_rounded(magnitude * size)) if math.isfinite(magnitude) else 0.0
    if base == 0:
        return 1.0, unit
    step, name = next(((s, n) for s, n in ladder if base >= s), ladder[-1])
    return step / size, name


def _with_unit(text: str, unit: str) -> str:
    return f"{text} {unit}" if unit else text


def _unix_time(x: float) -> str | None:
    if 1e9 <= x < 1e11:  # 2001 … 5138: a timestamp, not a duration
        return datetime.fromtimestamp(x, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    return None


def format_quantity(value: Any, unit: str = "") -> str:
    """A value as a person reads it: 9.5e6, 'bit/s' -> '9.5 Mbit/s'; None -> '–'; True -> 'yes'."""
    if value is None or value == "":
        return NOTHING
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, list | tuple):
        return ", ".join(format_quantity(v, unit) for v in value) if value else "[]"
    if isinstance(value, dict):
        return "{}" if not value else str(value)
    if not is_number(value):
        return str(value)
    if unit == UNIX_TIME:
        return _unix_time(value) or format_number(value)
    if not math.isfinite(value):
        return _with_unit(str(value), unit)
    factor, shown = scale_for(unit, value)
    return _with_unit(format_number(value / factor if factor != 1.0 else value), shown)


def exact_quantity(value: Any, unit: str = "") -> str:
    """The title of a shown quantity: the stored value with every digit, in the declared unit."""
    if value is None:
        return "not recorded"
    if isinstance(value, bool):
        return "true" if value else "false"  # as the raw JSON spells it
    if isinstance(value, list | tuple):
        return ", ".join(exact_quantity(v, unit) for v in value) if value else "[]"
    if not is_number(value):
        return str(value)
    if unit == UNIX_TIME:
        return f"{exact_number(value)} s since 1970-01-01 UTC"
    return _with_unit(exact_number(value), unit)
