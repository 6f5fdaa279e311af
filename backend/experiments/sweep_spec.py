"""Sweep specs: structure, every value against the job type's parameters, the grid's points.

``check_spec`` validates a whole spec before anything is written and returns its points; every
error names where the user wrote the value (``grid.loss[1]``, ``fixed.rate``) and the bound.
"""

from __future__ import annotations

import itertools
import json
import math
import secrets
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from django.conf import settings
from pydantic import BaseModel

from experiments import jobtypes, link_traces
from experiments.choices import SweepOrder
from experiments.models import Experiment, Trial
from experiments.signals import capture_input_named
from hosts.models import WorkerHost
from qoelab.emulation.tcp import CC_CAPABILITY_PREFIX
from qoelab.params import ParamsInvalid, validate_params
from qoelab.sweeps import EMPTY_GRID

if TYPE_CHECKING:
    from qoelab.jobtype import JobType

MAX_REPETITIONS = 1000
MAX_ERRORS = 20  # a spec with thousands of bad values still gets a readable answer
EMPTY_GRID_NAMES = 8  # parameters named in the empty-grid message before "…"


class SpecError(Exception):
    """The sweep spec is invalid; ``errors`` is ``[{"field", "message"}]``."""

    def __init__(self, errors: list[dict[str, str]]) -> None:
        self.errors = errors[:MAX_ERRORS]
        super().__init__("; ".join(f"{e['field']}: {e['message']}" for e in self.errors))


def _is_scalar(value: Any) -> bool:
    return value is None or isinstance(value, str | int | float | bool)


@dataclass
class SweepSpec:
    experiment: Experiment | None
    new_experiment: dict[str, str] | None
    job: JobType
    name: str
    grid: dict[str, list[Any]]
    fixed: dict[str, Any]
    repetitions: int
    order: str
    seed: int
    user: Any = None  # who asks: trials named as inputs (``trial:N``) must be theirs


