"""Template filters for the campaign pages: Mbit/s, DMOS cells."""

from __future__ import annotations

from typing import Any

from django import template

register = template.Library()


@register.filter
def mbit(bps: Any) -> str:
    """bit/s as 'x.xx Mbit/s'; '–' for nothing."""
    if bps in (None, ""):
        return "–"
    return f"{float(bps) / 1e6:.3g} Mbit/s"


@register.filter
def dmos_cell(cell: Any) -> str:
    """'3.40 ± 0.56 (n=5)'; no ± for n = 1; '–' without ratings."""
    if not cell or not cell.get("n"):
        return "–"
    text = f"{cell['mean']:.2f}"
    if cell.get("half_width") is not None:
        text += f" ± {cell['half_width']:.2f}"
    return f"{text} (n={cell['n']})"


@register.filter
def fixed(value: Any, digits: int = 3) -> str:
    if value is None or value == "":
        return "–"
    return f"{float(value):.{int(digits)}f}"
