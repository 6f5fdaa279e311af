"""Read-side helpers for the dashboard: parameter descriptions, progress, chart data, CSV rows.

Chart numbers come from ``results.services.aggregate``: the mean of the per-trial values of
succeeded trials at each (series, x) point with a 95 % confidence interval from Student's t
distribution, mean ± t(0.975, n−1)·s/√n; n = 1 has no interval (ci_low/ci_high are None and the
chart shows the point without a bar). See docs/dashboard.md.
"""

from __future__ import annotations

import csv
import itertools
from collections import defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from django.db import connection
from django.db.models import Count, Q

from experiments import services as experiments_services
from experiments.choices import TERMINAL, TrialStatus
from experiments.models import Sweep, Trial
from qoelab.jobtype import ChartSpec, JobType, Metric
from qoelab.units import format_duration, format_rate
from results import services as results_services
from results.models import Sample, SummaryValue

CONFIDENCE = 0.95  # what results.services.aggregate computes; shown in the payload


# ---- job-type parameters ----------------------------------------------------------------------


def trial_counts(via: str = "") -> dict[str, Count]:
    """``n_trials``, ``n_done`` (ended) and ``n_failed`` as aggregates over the trials reached by
    ``via``: ``"trials"`` from a sweep, ``"sweeps__trials"`` from an experiment, ``""`` on Trial."""
    target, status = (via, f"{via}__status") if via else ("pk", "status")
    return {
        "n_trials": Count(target),
        "n_done": Count(target, filter=Q(**{f"{status}__in": list(TERMINAL)})),
        "n_failed": Count(target, filter=Q(**{status: TrialStatus.FAILED})),
    }


@dataclass(frozen=True)
class ParamInfo:
    name: str
    title: str
    description: str
    unit: str
    required: bool
    default: str | None  # for display, in the parameter's unit ('0ms'); None = no value (unset)
    bounds: str  # human text, e.g. "8kbit/s … 10gbit/s"; empty when unknown
    choices: tuple[str, ...] = ()


# How to show a bound or default of a qoelab.params field, by its JSON-schema unit.
UNIT_FORMATS: dict[str, Any] = {
    "bit/s": lambda v: format_rate(v) + "/s",
    "s": format_duration,
    "%": lambda v: f"{v:g} %",
}


def _plain(prop: dict[str, Any]) -> dict[str, Any]:
    """The non-null branch of an optional property's anyOf, merged over the property."""
    branches = [b for b in prop.get("anyOf", []) if b.get("type") != "null"]
    return {**branches[0], **{k: v for k, v in prop.items() if k != "anyOf"}} if len(branches) == 1 else prop


def describe_params(job: JobType) -> list[ParamInfo]:
    schema = job.params.model_json_schema()
    required = set(schema.get("required", []))
    out = []
    for name, raw in schema.get("properties", {}).items():
        prop = _plain(raw)
        lo, hi = prop.get("x-minimum", prop.get("minimum")), prop.get("x-maximum", prop.get("maximum"))
        fmt = UNIT_FORMATS.get(prop.get("x-unit", ""))
        show = fmt or (lambda v: f"{v:g}" if isinstance(v, float) else str(v))
        if lo is not None and hi is not None:
            bounds = f"{show(lo)} … {show(hi)}"
        elif lo is not None:
            bounds = f"at least {show(lo)}"
        elif hi is not None:
            bounds = f"at most {show(hi)}"
        else:
            bounds = ""
        default = prop.get("default")
        if isinstance(default, bool):
            shown = "true" if default else "false"
        elif isinstance(default, int | float) and fmt is not None:
            shown = fmt(default)  # 0.0 s reads as '0ms', as a user would type it
        else:
            shown = None if default is None else str(default)
        out.append(
            ParamInfo(
                name=name,
                title=prop.get("title", name),
                description=prop.get("description", ""),
                unit=prop.get("x-unit", ""),
                required=name in required,
                default=shown,
                bounds=bounds,
                choices=tuple(str(v) for v in prop.get("enum", ())),
            )
        )
    return out


