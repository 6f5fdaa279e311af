"""Human units for link parameters: ``10mbit``, ``50ms``, ``0.5%`` to SI values.

Rates follow tc(8): ``bit`` suffixes are bits per second with SI prefixes (k = 1000), ``bps`` means
*bytes* per second as in tc. Plain numbers are already SI (bit/s, seconds, fraction for loss is NOT
accepted: a bare loss number is a percentage, as tc netem reads it).

Only ASCII is read: ``１０mbit`` (full-width digits), ``10 mbit`` with a no-break space or Arabic-Indic
digits are refused with the ASCII form to write instead, never converted silently (docs/security.md,
"Spec files (YAML)"): what a trial stores as written is then what its parameters say.
"""

from __future__ import annotations

import math
import re
import unicodedata

from qoelab.errors import ParameterError

_NUM = r"([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|nan|NaN|inf|-inf)"

_RATE_UNITS = {
    "": 1.0,
    "bit": 1.0,
    "kbit": 1e3,
    "mbit": 1e6,
    "gbit": 1e9,
    "tbit": 1e12,
    "bps": 8.0,
    "kbps": 8e3,
    "mbps": 8e6,
    "gbps": 8e9,
}
_TIME_UNITS = {"": 1.0, "s": 1.0, "sec": 1.0, "ms": 1e-3, "msec": 1e-3, "us": 1e-6, "usec": 1e-6}
_SIZE_UNITS = {"": 1, "b": 1, "kb": 1024, "k": 1024, "mb": 1024**2, "m": 1024**2, "pkt": 1, "p": 1}


def require_ascii(field: str, value: object) -> None:
    """Refuse a string with characters outside ASCII, naming the field and the ASCII form if any."""
    if isinstance(value, str) and not value.isascii():
        # The suggestion maps any script's digits (full-width, Arabic-Indic) and NFKC look-alikes.
        plain = "".join(
            str(d) if (d := unicodedata.decimal(ch, None)) is not None else unicodedata.normalize("NFKC", ch)
            for ch in value
        )
        hint = f"; write {plain!r}" if plain.isascii() else ""
        raise ParameterError(field, f"{value!r} has non-ASCII characters{hint}")


def _split(field: str, value: object, units: dict, kind: str) -> tuple[float, str]:
    if isinstance(value, bool):
        raise ParameterError(field, f"expected a {kind}, got {value!r}")
    if isinstance(value, int | float):
        return float(value), ""
    if not isinstance(value, str):
        raise ParameterError(field, f"expected a {kind}, got {value!r}")
    require_ascii(field, value)
    m = re.fullmatch(_NUM + r"\s*([a-zA-Z%]*)", value.strip(), re.ASCII)
    if not m or m.group(2).lower() not in units:
        known = ", ".join(u for u in units if u)
        raise ParameterError(field, f"cannot read {value!r} as a {kind} (units: {known})")
    return float(m.group(1)), m.group(2).lower()


def _finite_non_negative(field: str, x: float, original: object) -> float:
    if math.isnan(x):
        raise ParameterError(field, f"must be a number, got {original!r}")
    if math.isinf(x):
        raise ParameterError(field, f"must be finite, got {original!r}")
    if x < 0:
        raise ParameterError(field, f"must not be negative, got {original!r}")
    return x


def parse_rate(value: object, field: str = "rate") -> float:
    """Return bit/s. ``10mbit`` -> 1e7; ``1.5gbit`` -> 1.5e9; ``125kbps`` (bytes) -> 1e6."""
    x, unit = _split(field, value, _RATE_UNITS, "rate like '10mbit'")
    return _finite_non_negative(field, x * _RATE_UNITS[unit], value)


def parse_duration(value: object, field: str = "delay") -> float:
    """Return seconds. ``50ms`` -> 0.05; a bare number is seconds."""
    x, unit = _split(field, value, _TIME_UNITS, "duration like '50ms'")
    return _finite_non_negative(field, x * _TIME_UNITS[unit], value)


def parse_percent(value: object, field: str = "loss") -> float:
    """Return a percentage 0..100. ``0.5%`` -> 0.5; a bare number is a percentage too."""
    x, _unit = _split(field, value, {"": 1.0, "%": 1.0}, "percentage like '0.5%'")
    x = _finite_non_negative(field, x, value)
    if x > 100:
        raise ParameterError(field, f"must be at most 100 %, got {value!r}")
    return x


def parse_size(value: object, field: str = "limit") -> int:
    """Return a count: bytes for ``64kb``, packets for ``1000pkt`` (caller knows which)."""
    x, unit = _split(field, value, _SIZE_UNITS, "size like '1000pkt' or '64kb'")
    x = _finite_non_negative(field, x, value)
    return int(x * _SIZE_UNITS[unit])


_BYTE_UNITS = {"": 1, "b": 1, "kb": 1024, "k": 1024, "mb": 1024**2, "m": 1024**2, "gb": 1024**3, "g": 1024**3}


def parse_bytes(value: object, field: str = "size") -> int:
    """Bytes from ``512kb``, ``4mb`` or a plain number (binary units, as sysctl buffer sizes)."""
    x, unit = _split(field, value, _BYTE_UNITS, "size like '512kb' or '4mb'")
    return int(_finite_non_negative(field, x, value) * _BYTE_UNITS[unit])


def format_bytes(n: float) -> str:
    """Short human form: 524288 -> '512kb'."""
    for unit, scale in (("gb", 1024**3), ("mb", 1024**2), ("kb", 1024)):
        if n >= scale and n % scale == 0:
            return f"{n / scale:g}{unit}"
    return f"{n:g}b"


def format_rate(bps: float) -> str:
    """Short human form: 1e7 -> '10mbit'."""
    for unit, scale in (("gbit", 1e9), ("mbit", 1e6), ("kbit", 1e3)):
        if bps >= scale:
            return f"{bps / scale:g}{unit}"
    return f"{bps:g}bit"


def format_duration(seconds: float) -> str:
    if seconds == 0:
        return "0ms"
    if seconds < 1e-3:
        return f"{seconds * 1e6:g}us"
    if seconds < 1:
        return f"{seconds * 1e3:g}ms"
    return f"{seconds:g}s"
