"""The new-sweep form: one row per job-type parameter (values to sweep or a fixed value).

The form only reshapes what was typed into the sweep spec that the REST API also takes and hands
it to ``experiments.services.create_sweep``; that service does all value checks (units, bounds,
trial count) and its errors, which name fields like ``grid.rate[1]``, are pinned back onto the
row of the parameter they concern.
"""

from __future__ import annotations

import re
from typing import Any

from django import forms

from dashboard.services import ParamInfo, describe_params, parse_value_list
from experiments.choices import SweepOrder
from experiments.models import Experiment
from experiments.services import MAX_REPETITIONS
from qoelab.jobs.base import JobType

_FIELD = re.compile(r"^(grid|fixed)\.([A-Za-z_][A-Za-z0-9_]*)(?:\[(\d+)\])?")


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
        for p in self.params:
            unit = f" ({p.unit})" if p.unit else ""
            self.fields[f"grid_{p.name}"] = forms.CharField(
                required=False, label=f"{p.name}: values to sweep", help_text=f"comma-separated{unit}"
            )
            self.fields[f"fixed_{p.name}"] = forms.CharField(required=False, label=f"{p.name}: fixed value")
            self.placeholders[p.name] = (
                p.default if p.default is not None else ("required" if p.required else "unset")
            )

    def param_rows(self) -> list[dict[str, Any]]:
        """What the template needs per parameter: its description and its two bound fields."""
        return [
            {
                "info": p,
                "grid": self[f"grid_{p.name}"],
                "fixed": self[f"fixed_{p.name}"],
                "placeholder": self.placeholders[p.name],
            }
            for p in self.params
        ]

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        if data.get("experiment") is None and not (data.get("new_experiment") or "").strip():
            self.add_error("new_experiment", "Choose an experiment or name a new one.")
        return data

    def to_spec(self) -> dict[str, Any]:
        """The sweep spec, in the REST API's shape."""
        d = self.cleaned_data
        grid: dict[str, list[str]] = {}
        fixed: dict[str, str] = {}
        for p in self.params:
            values = parse_value_list(d.get(f"grid_{p.name}") or "")
            if values:
                grid[p.name] = values
            fixed_value = (d.get(f"fixed_{p.name}") or "").strip()
            if fixed_value:
                fixed[p.name] = fixed_value
        exp = d.get("experiment")
        spec: dict[str, Any] = {
            "experiment": exp if exp is not None else {"name": d["new_experiment"].strip()},
            "job_type": self.job.name,
            "name": d.get("name") or "",
            "grid": grid,
            "fixed": fixed,
            "repetitions": d["repetitions"],
            "order": d["order"],
        }
        if d.get("seed") is not None:
            spec["seed"] = d["seed"]
        return spec

    def add_spec_errors(self, errors: list[dict[str, str]]) -> None:
        """Pin each service error next to the field it names; the rest go on top of the form."""
        typed = dict(self.cleaned_data)  # add_error() drops a field from cleaned_data
        for e in errors:
            field, message = e["field"], e["message"]
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
            top = field.split(".")[0].split("[")[0]
            if top in self.fields and top != "experiment":
                self.add_error(top, message)
            elif top == "experiment":
                self.add_error("new_experiment" if "." in field else "experiment", message)
            elif f"grid_{top}" in self.fields:
                self.add_error(f"grid_{top}", message)
            else:
                self.add_error(None, f"{field}: {message}")