def parse_value_list(text: str) -> list[str]:
    """'1mbit, 10mbit' -> ['1mbit', '10mbit']; values stay as written, the job type parses units."""
    return [v.strip() for v in text.split(",") if v.strip()]


# ---- display units ----------------------------------------------------------------------------

_DISPLAY = {
    "bit/s": (1e6, "Mbit/s"),
    "bps": (1e6, "Mbit/s"),
    "s": (1e-3, "ms"),
    "B": (1e3, "kB"),
    "bytes": (1e3, "kB"),
}


def display_scale(unit: str) -> tuple[float, str]:
    """How to show SI values of ``unit`` on an axis: (divide by, unit label)."""
    return _DISPLAY.get(unit, (1.0, unit))


def axis_label(title: str, unit: str) -> str:
    return f"{title} ({unit})" if unit else title


# ---- progress ---------------------------------------------------------------------------------


def progress(sweep: Sweep) -> dict[str, Any]:
    """The backend's progress (counts, done/total, ETA, why it is blocked) in the page's flat shape."""
    p = experiments_services.progress(sweep)
    counts = p["counts"]
    total, done = p["total"], p["done"]
    open_ = total - done
    if total and not open_:
        state = "cancelled" if sweep.is_cancelled else "finished"
    elif p["blocked"]:
        state = "blocked"
    elif counts[TrialStatus.RUNNING] or done:
        state = "running"
    else:
        state = "waiting"
    return {
        "sweep": sweep.pk,
        "total": total,
        "done": done,
        **{s: counts.get(s, 0) for s in TrialStatus.values},
        "finished": total > 0 and open_ == 0,
        "state": state,
        "eta_s": None if p["eta_s"] is None else round(p["eta_s"], 1),
        "mean_trial_s": p["mean_trial_s"],
        "blocked": p["blocked"] or "",
        "cancelled_at": sweep.cancelled_at.isoformat() if sweep.cancelled_at else None,
    }


# ---- aggregation ------------------------------------------------------------------------------


def series_labels(sweep: Sweep, param: str) -> dict[Any, str]:
    """Resolved (SI) value -> value as written, e.g. 0.005 -> '5ms', for legend labels."""
    pairs = sweep.trials.values_list(f"resolved__{param}", f"params__{param}").distinct()
    return {resolved: str(written) for resolved, written in pairs}


def aggregate(
    sweep: Sweep,
    y: str,
    x: str,
    series: str | None = None,
    source: str = "summary",
    where: dict[str, Any] | None = None,
) -> list[dict]:
    """The backend's aggregate (mean, Student-t 95 % CI, n per point) with legend labels.

    One entry per series value: {key, label, points: [{x, mean, ci_low, ci_high, n, sd}]}.
    ``where`` restricts it to trials with these resolved parameter values (one panel).
    """
    agg = results_services.aggregate(sweep, y, x, series, source, where)
    labels = series_labels(sweep, series) if series else {}
    out = []
    for s in agg["series"]:
        key = s["value"]
        label = f"{series} = {labels.get(key, key)}" if series else "all trials"
        if series and key is None:  # the parameter does not apply to these trials (vose's device on
            label = f"no {series}"  # the kernel path): say so rather than "device = None"
        out.append({"key": key, "label": label, "points": s["points"]})
    return out


def split_params(sweep: Sweep, spec: ChartSpec) -> list[str]:
    """Swept parameters the chart shows neither as x, series nor facet (e.g. ``server`` in a sweep
    of namespace vs VM mode): their values are never pooled, each gets its own series."""
    shown = {spec.x, spec.series, spec.facet}
    return [k for k in sweep.grid_order if k not in shown and len(sweep.grid.get(k) or []) > 1]


