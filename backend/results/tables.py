"""Preset results tables in a paper's layout (a job type's ``TableSpec``: thesis 001's Tables
6.1-6.3): a row and a column named from each trial's resolved parameters, each cell the mean and
95 % CI of one summary metric over the sweep's succeeded trials (``results.services.grouped``,
the same statistics as the charts), with the paper's value beside where the job type gives one."""

from __future__ import annotations

from typing import Any

from experiments.models import Sweep
from qoelab.jobtype import JobType, TableSpec
from results import services as results_services


def _ordered(seen: list[str], preferred: tuple[str, ...]) -> list[str]:
    return [label for label in preferred if label in seen] + [
        label for label in seen if label not in preferred
    ]


def table_payload(sweep: Sweep, spec: TableSpec) -> dict[str, Any]:
    """``{key, title, y, columns, rows: [{label, cells: [{mean, ci, n, reference}]}]}``; rows and
    columns only where the sweep has trials."""
    cells = results_services.grouped(
        sweep, spec.y, lambda r: (spec.row_label(r), spec.column_label(r)), spec.where
    )
    rows = _ordered(list(dict.fromkeys(r for r, _ in cells)), spec.rows)
    columns = _ordered(list(dict.fromkeys(c for _, c in cells)), spec.columns)
    fmt = f"{{:.{spec.digits}f}}"
    out_rows = []
    for row in rows:
        out_cells = []
        for col in columns:
            st = cells.get((row, col))
            ref = spec.reference.get((row, col))
            cell: dict[str, Any] = {"reference": None if ref is None else fmt.format(ref)}
            if st is None:
                cell.update({"mean": None, "ci": None, "n": 0})
            else:
                half = None if st["ci_high"] is None else st["ci_high"] - st["mean"]
                cell.update({"mean": fmt.format(st["mean"]), "ci": None if half is None else fmt.format(half),
                             "n": st["n"], "value": st["mean"]})  # fmt: skip
            out_cells.append(cell)
        out_rows.append({"label": row, "cells": out_cells})
    return {"key": spec.key, "title": spec.title, "y": spec.y, "columns": columns, "rows": out_rows,
            "reference_title": spec.reference_title}  # fmt: skip


def sweep_tables(sweep: Sweep, job: JobType | None) -> list[dict[str, Any]]:
    """The job type's tables that have at least one cell in this sweep."""
    if job is None:
        return []
    return [t for t in (table_payload(sweep, spec) for spec in job.tables) if t["rows"]]
