"""Compare sweeps: one metric of two or more sweeps of one job type, overlaid in one chart.

The point is to hold runs against each other that one sweep cannot: namespace against VM mode, two
dates, two hosts. Each sweep contributes its own series (split by ``series`` if given), aggregated
exactly as on its own page (``services.chart_payload``: mean and 95 % CI per x), so a point here is
the same number as the sweep page shows.

Pages: ``/compare/?job_type=..&sweeps=..&sweeps=..&y=..&x=..[&series=..]``; data:
``/compare/chart.json`` with the same query (400 naming the field when the choice cannot be drawn).
"""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.http import require_GET

from dashboard import services
from experiments import jobtypes
from experiments.access import researcher_required, sweeps_for

MAX_SWEEPS = 8  # the palette's colours; more series than that cannot be told apart
CHOICES_SHOWN = 200  # newest sweeps offered per job type


def _choice(request: HttpRequest) -> tuple[dict[str, Any], dict[str, str]]:
    """The query, checked: (cleaned values, errors by field)."""
    q = request.GET
    errors: dict[str, str] = {}
    job = jobtypes.get_job(q.get("job_type", ""))
    ids = [int(v) for v in q.getlist("sweeps") if v.isdigit()]
    sweeps = list(sweeps_for(request.user).filter(pk__in=ids).order_by("created_at"))
    if job is None:
        errors["job_type"] = f"must be a registered job type ({jobtypes.known_names()})"
        return {"job": None, "sweeps": sweeps}, errors
    if len(sweeps) != len(set(ids)):
        errors["sweeps"] = "no such sweep of yours: " + ", ".join(
            str(i) for i in sorted(set(ids) - {s.pk for s in sweeps})
        )
    elif not 2 <= len(sweeps) <= MAX_SWEEPS:
        errors["sweeps"] = f"pick from 2 to {MAX_SWEEPS} sweeps (got {len(sweeps)})"
    other = sorted({s.job_type for s in sweeps} - {job.name})
    if other:
        errors["sweeps"] = f"all must be {job.name} sweeps (got {', '.join(other)})"
    params = [p.name for p in services.describe_params(job)]
    metrics = [m.name for m in job.metrics]
    y, x, series = q.get("y", ""), q.get("x", ""), q.get("series") or None
    if y not in metrics:
        errors["y"] = f"must be a metric of {job.name} ({', '.join(metrics)})"
    if x not in params:
        errors["x"] = f"must be a parameter of {job.name} ({', '.join(params)})"
    if series is not None and (series not in params or series == x):
        errors["series"] = "must be another parameter than x, or empty"
    return {"job": job, "sweeps": sweeps, "y": y, "x": x, "series": series}, errors


def payload(sweeps: list[Any], job: Any, y: str, x: str, series: str | None) -> dict[str, Any]:
    """One chart payload (charts.js format) with each sweep's series, labelled by sweep."""
    spec = services.custom_spec(job, y, x, series, False, False)
    out: dict[str, Any] | None = None
    for sweep in sweeps:
        one = services.chart_payload(sweep, job, spec)
        # A sweep's own series (rd_qoe: one per protocol, even without ``series``) keep their
        # label beside the sweep's: two sweeps showed twice each under one label (issue 33).
        own = bool(series) or len(one["series"]) > 1
        for s in one["series"]:
            s["label"] = f"#{sweep.pk} {sweep.name}" + (f" · {s['label']}" if own and s["label"] else "")
        if out is None:
            out = {**one, "series": [], "panels": [], "facet": None}
            out["title"] = f"{spec.title}: {len(sweeps)} sweeps"
        out["series"] += one["series"]
    assert out is not None
    out["panels"] = [{"value": None, "label": "", "series": out["series"]}]
    return out


@require_GET
@researcher_required
def compare_chart(request: HttpRequest) -> JsonResponse:
    choice, errors = _choice(request)
    if errors:
        return JsonResponse({"detail": "cannot compare these", "errors": errors}, status=400)
    return JsonResponse(payload(choice["sweeps"], choice["job"], choice["y"], choice["x"], choice["series"]))


@require_GET
@researcher_required
def compare_page(request: HttpRequest) -> HttpResponse:
    job = jobtypes.get_job(request.GET.get("job_type", ""))
    job_types = sorted(
        set(sweeps_for(request.user).values_list("job_type", flat=True)) & set(jobtypes.registry())
    )
    ctx: dict[str, Any] = {"job": job, "job_types": job_types, "max_sweeps": MAX_SWEEPS}
    if job is not None:
        ctx["choices"] = list(
            sweeps_for(request.user).filter(job_type=job.name).order_by("-created_at")[:CHOICES_SHOWN]
        )
        ctx["picked"] = {int(v) for v in request.GET.getlist("sweeps") if v.isdigit()}
        ctx["params"] = services.describe_params(job)
        ctx["metrics"] = job.metrics
        ctx["y"], ctx["x"], ctx["series"] = (request.GET.get(k, "") for k in ("y", "x", "series"))
        if "y" in request.GET:
            choice, errors = _choice(request)
            ctx["errors"] = errors
            if not errors:
                ctx["chart_url"] = f"{reverse('dashboard:compare_chart')}?{request.GET.urlencode()}"
    return render(request, "dashboard/compare.html", ctx)