def split_aggregate(
    sweep: Sweep, spec: ChartSpec, where: dict[str, Any] | None = None
) -> list[dict[str, Any]]:
    """:func:`aggregate` once per combination of :func:`split_params` values, labels suffixed."""
    splits = split_params(sweep, spec)
    if not splits:
        return aggregate(sweep, spec.y, spec.x, spec.series, spec.source, where)
    labels = {k: series_labels(sweep, k) for k in splits}
    out = []
    for combo in itertools.product(*(sorted(labels[k], key=_facet_key) for k in splits)):
        cond = dict(zip(splits, combo, strict=True))
        # A parameter that does not apply to these trials (None) names nothing.
        suffix = ", ".join(f"{k} = {labels[k][v]}" for k, v in cond.items() if v is not None)
        for s in aggregate(sweep, spec.y, spec.x, spec.series, spec.source, {**(where or {}), **cond}):
            label = suffix if s["label"] == "all trials" else f"{s['label']}, {suffix}"
            out.append({**s, "label": label})
    return out


def chart_payload(sweep: Sweep, job: JobType | None, spec: ChartSpec) -> dict[str, Any]:
    params = {p.name: p for p in describe_params(job)} if job else {}
    metrics = {m.name: m for m in job.metrics} if job else {}
    x_info = params.get(spec.x)
    metric = metrics.get(spec.y)
    series = split_aggregate(sweep, spec)
    # Panels: one per value of the facet parameter, in ascending order, lettered as in the thesis;
    # without a facet a single panel holding every trial (the same numbers as ``series``).
    panels: list[dict[str, Any]] = []
    if spec.facet:
        labels = series_labels(sweep, spec.facet)
        for i, value in enumerate(sorted(labels, key=_facet_key)):
            panel_series = split_aggregate(sweep, spec, {spec.facet: value})
            panels.append(
                {
                    "value": value,
                    "label": f"({_letter(i)}) {spec.facet} = {labels[value]}",
                    "series": [{"label": s["label"], "points": s["points"]} for s in panel_series],
                }
            )
    else:
        panels.append(
            {
                "value": None,
                "label": "",
                "series": [{"label": s["label"], "points": s["points"]} for s in series],
            }
        )
    return {
        "key": spec.key,
        "title": spec.title,
        "x": spec.x,
        "y": spec.y,
        "series_param": spec.series,
        "x_label": spec.x_label
        or axis_label(x_info.title if x_info else spec.x, x_info.unit if x_info else ""),
        "y_label": spec.y_label
        or axis_label(metric.label if metric else spec.y, metric.unit if metric else ""),
        "x_scale": spec.x_scale,
        "y_scale": spec.y_scale,
        "log_x": spec.log_x,
        "log_y": spec.log_y,
        "identity": spec.identity,
        "confidence": CONFIDENCE,
        "series": [{"label": s["label"], "points": s["points"]} for s in series],
        "facet": spec.facet,
        "panels": panels,
    }


def _facet_key(value: Any) -> tuple[int, Any]:
    """Numbers first in numeric order, then everything else by its text (None last)."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return (0, value)
    return (2, "") if value is None else (1, str(value))


def _letter(i: int) -> str:
    return chr(ord("a") + i) if i < 26 else str(i + 1)


def custom_spec(
    job: JobType | None,
    y: str,
    x: str,
    series: str | None,
    log_x: bool,
    log_y: bool,
    facet: str | None = None,
) -> ChartSpec:
    """A ChartSpec for the custom-chart control, with display units chosen from the declared units."""
    params = {p.name: p for p in describe_params(job)} if job else {}
    metrics = {m.name: m for m in job.metrics} if job else {}
    x_unit = params[x].unit if x in params else ""
    y_unit = metrics[y].unit if y in metrics else ""
    xs, x_disp = display_scale(x_unit)
    ys, y_disp = display_scale(y_unit)
    x_title = params[x].title if x in params else x
    y_title = metrics[y].label if y in metrics else y
    return ChartSpec(
        key="custom",
        title=f"{y_title} vs {x_title}"
        + (f" by {series}" if series else "")
        + (f", per {facet}" if facet else ""),
        x=x,
        y=y,
        series=series,
        facet=facet,
        log_x=log_x,
        log_y=log_y,
        x_label=axis_label(x_title, x_disp),
        y_label=axis_label(y_title, y_disp),
        x_scale=xs,
        y_scale=ys,
    )


# ---- CSV export -------------------------------------------------------------------------------


class Echo:
    """A file-like object whose write returns the line, for csv.writer inside a generator."""

    def write(self, value: str) -> str:
        return value


def param_columns(sweep: Sweep) -> list[str]:
    cols = list(sweep.grid_order or list(sweep.grid))
    cols += [p for p in sweep.fixed if p not in cols]
    return cols


def _chunks(qs: Iterable[Trial], size: int = 500) -> Iterator[list[Trial]]:
    chunk: list[Trial] = []
    for t in qs:
        chunk.append(t)
        if len(chunk) == size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def _cell(v: Any) -> Any:
    return "" if v is None else v


def stored_metric_names(sweep: Sweep) -> set[str]:
    """The names of the summary values the sweep's trials stored."""
    return set(SummaryValue.objects.filter(trial__sweep=sweep).values_list("name", flat=True).distinct())