def check_structure(spec: Any, user: Any) -> SweepSpec:
    """Types, presence, job type, parameter names and the trial count. Raises SpecError."""
    if not isinstance(spec, dict):
        raise SpecError([{"field": "body", "message": "must be a JSON object (the sweep spec)"}])
    errors: list[dict[str, str]] = []

    def err(field: str, message: str) -> None:
        errors.append({"field": field, "message": message})

    known_keys = {"experiment", "job_type", "name", "grid", "fixed", "repetitions", "order", "seed"}
    for key in spec:
        if key not in known_keys:
            err(str(key), f"is not a sweep field (fields: {', '.join(sorted(known_keys))})")

    # Experiment: an id of one of the user's experiments, or {name, description} to find/create.
    experiment: Experiment | None = None
    new_experiment: dict[str, str] | None = None
    raw_exp = spec.get("experiment")
    if isinstance(raw_exp, bool) or raw_exp is None:
        err("experiment", "required: an experiment id or {name, description}")
    elif isinstance(raw_exp, int) or (isinstance(raw_exp, str) and raw_exp.isascii() and raw_exp.isdigit()):
        experiment = Experiment.objects.visible_to(user).filter(pk=int(raw_exp)).first()
        if experiment is None:
            err("experiment", f"no experiment with id {raw_exp} that you can use")
    elif isinstance(raw_exp, dict):
        name = raw_exp.get("name")
        desc = raw_exp.get("description", "")
        extra = set(raw_exp) - {"name", "description"}
        if extra:
            err(f"experiment.{sorted(extra)[0]}", "is not an experiment field (fields: name, description)")
        if not isinstance(name, str) or not name.strip():
            err("experiment.name", "required: a non-empty string")
        elif len(name) > 200:
            err("experiment.name", f"must be at most 200 characters, got {len(name)}")
        if not isinstance(desc, str):
            err("experiment.description", "must be a string")
        if isinstance(name, str) and name.strip() and isinstance(desc, str):
            experiment = Experiment.objects.filter(owner=user, name=name.strip()).first()
            if experiment is None:
                new_experiment = {"name": name.strip(), "description": desc}
    else:
        err("experiment", "must be an experiment id or {name, description}")

    # Job type: from the spec, else from an existing experiment.
    job: JobType | None = None
    raw_job = spec.get("job_type", experiment.job_type if experiment else None)
    if raw_job is None:
        err("job_type", f"required (known: {jobtypes.known_names()})")
    elif not isinstance(raw_job, str):
        err("job_type", "must be a string")
    else:
        job = jobtypes.get_job(raw_job)
        if job is None:
            err("job_type", f"unknown job type {raw_job!r} (known: {jobtypes.known_names()})")
        elif experiment is not None and experiment.job_type != raw_job:
            err(
                "job_type",
                f"experiment {experiment.name!r} runs job type {experiment.job_type!r}, not {raw_job!r}",
            )

    name = spec.get("name")
    if name is None:
        name = ""
    if not isinstance(name, str):
        err("name", "must be a string")
        name = ""
    elif len(name) > 200:
        err("name", f"must be at most 200 characters, got {len(name)}")

    grid = spec.get("grid")
    fixed = spec.get("fixed", {}) if spec.get("fixed") is not None else {}
    if grid is None or grid == {}:
        err("grid", empty_grid_message(job))
        grid = {}
    elif not isinstance(grid, dict):
        err("grid", "must be an object {parameter: [values]}")
        grid = {}
    for key, values in grid.items():
        if not isinstance(values, list):
            err(f"grid.{key}", "must be a list of values")
        elif not values:
            err(f"grid.{key}", "is empty: list at least one value")
        elif len(values) > settings.QOELAB_MAX_TRIALS_PER_SWEEP:
            # More values than a sweep may have trials: no point validating each (issue 33).
            limit = settings.QOELAB_MAX_TRIALS_PER_SWEEP
            err(f"grid.{key}", f"has {len(values)} values; a sweep has at most {limit} trials "
                               "(QOELAB_MAX_TRIALS_PER_SWEEP)")  # fmt: skip
        else:
            for i, v in enumerate(values):
                if not _is_scalar(v):
                    err(f"grid.{key}[{i}]", "must be a single value (string or number)")
    if not isinstance(fixed, dict):
        err("fixed", "must be an object {parameter: value}")
        fixed = {}
    for key, v in fixed.items():
        if not _is_scalar(v):
            err(f"fixed.{key}", "must be a single value (string or number)")
        if key in grid:
            err(f"fixed.{key}", "is also in grid: a parameter is either swept or fixed")
    if job is not None:
        names = jobtypes.param_names(job)
        for where, keys in (("grid", grid), ("fixed", fixed)):
            for key in keys:
                if key not in names:
                    err(
                        f"{where}.{key}",
                        f"is not a parameter of job type {job.name!r} (parameters: {', '.join(names)})",
                    )

    repetitions = spec.get("repetitions", 1)
    if isinstance(repetitions, bool) or not isinstance(repetitions, int):
        err("repetitions", f"must be a whole number, got {repetitions!r}")
        repetitions = 1
    elif not 1 <= repetitions <= MAX_REPETITIONS:
        err("repetitions", f"must be between 1 and {MAX_REPETITIONS}, got {repetitions}")
        repetitions = 1

    order = spec.get("order", SweepOrder.GRID)
    if order not in SweepOrder.values:
        err("order", f"must be one of {', '.join(SweepOrder.values)}, got {order!r}")
        order = SweepOrder.GRID

    seed = spec.get("seed")
    if seed is None:
        seed = secrets.randbelow(2**31)
    elif isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2**63:
        err("seed", f"must be a whole number from 0 to 2^63-1, got {seed!r}")
        seed = 0

    # The count is a product of list lengths, computed before anything is expanded.
    lists = [v for v in grid.values() if isinstance(v, list) and v]
    if lists and len(lists) == len(grid):
        points = math.prod(len(v) for v in lists)
        count = points * repetitions
        limit = settings.QOELAB_MAX_TRIALS_PER_SWEEP
        if count > limit:
            sizes = " × ".join(str(len(v)) for v in lists)
            err(
                "grid",
                f"would create {count} trials ({sizes} = {points} grid points × {repetitions} "
                f"repetitions); at most {limit} trials per sweep (QOELAB_MAX_TRIALS_PER_SWEEP)",
            )

    if errors:
        if job is not None and isinstance(fixed, dict):
            # Check the values that are well formed too, so that one answer lists every problem.
            names = set(jobtypes.param_names(job))
            ok_grid = {k: v for k, v in grid.items() if k in names and isinstance(v, list) and v
                       and len(v) <= settings.QOELAB_MAX_TRIALS_PER_SWEEP
                       and all(_is_scalar(x) for x in v)}  # fmt: skip
            ok_fixed = {k: v for k, v in fixed.items() if k in names and _is_scalar(v) and k not in grid}
            left_out = (set(grid) | set(fixed)) - set(ok_grid) - set(ok_fixed)
            known = {(e["field"], e["message"]) for e in errors}
            for e in _value_errors(job, ok_grid, ok_fixed):
                if _top(e["field"]) not in left_out and (e["field"], e["message"]) not in known:
                    errors.append(e)
        raise SpecError(errors)
    assert job is not None
    return SweepSpec(
        experiment, new_experiment, job, name.strip(), grid, fixed, repetitions, order, seed, user
    )


