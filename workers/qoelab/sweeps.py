"""Sweep specs as YAML files, submitted and watched through the REST API (``qoelab sweep ...``).

A spec has exactly the fields of ``POST /api/sweeps/``::

    experiment: link-check           # a name (found among yours, or created), {name, description}, or an id
    job_type: link_check             # optional when the experiment exists
    name: rate ladder
    grid: {rate: [10mbit, 50mbit]}
    fixed: {delay: 20ms, duration: 3s}
    repetitions: 3
    order: grid                      # or random (seed makes the order reproducible)

The spec's shape is checked here first (unknown or mistyped fields are named with the file); the
backend then validates every grid point against the job type's parameter model and answers with
the field and the bound (``grid.rate[1]: must be at most 10gbit/s``).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from qoelab import specfile
from qoelab.client import ApiClient
from qoelab.errors import QoelabError
from qoelab.params import field_errors
from qoelab.specfile import SpecError

# One wording for a sweep with nothing to sweep, here (a spec file) and in the backend (the form and
# the API), which names the job type's parameters after it.
EMPTY_GRID = (
    "Nothing to sweep, the grid is empty: sweep at least one parameter by giving values to sweep for "
)

TERMINAL = {"succeeded", "failed", "cancelled"}


class ExperimentRef(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, max_length=200)
    description: str = ""


class SweepSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    experiment: int | ExperimentRef | str = Field(description="experiment id, name, or {name, description}")
    job_type: str | None = None
    name: str = Field(default="", max_length=200)
    grid: dict[str, list[Any]]
    fixed: dict[str, Any] = Field(default_factory=dict)
    repetitions: int = Field(default=1, ge=1, le=1000)
    order: Literal["grid", "random"] = "grid"
    seed: int | None = Field(default=None, ge=0)

    @field_validator("grid")
    @classmethod
    def _grid_lists_not_empty(cls, grid: dict[str, list[Any]]) -> dict[str, list[Any]]:
        if not grid:
            raise ValueError(f"{EMPTY_GRID}one of the job type's parameters")
        for key, values in grid.items():
            if not values:
                raise ValueError(f"grid.{key} is empty: list at least one value")
        return grid

    def body(self) -> dict[str, Any]:
        """The POST /api/sweeps/ body; a bare experiment name means {name: ...}."""
        exp = self.experiment
        if isinstance(exp, str):
            exp = int(exp) if exp.isascii() and exp.isdigit() else {"name": exp}
        elif isinstance(exp, ExperimentRef):
            exp = exp.model_dump()
        body = self.model_dump(exclude_none=True, exclude={"experiment"})
        if not body.get("name"):
            body.pop("name", None)
        return {"experiment": exp, **body}


def load_spec(path: Path) -> SweepSpec:
    path = Path(path)
    raw = specfile.load(path)  # UTF-8, size, depth, alias, duplicate-key and number checks
    if not isinstance(raw, dict):
        raise SpecError(f"{path}: a sweep spec is a mapping of fields (experiment, name, grid, ...)")
    try:
        return SweepSpec.model_validate(raw)
    except ValidationError as exc:
        known = ", ".join(SweepSpec.model_fields)
        errors = field_errors(exc, "spec", f"is not a sweep field (fields: {known})")
        msgs = [f"{e['field']}: {e['message']}" for e in errors]
        raise SpecError(f"{path}: " + "; ".join(msgs)) from None


def submit(api: ApiClient, spec: SweepSpec) -> dict[str, Any]:
    return api.post("/api/sweeps/", spec.body(), "creating the sweep")


def sweep_web_url(api: ApiClient, sweep: dict[str, Any]) -> str:
    return f"{api.base_url}/sweeps/{sweep['id']}/"


def progress(sweep: dict[str, Any]) -> dict[str, int]:
    """Counts by status plus ``total`` and ``done`` from a sweep answer's ``progress``."""
    prog = sweep.get("progress") or {}
    counts = prog.get("counts") or {}
    out = {k: int(counts.get(k, 0) or 0) for k in ("pending", "queued", "running", *sorted(TERMINAL))}
    out["total"] = int(prog.get("total") or sweep.get("trial_count") or 0)
    out["done"] = int(prog.get("done") if prog.get("done") is not None else sum(out[k] for k in TERMINAL))
    return out


def wait(
    api: ApiClient,
    sweep_id: int,
    on_progress: Callable[[dict[str, int], str | None], None],
    poll_s: float = 1.0,
    timeout_s: float | None = None,
) -> dict[str, int]:
    """Poll until every trial has ended (or the sweep is cancelled); return the final counts.

    ``on_progress(counts, blocked)`` gets the counts and, if pending trials cannot start, why.
    """
    start = time.monotonic()
    while True:
        sweep = api.get(f"/api/sweeps/{sweep_id}/")
        counts = progress(sweep)
        on_progress(counts, (sweep.get("progress") or {}).get("blocked"))
        if counts["total"] and counts["done"] >= counts["total"]:
            return counts
        if sweep.get("cancelled_at") and not counts["running"]:
            return counts
        if timeout_s is not None and time.monotonic() - start > timeout_s:
            raise QoelabError(
                f"sweep {sweep_id} did not finish within {timeout_s:g} s "
                f"({counts['done']}/{counts['total']} trials done)"
            )
        time.sleep(poll_s)