def reported_metrics(sweep: Sweep, job: JobType) -> list[Metric]:
    """The job type's metrics that the sweep's trials reported, in the job's order; all of them
    before any trial has (a metadata sweep of storage_bench offers no throughput to chart)."""
    stored = stored_metric_names(sweep)
    return [m for m in job.metrics if m.name in stored] or list(job.metrics)


def summaries_csv(sweep: Sweep, job: JobType | None) -> Iterator[str]:
    """One row per trial: ids, parameters as written, status, then every summary metric."""
    writer = csv.writer(Echo())
    params = param_columns(sweep)
    declared = [m.name for m in job.metrics] if job else []
    metrics = declared + sorted(stored_metric_names(sweep) - set(declared))
    yield writer.writerow(
        ["trial_id", "index", *params, "repetition", "status", "attempts", "host", "error", *metrics]
    )
    trials = sweep.trials.order_by("index").iterator(chunk_size=500)
    for chunk in _chunks(trials):
        values: dict[int, dict[str, float]] = defaultdict(dict)
        for tid, name, value in SummaryValue.objects.filter(trial__in=chunk).values_list(
            "trial_id", "name", "value"
        ):
            values[tid][name] = value
        for t in chunk:
            row = [t.pk, t.index, *(_cell(t.params.get(p)) for p in params), t.repetition, t.status]
            row += [t.attempts, t.host_name, t.error]
            row += [_cell(values[t.pk].get(m)) for m in metrics]
            yield writer.writerow(row)


def sample_keys(sweep: Sweep) -> list[str]:
    """Distinct keys of the samples' JSON values (PostgreSQL does the scan, not Python)."""
    sample_table = Sample._meta.db_table
    trial_table = Trial._meta.db_table
    with connection.cursor() as cur:
        cur.execute(
            f"SELECT DISTINCT jsonb_object_keys(s.values) FROM {sample_table} s "  # noqa: S608 - table names are ours
            f"JOIN {trial_table} t ON t.id = s.trial_id WHERE t.sweep_id = %s "
            "AND jsonb_typeof(s.values) = 'object'",
            [sweep.pk],
        )
        return sorted(r[0] for r in cur.fetchall())


def samples_csv(sweep: Sweep) -> Iterator[str]:
    """One row per sample: trial id, parameters as written, repetition, kind, index, values."""
    writer = csv.writer(Echo())
    params = param_columns(sweep)
    keys = sample_keys(sweep)
    yield writer.writerow(["trial_id", *params, "repetition", "kind", "index", *keys])
    trials = {
        t["id"]: t for t in sweep.trials.values("id", "params", "repetition")
    }  # parameters per trial, small next to the samples
    rows = (
        Sample.objects.filter(trial__sweep=sweep)
        .order_by("trial_id", "kind", "index")
        .values_list("trial_id", "kind", "index", "values")
        .iterator(chunk_size=2000)
    )
    for tid, kind, index, vals in rows:
        t = trials[tid]
        vals = vals or {}
        yield writer.writerow(
            [tid, *(_cell(t["params"].get(p)) for p in params), t["repetition"], kind, index]
            + [_cell(vals.get(k)) for k in keys]
        )