def empty_grid_message(job: JobType | None) -> str:
    """The one wording for a spec that sweeps nothing (the API and the New-sweep form both say it)."""
    if job is None:
        return f"{EMPTY_GRID}one of the job type's parameters"
    names = jobtypes.param_names(job)
    shown = ", ".join(names[:EMPTY_GRID_NAMES]) + (", …" if len(names) > EMPTY_GRID_NAMES else "")
    return f"{EMPTY_GRID}one of {shown}"


def _top(field: str) -> str:
    """'grid.loss[1]' -> 'loss'; 'fixed.rate' -> 'rate'; 'rate' -> 'rate'."""
    parts = field.split(".")
    name = parts[1] if parts[0] in ("grid", "fixed") and len(parts) > 1 else parts[0]
    return name.split("[")[0]


def _map_field(field: str, swept: str | None, index: int, grid: dict[str, Any], fixed: dict[str, Any]) -> str:
    """Name a pydantic error field after where the user wrote the value."""
    top = field.split(".")[0]
    if top == swept:
        return f"grid.{top}[{index}]"
    if top in grid:
        return f"grid.{top}[0]"
    if top in fixed:
        return f"fixed.{top}"
    return top


def _value_errors(job: JobType, grid: dict[str, list[Any]], fixed: dict[str, Any]) -> list[dict[str, str]]:
    """Every written value against the job type's model, each error pinned on the value that caused it.

    One validation per written value (sum of list lengths, not their product): grid.loss[1].
    """
    model: type[BaseModel] = job.params
    keys = list(grid)
    base = {**fixed, **{k: grid[k][0] for k in keys}}
    errors: list[dict[str, str]] = []
    seen: set[tuple[str, str]] = set()  # a set, not the list: 300,000 bad values stay linear (issue 33)
    probes: list[tuple[str | None, int, dict[str, Any]]] = [(None, 0, base)]
    probes += [(k, i, {**base, k: v}) for k in keys for i, v in enumerate(grid[k]) if i > 0]
    for swept, i, point in probes:
        if len(errors) >= MAX_ERRORS:
            break  # the answer names the first MAX_ERRORS problems; the rest are more of the same
        try:
            validate_params(model, point)
        except ParamsInvalid as exc:
            for e in exc.errors:
                msg = e["message"]
                if msg == "is required":
                    msg = f"is required by job type {job.name!r}: set it in fixed or grid"
                field = _map_field(e["field"], swept, i, grid, fixed)
                if (field, msg) not in seen:
                    seen.add((field, msg))
                    errors.append({"field": field, "message": msg})
    return errors


