"""Parameter types with units and bounds for job-type schemas (pydantic).

A job type declares its trial parameters as a pydantic model whose fields use these types, so the
backend (at sweep creation) and the worker (at trial start) validate the same way, and every error
names the field and the bound.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ValidationError, WithJsonSchema

from qoelab.errors import ParameterError
from qoelab.units import (
    format_bytes,
    format_duration,
    format_rate,
    parse_bytes,
    parse_duration,
    parse_percent,
    parse_rate,
)


def _bounded(parse, fmt, lo: float | None, hi: float | None, unit: str):
    def check(value: Any) -> float:
        try:
            x = parse(value, field="value")
        except ParameterError as err:
            raise ValueError(err.message) from None
        if lo is not None and x < lo:
            raise ValueError(f"must be at least {fmt(lo)}, got {value!r}")
        if hi is not None and x > hi:
            raise ValueError(f"must be at most {fmt(hi)}, got {value!r}")
        return x

    schema: dict[str, Any] = {"type": ["string", "number"], "x-unit": unit}
    if lo is not None:
        schema["x-minimum"] = lo
    if hi is not None:
        schema["x-maximum"] = hi
    return BeforeValidator(check), WithJsonSchema(schema)


def Rate(lo: float = 8e3, hi: float = 10e9):  # noqa: N802 - reads as a type in schemas
    """bit/s, from '10mbit'. Default bounds are the lab's: 8 kbit/s .. 10 Gbit/s."""
    return Annotated[float, *_bounded(parse_rate, lambda v: format_rate(v) + "/s", lo, hi, "bit/s")]


def Duration(lo: float = 0.0, hi: float = 10.0):  # noqa: N802
    """seconds, from '50ms'. Default upper bound 10 s."""
    return Annotated[float, *_bounded(parse_duration, format_duration, lo, hi, "s")]


def Bytes(lo: float = 0, hi: float = 1 << 40):  # noqa: N802
    """bytes, from '512kb' (binary units)."""
    return Annotated[int, *_bounded(parse_bytes, format_bytes, lo, hi, "B")]


def Percent(lo: float = 0.0, hi: float = 100.0):  # noqa: N802
    """percent 0..100, from '0.5%'."""
    return Annotated[float, *_bounded(parse_percent, lambda v: f"{v:g} %", lo, hi, "%")]


class ParamsInvalid(ParameterError):
    """One or more parameters are invalid; ``errors`` lists ``{"field", "message"}``."""

    def __init__(self, errors: list[dict[str, str]]) -> None:
        self.errors = errors
        first = errors[0]
        super().__init__(first["field"], first["message"])
        self.args = ("; ".join(f"{e['field']}: {e['message']}" for e in errors),)


def field_errors(exc: ValidationError, root: str, unknown_field: str) -> list[dict[str, str]]:
    """``{"field", "message"}`` per pydantic error, in words a user reads (``unknown_field`` is
    the message for a key the model does not have)."""
    errors = []
    for e in exc.errors():
        field = ".".join(str(p) for p in e["loc"]) or root
        msg = e["msg"].removeprefix("Value error, ")
        if e["type"] == "extra_forbidden":
            msg = unknown_field
        elif e["type"] == "missing":
            msg = "is required"
        errors.append({"field": field, "message": msg})
    return errors


def validate_params(model: type[BaseModel], raw: dict[str, Any]) -> BaseModel:
    """Validate ``raw`` against ``model``; raise ParamsInvalid naming each bad field."""
    try:
        return model.model_validate(raw)
    except ValidationError as exc:
        raise ParamsInvalid(field_errors(exc, "params", "is not a parameter of this job type")) from None