def server_side(provenance: dict[str, Any] | None) -> str | None:
    """One line on where a remote-desktop trial's server ran, from its provenance (None if not said).

    VM trials say which accelerator ran the guest and why: under TCG a trial's T includes the
    emulator drawing the page (docs/vm.md), so a reader must see it without opening the JSON.
    """
    prov = provenance or {}
    mode = prov.get("server")
    if mode == "namespace":
        return "namespace desktop (X server, browser and protocol server in the server network namespace)"
    if mode != "vm":
        return None
    vm = prov.get("vm") or {}
    accel = str(vm.get("accel") or "?").upper()
    parts = [f"QEMU guest under {accel}"]
    if vm.get("accel_reason"):
        parts[0] += f" ({vm['accel_reason']})"
    if vm.get("start") == "snapshot":
        parts.append(f"started from a saved snapshot (restore {vm.get('restore_s')} s)")
    elif vm.get("start"):
        parts.append("booted")
    if vm.get("boot_to_ready_s") is not None:
        parts.append(f"first page on screen after {vm['boot_to_ready_s']} s")
    if vm.get("snapshot_error"):
        parts.append(f"snapshot not used: {vm['snapshot_error']}")
    return "; ".join(parts)


def tcp_line(link: dict[str, Any] | None) -> str | None:
    """One line on the TCP both namespaces ran, as the worker read it back (None: no link recorded)."""
    if not link:
        return None
    tcp = (link.get("link") or {}).get("tcp")
    if not tcp:
        return "not recorded: the trial ran before qoelab set TCP per trial (the host's default, bbr here)"
    rto = f"{tcp['rto_min_ms']:g} ms"
    if (tcp.get("client") or {}).get("rto_min_source") == "kernel default":
        rto += " (kernel default)"
    return (
        f"{tcp['cc']}, SACK {'on' if tcp['sack'] else 'off'}, buffer ceilings rmem {_kib(tcp['rmem_max'])} "
        f"/ wmem {_kib(tcp['wmem_max'])}, rto_min {rto} (read back in both namespaces)"
    )


def verification_line(link: dict[str, Any] | None) -> str | None:
    """One line on how the trial's link was verified: in full, or by a short check on an earlier run."""
    if not link or "measured" not in link:
        return None
    verdict = "within tolerance" if link.get("ok") else "OUTSIDE tolerance"
    if link.get("mode") != "short":
        return f"in full on this trial (TCP each way, pings, UDP loss probes): {verdict}"
    reused = link.get("reused") or {}
    rtt = (link.get("measured") or {}).get("rtt_ms")
    rtt_text = "no reply" if rtt is None else f"RTT {rtt:.1f} ms"
    age = reused.get("age_s")
    age_text = "" if age is None else f", {age / 60:.0f} min earlier"
    return (
        f"short check on this trial ({link.get('method', {}).get('ping_count', '?')} pings, {rtt_text}): "
        f"{verdict}; rates and loss from the full verification of this condition on "
        f"{reused.get('host') or 'this host'}{age_text}"
    )


def _kib(n: int | None) -> str:
    return "?" if n is None else f"{n / 1024:,.0f} KiB"


def tcg_caveat(sweep: Sweep) -> str | None:
    """Say so when guests of this sweep ran under TCG: their T includes the emulator drawing pages."""
    tcg = sweep.trials.filter(provenance__vm__accel="tcg").count()
    if not tcg:
        return None
    vm = sweep.trials.filter(provenance__server="vm").count()
    return (
        f"{tcg} of this sweep's {vm} VM-mode trials ran their guest under TCG (no working KVM on the "
        "host): their response time T includes the emulated guest drawing each page, so it is not "
        "comparable with KVM guests or the namespace desktop; X compares better (docs/vm.md)."
    )
