"""Outage schedules in human units (issue 37): periodic ``ON/OFF`` (``4s/1s``) or windows once from
the link's start (``10s-12s, 30s-35s``), also read from a file. ``Direction`` (``profile.py``) holds
and checks them; linkemu carries them (``outage=``, ``outages=``; docs/emulation.md, "Outages")."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from qoelab.errors import ParameterError
from qoelab.units import parse_duration

OUTAGE_MIN_S, OUTAGE_MAX_S = 0.001, 86400.0  # linkemu's bounds for each part of the schedule
# Outage windows: linkemu takes them on its command line, one argument of at most 128 KiB per
# direction, so 2000 windows (about 40 KB) is the bound.
OUTAGE_WINDOWS_MAX = 2000


def parse_outage(value: object, field: str = "outage") -> tuple[float, float] | None:
    """``'4s/1s'`` (up 4 s, then down 1 s, repeating) -> (on_s, off_s); empty -> None."""
    if value in (None, ""):
        return None
    parts = value.split("/") if isinstance(value, str) else value
    if not isinstance(parts, list | tuple) or len(parts) != 2:
        raise ParameterError(field, f"needs ON/OFF durations such as 4s/1s, got {value!r}")
    return (parse_duration(parts[0], f"{field}.on"), parse_duration(parts[1], f"{field}.off"))


def parse_outage_windows(value: object, field: str = "outage") -> tuple[tuple[float, float], ...] | None:
    """``'10s-12s, 30s-35s'`` (down from 10 s to 12 s after the link's start, and from 30 s to
    35 s) -> ((10.0, 12.0), (30.0, 35.0)); empty -> None."""
    if value in (None, ""):
        return None
    items = [x.strip() for x in value.split(",") if x.strip()] if isinstance(value, str) else value
    if not isinstance(items, list | tuple):
        raise ParameterError(field, f"needs START-END windows such as 10s-12s, 30s-35s, got {value!r}")
    windows = []
    for i, item in enumerate(items, start=1):
        parts = item.split("-") if isinstance(item, str) else item
        if not isinstance(parts, list | tuple) or len(parts) != 2:
            raise ParameterError(field, f"window {i}: needs START-END such as 10s-12s, got {item!r}")
        windows.append(
            (parse_duration(parts[0], f"{field}.window{i}"), parse_duration(parts[1], f"{field}.window{i}"))
        )
    return tuple(windows)


def read_outage_file(path: str | Path, field: str = "outage_file") -> str:
    """Outage windows from a file, one ``START END`` (or ``START-END``) per line, seconds or with
    units (``12``, ``12s``, ``500ms``), ``#`` comments -> the ``10s-12s, ...`` form; a bad line is
    one sentence naming it."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise ParameterError(
            field, f"{path}: cannot read it ({getattr(err, 'strerror', None) or err})"
        ) from None
    windows = []
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        parts = line.replace("-", " ").split()
        if len(parts) != 2:
            raise ParameterError(field, f"{path}: line {number}: needs START END, got {line[:40]!r}")
        start, end = (
            parse_duration(x if x[-1:].isalpha() else x + "s", f"{field} line {number}") for x in parts
        )
        windows.append(f"{start!r}s-{end!r}s")
    if not windows:
        raise ParameterError(field, f"{path}: no START END line")
    return ", ".join(windows)


def parse_outages(value: object, field: str = "outage") -> dict[str, Any]:
    """An outage in either form: periodic ``ON/OFF`` (``4s/1s``) or windows (``10s-12s, 30s-35s``)."""
    if isinstance(value, str) and "/" not in value and "-" in value:
        return {"outage": None, "outage_windows": parse_outage_windows(value, field)}
    return {"outage": parse_outage(value, field), "outage_windows": None}