def check_values(s: SweepSpec) -> list[tuple[dict[str, Any], dict[str, Any], list[str]]]:
    """Validate every value, then every grid point; return (params, resolved, requires) per point."""
    model: type[BaseModel] = s.job.params
    keys = list(s.grid)
    errors = (
        _value_errors(s.job, s.grid, s.fixed)
        or _capture_errors(s)
        or link_traces.ref_errors(set(model.model_fields), s.grid, s.fixed, s.user)
    )
    if errors:
        raise SpecError(errors)
    seen: set[tuple[str, str]] = set()

    def add(field: str, message: str) -> None:
        if (field, message) not in seen:
            seen.add((field, message))
            errors.append({"field": field, "message": message})

    # Every combination, for rules that span parameters (model validators) and the SI values.
    out = []
    merged: set[str] = set()
    for combo in itertools.product(*(s.grid[k] for k in keys)):
        point = dict(zip(keys, combo, strict=True))
        params = {**s.fixed, **point}
        try:
            valid = validate_params(model, params)
        except ParamsInvalid as exc:
            where = ", ".join(f"{k}={v!r}" for k, v in point.items())
            for e in exc.errors:
                add("grid", f"the point {where} is invalid: {e['field']}: {e['message']}")
            if len(errors) >= MAX_ERRORS:
                break
            continue
        resolved = valid.model_dump(mode="json")
        for name in s.job.inapplicable(valid) if s.job.inapplicable else ():
            params.pop(name, None)
            resolved.pop(name, None)
        key = json.dumps(resolved, sort_keys=True)
        if key in merged:
            continue  # the same trial as an earlier point once what does not apply is dropped
        merged.add(key)
        out.append((params, resolved, sorted(s.job.trial_requires(valid))))
    if errors:
        raise SpecError(errors)
    _check_tcp_offered(s, out)
    return out


def _capture_errors(s: SweepSpec) -> list[dict[str, str]]:
    """Parameters naming another trial's capture (``trial:N``): that trial is the researcher's and
    has a pcap (results answers, ``signals.capture_input_named``). A file path is a local run's form
    (``qoelab thinclient run --trace``), not a sweep's."""
    errors = []
    for name in s.job.capture_params:
        written = [(f"grid.{name}[{i}]", v) for i, v in enumerate(s.grid.get(name, []))]
        written += [(f"fixed.{name}", s.fixed[name])] if name in s.fixed else []
        for where, value in written:
            if value is None or str(value).strip() == "":
                continue
            ref = str(value).strip()
            if not ref.startswith("trial:"):
                errors.append({"field": where, "message": "names a trial's capture as trial:N (a file path "
                               "is only for a local run)"})  # fmt: skip
                continue
            trials = Trial.objects.all() if s.user is None else Trial.objects.visible_to(s.user)
            trial = trials.filter(pk=int(ref.removeprefix("trial:"))).first()
            if trial is None:
                errors.append({"field": where, "message": f"no trial {ref.removeprefix('trial:')} of yours"})
                continue
            for _receiver, problem in capture_input_named.send(sender=Trial, trial=trial):
                if problem:
                    errors.append({"field": where, "message": problem})
    return errors


def offered_algorithms(hosts: list[WorkerHost]) -> set[str]:
    return {c.removeprefix(CC_CAPABILITY_PREFIX) for h in hosts for c in h.capability_set()
            if c.startswith(CC_CAPABILITY_PREFIX)}  # fmt: skip


def _check_tcp_offered(s: SweepSpec, points: list[tuple[dict[str, Any], dict[str, Any], list[str]]]) -> None:
    """Refuse a TCP algorithm that no worker's kernel offers, naming it.

    Only workers that have reported their capabilities (one heartbeat) count: with none yet (a lab
    just set up, a worker still starting) nothing is known, so the sweep waits and
    ``blocked_reason`` says for what.
    """
    wanted = {r.removeprefix(CC_CAPABILITY_PREFIX) for *_, req in points for r in req
              if r.startswith(CC_CAPABILITY_PREFIX)}  # fmt: skip
    hosts = list(WorkerHost.objects.filter(enabled=True, last_heartbeat__isnull=False))
    offered = offered_algorithms(hosts)
    missing = sorted(wanted - offered)
    if hosts and missing:
        where = "grid.tcp_cc" if "tcp_cc" in s.grid else "fixed.tcp_cc" if "tcp_cc" in s.fixed else "tcp_cc"
        raise SpecError([{
            "field": where,
            "message": f"no worker's kernel offers TCP congestion control {', '.join(map(repr, missing))} "
            f"(the workers offer {', '.join(sorted(offered)) or 'none'})",
        }])  # fmt: skip


def spec_errors(spec: Any, user: Any) -> list[dict[str, str]]:
    """Every problem of ``spec`` (structure, values, points) without writing anything; [] when valid."""
    try:
        check_values(check_structure(spec, user))
    except SpecError as exc:
        return exc.errors
    return []
