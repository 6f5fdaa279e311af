"""The new-sweep form: one row per job-type parameter (values to sweep or a fixed value).

The form only reshapes what was typed into the sweep spec that the REST API also takes and hands
it to ``experiments.services.create_sweep``; that service does all value checks (units, bounds,
trial count) and its errors, which name fields like ``grid.rate[1]``, are pinned back onto the
row of the parameter they concern. When the form's own fields are wrong too (no experiment, bad
repetitions), the spec is still checked (``sweep_spec.spec_errors``), so one submit shows every
problem.

A boolean parameter's fixed value is a checkbox (sent only when it differs from the default);
sweeping it stays a values-to-sweep text (``true, false``). A job type groups its parameters with
``x-group`` on each field's JSON schema (and ``x-groups`` on the model: order, titles); the
template shows each group as a ``<details>``, open when something in it needs attention.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any

from django import forms
from django.forms import BoundField
from pydantic import TypeAdapter, ValidationError

from dashboard.services import ParamInfo, _plain, describe_params, parse_value_list
from experiments.choices import SweepOrder
from experiments.models import Experiment
from experiments.services import MAX_REPETITIONS
from qoelab.jobtype import JobType

_FIELD = re.compile(r"^(grid|fixed)\.([A-Za-z_][A-Za-z0-9_]*)(?:\[(\d+)\])?")
_BOOL = TypeAdapter(bool)
# The form's fields above the parameters and below them, in the order the page shows them.
_HEAD = ("experiment", "new_experiment", "name")
_TAIL = ("repetitions", "order", "seed")


@dataclasses.dataclass
class ParamRow:
    info: ParamInfo
    grid: BoundField
    fixed: BoundField
    placeholder: str
    boolean: bool
    changed: bool  # swept, or a fixed value that is not the default


@dataclasses.dataclass
class ParamGroup:
    name: str  # "" for a job type without groups (one flat list)
    title: str
    description: str
    rows: list[ParamRow] = dataclasses.field(default_factory=list)

    @property
    def open(self) -> bool:
        """Shown open when the researcher has to look: a required, changed or erroneous parameter."""
        return any(r.changed or r.info.required or r.grid.errors or r.fixed.errors for r in self.rows)

    @property
    def n_changed(self) -> int:
        return sum(r.changed for r in self.rows)


def _as_bool(value: Any) -> bool | None:
    try:
        return _BOOL.validate_python(value.strip() if isinstance(value, str) else value)
    except ValidationError:
        return None


class SweepForm(forms.Form):
    job_type = forms.CharField(widget=forms.HiddenInput)
    experiment = forms.TypedChoiceField(
        required=False, coerce=int, empty_value=None, label="Experiment", choices=()
    )
    new_experiment = forms.CharField(
        required=False,
        max_length=200,
        label="New experiment name",
        help_text="Used when no existing experiment is chosen.",
    )
    name = forms.CharField(
        required=False, max_length=200, label="Sweep name", help_text="Optional; defaults to 'sweep N'."
    )
    repetitions = forms.IntegerField(
        min_value=1,
        max_value=MAX_REPETITIONS,
        initial=1,
        label="Repetitions",
        help_text="Runs per grid point; the charts need at least 2 for a confidence interval.",
    )
    order = forms.ChoiceField(choices=SweepOrder.choices, initial=SweepOrder.GRID, label="Order")
    seed = forms.IntegerField(
        required=False,
        min_value=0,
        max_value=2**63 - 1,
        label="Seed",
        help_text="Shuffle seed for random order; empty picks one and stores it.",
    )

    def __init__(self, *args: Any, job: JobType, user: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.job = job
        self.params: list[ParamInfo] = describe_params(job)
        self.placeholders: dict[str, str] = {}
        self.fields["job_type"].initial = job.name
        mine = Experiment.objects.filter(owner=user, job_type=job.name).order_by("name")
        self.fields["experiment"].choices = [("", "— new experiment —")] + [
            (e.pk, f"{e.name} (archived)" if e.archived_at else e.name) for e in mine
        ]
        schema = job.params.model_json_schema()
        props = {name: _plain(raw) for name, raw in schema.get("properties", {}).items()}
        self.booleans: dict[str, bool | None] = {}  # boolean parameter -> its default (None: none)
        self.group_of: dict[str, str] = {
            p.name: props.get(p.name, {}).get("x-group", "") for p in self.params
        }
        self.group_meta: list[dict[str, str]] = list(schema.get("x-groups", []))
        self.grid_errors: list[str] = []  # about the grid as a whole: nothing swept, too many trials
        for p in self.params:
            unit = f" ({p.unit})" if p.unit else ""
            self.fields[f"grid_{p.name}"] = forms.CharField(
                required=False, label=f"{p.name}: values to sweep", help_text=f"comma-separated{unit}"
            )
            prop = props.get(p.name, {})
            if prop.get("type") == "boolean":
                default = prop.get("default") if isinstance(prop.get("default"), bool) else None
                self.booleans[p.name] = default
                self.fields[f"fixed_{p.name}"] = forms.BooleanField(
                    required=False, label=f"{p.name}: fixed value", initial=bool(default)
                )
                prefill = self.initial.get(f"fixed_{p.name}")
                if prefill is not None:  # a clone's stored value, as text ('true') or a bool
                    as_bool = _as_bool(prefill)
                    self.initial[f"fixed_{p.name}"] = bool(default) if as_bool is None else as_bool
            else:
                self.fields[f"fixed_{p.name}"] = forms.CharField(
                    required=False, label=f"{p.name}: fixed value"
                )
            self.placeholders[p.name] = (
                p.default if p.default is not None else ("required" if p.required else "unset")
            )

    def _changed(self, p: ParamInfo) -> bool:
        if (self[f"grid_{p.name}"].value() or "").strip():
            return True
        fixed = self[f"fixed_{p.name}"].value()
        if p.name in self.booleans:
            default = self.booleans[p.name]
            return default is None or bool(fixed) != default
        return bool((fixed or "").strip())

    def param_rows(self) -> list[ParamRow]:
        """What the template needs per parameter: its description and its two bound fields."""
        return [
            ParamRow(
                info=p,
                grid=self[f"grid_{p.name}"],
                fixed=self[f"fixed_{p.name}"],
                placeholder=self.placeholders[p.name],
                boolean=p.name in self.booleans,
                changed=self._changed(p),
            )
            for p in self.params
        ]

    def param_groups(self) -> list[ParamGroup]:
        """The rows by group in the job type's order; one untitled group when it declares none."""
        rows = self.param_rows()
        if not any(self.group_of.values()):
            return [ParamGroup("", "", "", rows)]
        groups: dict[str, ParamGroup] = {}
        for meta in self.group_meta:
            name = str(meta.get("name", ""))
            groups[name] = ParamGroup(
                name, str(meta.get("title") or name.capitalize()), str(meta.get("description", ""))
            )
        for row in rows:
            name = self.group_of[row.info.name] or "other"
            if name not in groups:
                title = "Other parameters" if name == "other" else name.replace("_", " ").capitalize()
                groups[name] = ParamGroup(name, title, "")
            groups[name].rows.append(row)
        return [g for g in groups.values() if g.rows]

    def problems(self) -> list[dict[str, str]]:
        """Every error, in the order the page shows the fields: the summary on top of the form."""
        out = [{"anchor": "", "label": "", "message": str(e)} for e in self.non_field_errors()]

        def of(name: str) -> None:
            for e in self.errors.get(name, []):
                bf = self[name]
                out.append({"anchor": bf.id_for_label, "label": str(bf.label), "message": str(e)})

        for name in _HEAD:
            of(name)
        for group in self.param_groups():
            for row in group.rows:
                of(row.grid.name)
                of(row.fixed.name)
        out += [{"anchor": "parameters", "label": "Parameters", "message": e} for e in self.grid_errors]
        for name in _TAIL:
            of(name)
        return out

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        if data.get("experiment") is None and not (data.get("new_experiment") or "").strip():
            self.add_error("new_experiment", "Choose an experiment or name a new one.")
        return data

    def to_spec(self) -> dict[str, Any]:
        """The sweep spec, in the REST API's shape.

        On an invalid form it is built from what did validate (a field in error is left out), so
        that ``sweep_spec.spec_errors`` can still check the parameters in the same round.
        """
        d = self.cleaned_data
        grid: dict[str, list[str]] = {}
        fixed: dict[str, Any] = {}
        for p in self.params:
            values = parse_value_list(d.get(f"grid_{p.name}") or "")
            if values:
                grid[p.name] = values
            if p.name in self.booleans:
                default = self.booleans[p.name]
                ticked = bool(d.get(f"fixed_{p.name}"))
                if not values and (default is None or ticked != default):
                    fixed[p.name] = ticked
                continue
            fixed_value = (d.get(f"fixed_{p.name}") or "").strip()
            if fixed_value:
                fixed[p.name] = fixed_value
        spec: dict[str, Any] = {
            "job_type": self.job.name,
            "name": d.get("name") or "",
            "grid": grid,
            "fixed": fixed,
        }
        exp = d.get("experiment")
        if exp is not None:
            spec["experiment"] = exp
        elif (d.get("new_experiment") or "").strip():
            spec["experiment"] = {"name": d["new_experiment"].strip()}
        for key in ("repetitions", "order", "seed"):
            if d.get(key) not in (None, ""):
                spec[key] = d[key]
        return spec

    def add_spec_errors(self, errors: list[dict[str, str]]) -> None:
        """Pin each service error next to the field it names; the rest go on top of the form."""
        typed = dict(self.cleaned_data)  # add_error() drops a field from cleaned_data
        already = set(self.errors)  # the form's own errors on these fields say it first
        if already & {"experiment", "new_experiment"}:
            already |= {"experiment", "new_experiment"}
        for e in errors:
            field, message = e["field"], e["message"]
            top = field.split(".")[0].split("[")[0]
            if top in _HEAD + _TAIL and (top in already or (top == "experiment" and "experiment" in already)):
                continue
            if field == "grid":
                if message not in self.grid_errors:
                    self.grid_errors.append(message)
                continue
            m = _FIELD.match(field)
            if m:
                where, param, index = m.groups()
                target = f"{where}_{param}"
                if target in self.fields:
                    if where == "grid" and index is not None:
                        values = parse_value_list(typed.get(target) or "")
                        i = int(index)
                        shown = repr(values[i]) if i < len(values) else f"#{i + 1}"
                        message = f"value {shown}: {message}"
                    self.add_error(target, message)
                    continue
                # A value for a parameter the user left empty (e.g. required): show it on the grid box.
                if f"grid_{param}" in self.fields:
                    self.add_error(f"grid_{param}", message)
                    continue
            if top in self.fields and top != "experiment":
                self.add_error(top, message)
            elif top == "experiment":
                self.add_error("new_experiment" if "." in field else "experiment", message)
            elif f"grid_{top}" in self.fields:
                self.add_error(f"grid_{top}", message)
            else:
                self.add_error(None, f"{field}: {message}")
