"""The clicks file: when the slow-motion driver clicked, as input to the packet analysis.

Format (JSON, documented in docs/rd-analysis.md)::

    {"version": 1, "clock": "epoch",
     "clicks": [{"index": 0, "t": 1700000000.123456, "page": 3, "ratio": 0.5, "x": 412, "y": 230,
                 "pixel_stable_t": 1700000000.9, "timed_out": false}, ...]}

``t`` is the moment the driver sent the click, in epoch seconds on the same clock as the capture
(the driver and the capture run on the same host). Only ``index`` and ``t`` are required.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from qoelab.errors import ParameterError

FORMAT_VERSION = 1
CLOCK = "epoch"


@dataclass(frozen=True, slots=True)
class Click:
    """One click of the driver. ``t`` is the earliest possible start of its screen update."""

    index: int
    t: float
    page: int | None = None
    ratio: float | None = None
    x: int | None = None
    y: int | None = None
    pixel_stable_t: float | None = None
    timed_out: bool = False

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def _field(where: str, name: str) -> str:
    return f"{where}.{name}"


def _opt_number(raw: dict, where: str, name: str, kind: type, lo: float | None = None) -> Any:
    value = raw.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ParameterError(_field(where, name), f"expected a number, got {value!r}")
    if kind is int and not float(value).is_integer():
        raise ParameterError(_field(where, name), f"expected an integer, got {value!r}")
    if not math.isfinite(value):
        raise ParameterError(_field(where, name), f"must be finite, got {value!r}")
    if lo is not None and value < lo:
        raise ParameterError(_field(where, name), f"must be at least {lo:g}, got {value!r}")
    return kind(value)


def click_from_json(raw: Any, where: str = "click") -> Click:
    """Validate one click object; errors name the field (``clicks[3].t``) and the bound."""
    if not isinstance(raw, dict):
        raise ParameterError(where, f"expected an object, got {type(raw).__name__}")
    unknown = set(raw) - {f for f in Click.__slots__}
    if unknown:
        raise ParameterError(where, f"unknown field(s) {', '.join(sorted(unknown))}")
    for required in ("index", "t"):
        if raw.get(required) is None:
            raise ParameterError(_field(where, required), "is required")
    ratio = _opt_number(raw, where, "ratio", float, 0.0)
    if ratio is not None and ratio > 1:
        raise ParameterError(_field(where, "ratio"), f"must be at most 1, got {ratio!r}")
    timed_out = raw.get("timed_out", False)
    if not isinstance(timed_out, bool):
        raise ParameterError(_field(where, "timed_out"), f"expected true or false, got {timed_out!r}")
    return Click(
        index=_opt_number(raw, where, "index", int, 0),
        t=_opt_number(raw, where, "t", float, 0.0),
        page=_opt_number(raw, where, "page", int, 0),
        ratio=ratio,
        x=_opt_number(raw, where, "x", int),
        y=_opt_number(raw, where, "y", int),
        pixel_stable_t=_opt_number(raw, where, "pixel_stable_t", float, 0.0),
        timed_out=timed_out,
    )


def clicks_from_json(doc: Any) -> list[Click]:
    """Validate a whole clicks document; returns the clicks sorted by time."""
    if not isinstance(doc, dict):
        raise ParameterError("clicks file", "expected a JSON object with 'version' and 'clicks'")
    if doc.get("version") != FORMAT_VERSION:
        raise ParameterError("version", f"must be {FORMAT_VERSION}, got {doc.get('version')!r}")
    if doc.get("clock", CLOCK) != CLOCK:
        raise ParameterError("clock", f"must be {CLOCK!r} (epoch seconds), got {doc.get('clock')!r}")
    raw_clicks = doc.get("clicks")
    if not isinstance(raw_clicks, list):
        raise ParameterError("clicks", "expected a list of click objects")
    clicks = [click_from_json(c, f"clicks[{i}]") for i, c in enumerate(raw_clicks)]
    seen: set[int] = set()
    for i, c in enumerate(clicks):
        if c.index in seen:
            raise ParameterError(f"clicks[{i}].index", f"index {c.index} appears twice")
        seen.add(c.index)
    return sorted(clicks, key=lambda c: c.t)


def clicks_to_json(clicks: list[Click]) -> dict[str, Any]:
    return {"version": FORMAT_VERSION, "clock": CLOCK, "clicks": [c.to_json() for c in clicks]}


def load_clicks(path: str | os.PathLike[str]) -> list[Click]:
    """Read and validate a clicks file."""
    p = Path(path)
    try:
        doc = json.loads(p.read_text())
    except FileNotFoundError:
        raise ParameterError("clicks", f"file {str(p)!r} does not exist") from None
    except json.JSONDecodeError as err:
        raise ParameterError("clicks", f"{str(p)!r} is not valid JSON: {err}") from None
    return clicks_from_json(doc)


def save_clicks(path: str | os.PathLike[str], clicks: list[Click]) -> None:
    """Write a clicks file atomically (the driver may be killed mid-run)."""
    p = Path(path)
    tmp = p.with_name(p.name + ".tmp")
    tmp.write_text(json.dumps(clicks_to_json(clicks), indent=1) + "\n")
    os.replace(tmp, p)
