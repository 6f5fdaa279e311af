"""Researcher pages: experiments, sweeps (progress, charts, trials), trials, CSV and artifacts.

Every view goes through ``researcher_required`` and looks objects up in the querysets of
``experiments.access``, so another researcher's sweep is a 404 and an evaluator gets a 403.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from typing import Any

from django.contrib import messages
from django.core.paginator import Paginator
from django.db.models import (
    Case,
    Count,
    DurationField,
    ExpressionWrapper,
    F,
    IntegerField,
    Max,
    Q,
    Value,
    When,
)
from django.http import (
    FileResponse,
    Http404,
    HttpRequest,
    HttpResponse,
    HttpResponseBadRequest,
    HttpResponseNotFound,
    JsonResponse,
    StreamingHttpResponse,
)
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from dashboard import reproduce, services, trialpage
from dashboard.forms import SweepForm
from experiments import jobtypes
from experiments import services as experiments_services
from experiments.access import experiments_for, researcher_required, sweeps_for, trials_for
from experiments.choices import TrialStatus
from experiments.models import Sweep
from experiments.sweep_spec import spec_errors
from qoelab import presets
from qoelab_web import listing
from ratings import delivery
from results import findings as results_findings
from results import kinds, tables
from results.models import Artifact, Sample

SAMPLES_PER_PAGE = 50
PLAY_BLOCK = 256 * 1024  # bytes per chunk of a played recording


SWEEP_SORTS = {"name": "Name", "created": "Created", "trials": "Trials"}
SWEEP_ORDER = {"name": ["name"], "created": ["created_at"], "trials": ["n_trials"]}
SWEEP_STATES = [("running", "running"), ("finished", "finished"), ("cancelled", "cancelled")]


def _sweep_state(qs: Any, state: str) -> Any:
    """Sweeps (annotated with n_trials / n_done) in a state: cancelled, finished (every trial done), or
    running (the rest: not cancelled, trials still to do)."""
    if state == "cancelled":
        return qs.filter(cancelled_at__isnull=False)
    live = qs.filter(cancelled_at__isnull=True)
    if state == "finished":
        return live.filter(n_trials__gt=0, n_done=F("n_trials"))
    return live.exclude(n_trials__gt=0, n_done=F("n_trials"))


@require_GET
@researcher_required
def experiment_detail(request: HttpRequest, pk: int) -> HttpResponse:
    experiment = get_object_or_404(experiments_for(request.user).select_related("owner"), pk=pk)
    try:
        lst = listing.parse(
            request,
            sorts=SWEEP_SORTS,
            default_sort="-created",
            filters=[listing.Filter("status", "Status", choices=SWEEP_STATES)],
        )
        sweeps = experiment.sweeps.annotate(**services.trial_counts("trials"))
        if "status" in lst.values:
            sweeps = _sweep_state(sweeps, lst.values["status"])
        page = listing.paginate(lst, sweeps, SWEEP_ORDER)
    except listing.ListError as exc:
        return listing.bad_request(exc)
    job = jobtypes.get_job(experiment.job_type)
    ctx = {
        "experiment": experiment,
        "sweeps": page.object_list,
        "lst": lst,
        "any_sweeps": lst.count > 0 or lst.filtered,
        "job": job,
    }
    return render(request, "dashboard/experiment_detail.html", ctx)


@require_http_methods(["GET", "POST"])
@researcher_required
def sweep_new(request: HttpRequest) -> HttpResponse:
    jobs = jobtypes.offered()
    if not jobs:
        return render(request, "dashboard/sweep_new.html", {"jobs": {}, "form": None}, status=503)
    initial: dict[str, Any] = {}
    exp_id = request.GET.get("experiment", "")
    preset_exp = experiments_for(request.user).filter(pk=exp_id).first() if exp_id.isdigit() else None
    if preset_exp is not None:
        initial["experiment"] = preset_exp.pk
    name = (
        request.POST.get("job_type")
        or request.GET.get("job_type")
        or (preset_exp.job_type if preset_exp else None)
    )
    if name is None:
        name = "link_check" if "link_check" in jobs else sorted(jobs)[0]
    job = jobs.get(name)
    if job is None:
        return HttpResponseBadRequest(
            f"unknown job type {name!r} (known: {jobtypes.known_names()})", content_type="text/plain"
        )

    form = SweepForm(request.POST or None, job=job, user=request.user, initial=initial)
    if request.method == "POST" and form.is_valid():
        try:
            sweep = experiments_services.create_sweep(form.to_spec(), request.user)
        except experiments_services.SpecError as exc:
            form.add_spec_errors(exc.errors)
        else:
            messages.success(request, f"Sweep '{sweep.name}' created with {sweep.trial_count} trials.")
            return redirect("dashboard:sweep", pk=sweep.pk)
    elif request.method == "POST":
        # The form's own mistakes and the sweep spec's (values, bounds, an empty grid) in one round.
        form.add_spec_errors(spec_errors(form.to_spec(), request.user))
    status = 400 if request.method == "POST" else 200
    return render(
        request,
        "dashboard/sweep_new.html",
        {"form": form, "job": job, "jobs": sorted(jobs.values(), key=lambda j: j.name)},
        status=status,
    )


LONG_RUN_S = 3600  # a preset estimated longer than this is started only after a confirmation


@require_GET
@researcher_required
def reproduce_page(request: HttpRequest) -> HttpResponse:
    return render(
        request,
        "dashboard/reproduce.html",
        {"chapters": reproduce.chapters(), "committed": reproduce.committed_verdicts()},
    )


@require_POST
@researcher_required
def reproduce_start(request: HttpRequest, key: str) -> HttpResponse:
    from ratings.campaigns import CampaignError

    try:
        preset = presets.get(key)
        size = request.POST.get("size", "")
        if size not in presets.SIZES:
            raise ValueError(f"size must be one of {', '.join(presets.SIZES)}, got {size!r}")
        # A run of more than an hour (a full preset: up to 7.5 h) asks once more (issue 33).
        estimate = reproduce.plan(preset, size)  # type: ignore[arg-type]
        if estimate["seconds"] > LONG_RUN_S and request.POST.get("confirm") != "yes":
            return render(request, "dashboard/reproduce_confirm.html", {"preset": preset, "plan": estimate})
        mode = request.POST.get("mode", "live")
        kind, made = reproduce.start(preset, size, request.user, mode)  # type: ignore[arg-type]
    except ValueError as exc:
        return HttpResponseBadRequest(str(exc), content_type="text/plain")
    except (experiments_services.SpecError, CampaignError) as exc:
        messages.error(request, f"{preset.figure} could not start: {exc}")
        return redirect("dashboard:reproduce")
    if kind == "sweep":
        messages.success(request, f"{preset.figure} ({size}) started: {made.trial_count} trials.")
        return redirect("dashboard:sweep", pk=made.pk)
    if made.sweep_id:
        messages.success(
            request, f"{preset.figure} ({size}): campaign created from sweep '{made.sweep.name}', which "
            "records one session per condition first; invite evaluators, and open it once the recordings "
            "exist.",
        )  # fmt: skip
        return redirect("ratings:campaign", pk=made.pk)
    messages.success(request, f"{preset.figure} ({size}): campaign created; invite evaluators, then open it.")
    return redirect("ratings:campaign", pk=made.pk)


def _sweep_or_404(request: HttpRequest, pk: int) -> Sweep:
    return get_object_or_404(sweeps_for(request.user), pk=pk)


def _trial_rows(sweep: Sweep):
    return sweep.trials.only(
        "id",
        "sweep",  # else each row loads its sweep_id (the related manager sets .sweep): a query per row
        "index",
        "params",
        "repetition",
        "status",
        "attempts",
        "max_attempts",
        "host_name",
        "started_at",
        "finished_at",
        "error",
    )


TRIAL_SORTS = {
    "run": "Run order",
    "id": "Trial",
    "point": "Point",
    "status": "Status",
    "duration": "Duration",
}
PROTOCOL = "protocol"  # the parameter a sweep's trials filter on, when it is swept


def _point_order(sweep: Sweep) -> list[Any]:
    """``order_by`` for the grid point (trialpage's numbering, in SQL), then the repetition."""
    keys = [k for k in (sweep.grid_order or sorted(sweep.grid)) if k in sweep.grid]
    exprs: list[Any] = []
    for k in keys:
        values = sweep.grid[k]
        whens = [When(~Q(params__has_key=k), then=Value(-1))]
        whens += [When(**{f"params__{k}": v}, then=Value(j)) for j, v in enumerate(values)]
        exprs.append(Case(*whens, default=Value(len(values)), output_field=IntegerField()).asc())
    return [*exprs, "repetition"]


def _trial_order(sweep: Sweep) -> Any:
    def order(key: str) -> list[Any]:
        if key == "point":
            return _point_order(sweep)
        if key == "duration":
            span = ExpressionWrapper(F("finished_at") - F("started_at"), output_field=DurationField())
            return [span.asc(nulls_last=True)]
        return {"run": ["index"], "id": ["pk"], "status": ["status", "index"]}[key]

    return order


def _trial_listing(request: HttpRequest, sweep: Sweep) -> dict[str, Any]:
    """The trial table's context for one page of the sweep's trials (ListError on a bad query)."""
    filters = [listing.Filter("status", "Status", choices=list(TrialStatus.choices))]
    protocols = sweep.grid.get(PROTOCOL) if isinstance(sweep.grid, dict) else None
    if protocols:
        filters.append(listing.Filter(PROTOCOL, "Protocol", choices=[(str(v), str(v)) for v in protocols]))
    lst = listing.parse(request, sorts=TRIAL_SORTS, default_sort="run", filters=filters)
    rows = _trial_rows(sweep)
    if "status" in lst.values:
        rows = rows.filter(status=lst.values["status"])
    if PROTOCOL in lst.values:
        value = next(v for v in protocols if str(v) == lst.values[PROTOCOL])
        rows = rows.filter(**{f"params__{PROTOCOL}": value})
    page = listing.paginate(lst, rows, _trial_order(sweep))
    trials = list(page.object_list)
    # Places count over the whole sweep (its distinct parameter sets), not over this page.
    distinct = list(sweep.trials.order_by().values_list("params", flat=True).distinct())
    numbers = trialpage._point_numbers(sweep, distinct)
    stats = sweep.trials.aggregate(n=Count("id"), last_rep=Max("repetition"))
    reps = max(sweep.repetitions, (stats["last_rep"] or 0) + 1)
    runs = max(sweep.trial_count, stats["n"])
    by_pk = {
        t.pk: trialpage.Place(
            numbers.get(trialpage._params_key(t.params), 0),
            len(numbers),
            t.repetition + 1,
            reps,
            t.index + 1,
            runs,
        )
        for t in trials
    }
    return {
        "trials": trials,
        "lst": lst,
        "places": {"by_pk": by_pk, "points": len(numbers)},
        "param_columns": services.param_columns(sweep),
        "trials_query": lst.current_query if lst.current_query != "?" else "",
    }


@require_GET
@researcher_required
def sweep_detail(request: HttpRequest, pk: int) -> HttpResponse:
    sweep = _sweep_or_404(request, pk)
    try:
        trial_table = _trial_listing(request, sweep)
    except listing.ListError as exc:
        return listing.bad_request(exc)
    job = jobtypes.get_job(sweep.job_type)
    progress = services.progress(sweep)
    swept = list(sweep.grid_order or sweep.grid)
    metrics = services.reported_metrics(sweep, job) if job else []
    if job is None:
        messages.error(
            request, f"Job type {sweep.job_type!r} is not registered here; charts are unavailable."
        )
    chart_base = reverse("dashboard:sweep_chart", args=[sweep.pk])
    presets = [
        {"spec": c, "url": f"{chart_base}?preset={c.key}"}
        for c in (job.charts if job else ())
        # A preset whose x is not swept here would be a single point; a time series (x = t) needs none.
        if c.x in sweep.grid or c.source == "series"
    ]
    first = sweep.trials.values_list("resolved", flat=True).first() or {}
    numeric = [p for p in swept if type(first.get(p)) in (int, float)]  # bool is not a number here
    x_choices = numeric + [p for p in swept if p not in numeric]
    ctx = {
        "sweep": sweep,
        "experiment": sweep.experiment,
        "job": job,
        "progress": progress,
        "param_columns": services.param_columns(sweep),
        "swept": swept,
        "metrics": metrics,
        "presets": presets,
        # The job type's tables in a paper's layout (storage_bench: Tables 6.1-6.3), where it has cells.
        "tables": tables.sweep_tables(sweep, job),
        **trial_table,
        "can_cancel": not progress["finished"] and not sweep.is_cancelled,
        "tcg_caveat": services.tcg_caveat(sweep),
        # The thesis' findings that apply to this sweep (rd_qoe only), checked on its results.
        "findings": results_findings.sweep_findings(sweep)
        if results_findings.report_for(sweep.job_type)
        else None,
        # Numbers first on x (text values draw as categories); series defaults to another swept parameter.
        "x_choices": x_choices,
        "default_series": next((p for p in x_choices if p != x_choices[0]), "") if x_choices else "",
    }
    return render(request, "dashboard/sweep_detail.html", ctx)


@require_GET
@researcher_required
def sweep_trials(request: HttpRequest, pk: int) -> HttpResponse:
    """The trial table alone (same query string as the page), for the page's live refresh."""
    sweep = _sweep_or_404(request, pk)
    try:
        ctx = {"sweep": sweep, **_trial_listing(request, sweep)}
    except listing.ListError as exc:
        return listing.bad_request(exc)
    return render(request, "dashboard/_trial_table.html", ctx)


@require_POST
@researcher_required
def sweep_cancel(request: HttpRequest, pk: int) -> HttpResponse:
    sweep = _sweep_or_404(request, pk)
    n = experiments_services.cancel_sweep(sweep)
    messages.success(request, f"Sweep cancelled: {n} waiting trials stopped; running trials finish.")
    return redirect("dashboard:sweep", pk=sweep.pk)


def _flag(value: str | None) -> bool:
    return (value or "").lower() in ("1", "true", "on", "yes")


@require_GET
@researcher_required
def sweep_chart(request: HttpRequest, pk: int) -> JsonResponse:
    """Chart data: ?preset=<key>, or ?y=<metric>&x=<param>[&series=<param>][&facet=<param>][&log_x=on]
    [&log_y=on]. ``panels`` holds one panel per value of the facet parameter (a single panel without one).
    """
    sweep = _sweep_or_404(request, pk)
    job = jobtypes.get_job(sweep.job_type)
    if job is None:
        return JsonResponse({"detail": f"job type {sweep.job_type!r} is not registered"}, status=404)
    preset = request.GET.get("preset")
    if preset:
        spec = next((c for c in job.charts if c.key == preset), None)
        if spec is None:
            keys = ", ".join(c.key for c in job.charts) or "none"
            return JsonResponse({"detail": f"preset: no chart {preset!r} (charts: {keys})"}, status=400)
    else:
        params = {p.name for p in services.describe_params(job)}
        metrics = {m.name for m in job.metrics}
        y, x, series = request.GET.get("y", ""), request.GET.get("x", ""), request.GET.get("series") or None
        facet = request.GET.get("facet") or None
        errors = {}
        if y not in metrics:
            errors["y"] = f"must be a metric of {job.name} ({', '.join(sorted(metrics))})"
        if x not in params:
            errors["x"] = f"must be a parameter of {job.name} ({', '.join(sorted(params))})"
        if series is not None and series not in params:
            errors["series"] = f"must be a parameter of {job.name} or empty"
        if series is not None and series == x:
            errors["series"] = "must differ from x"
        if facet is not None and facet not in params:
            errors["facet"] = f"must be a parameter of {job.name} or empty"
        elif facet is not None and facet in (x, series):
            errors["facet"] = "must differ from x and series"
        if errors:
            return JsonResponse({"detail": "invalid chart", "errors": errors}, status=400)
        spec = services.custom_spec(
            job, y, x, series, _flag(request.GET.get("log_x")), _flag(request.GET.get("log_y")), facet
        )
    return JsonResponse(services.chart_payload(sweep, job, spec))


def _csv_response(rows, filename: str) -> StreamingHttpResponse:
    response = StreamingHttpResponse(rows, content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    return response


@require_GET
@researcher_required
def export_summaries(request: HttpRequest, pk: int) -> StreamingHttpResponse:
    sweep = _sweep_or_404(request, pk)
    job = jobtypes.get_job(sweep.job_type)
    return _csv_response(services.summaries_csv(sweep, job), f"sweep-{sweep.pk}-summaries.csv")


@require_GET
@researcher_required
def export_samples(request: HttpRequest, pk: int) -> StreamingHttpResponse:
    sweep = _sweep_or_404(request, pk)
    return _csv_response(services.samples_csv(sweep), f"sweep-{sweep.pk}-samples.csv")


@require_GET
@researcher_required
def trial_detail(request: HttpRequest, pk: int) -> HttpResponse:
    trial = get_object_or_404(trials_for(request.user), pk=pk)
    job = jobtypes.get_job(trial.sweep.job_type)
    summary = trialpage.summary_rows(job, trial.summary.order_by("name"))
    samples_qs = Sample.objects.filter(trial=trial).order_by("kind", "index")
    page = Paginator(samples_qs, SAMPLES_PER_PAGE).get_page(request.GET.get("page"))
    sample_values = [s.values if isinstance(s.values, dict) else {} for s in page.object_list]
    sample_keys = sorted({k for v in sample_values for k in v})
    artifacts = list(trial.artifacts.order_by("attempt", "id"))
    # Recordings play in the page; one whose bytes are not WebM/MP4 says why instead of a broken player.
    recordings = [{"artifact": a, "refused": trialpage.playable(a)} for a in artifacts if a.kind == "video"]
    link_rows, link_left_off = trialpage.flatten(trial.link) if trial.link else ([], 0)
    provenance = trialpage.flatten(trial.provenance) if trial.provenance else ([], 0)
    provenance_rows, provenance_left_off = provenance
    ctx = {
        "trial": trial,
        "sweep": trial.sweep,
        "place": trialpage.trial_place(trial),
        "summary": summary,
        "samples": page,
        "sample_columns": trialpage.sample_columns(job, sample_keys, sample_values),
        "artifacts": artifacts,
        "recordings": recordings,
        "logs": trialpage.log_previews(artifacts),
        "link_log": trialpage.link_log_chart(artifacts),
        "link_rows": link_rows,
        "link_left_off": link_left_off,
        "provenance_rows": provenance_rows,
        "provenance_left_off": provenance_left_off,
        "thinclient": trialpage.thinclient_table(trial.provenance),
        "link_json": json.dumps(trial.link, indent=2, sort_keys=True) if trial.link else "",
        "provenance_json": json.dumps(trial.provenance, indent=2, sort_keys=True) if trial.provenance else "",
        "server_side": services.server_side(trial.provenance),
        "tcp_line": services.tcp_line(trial.link),
        "verification_line": services.verification_line(trial.link),
        "params_json": json.dumps(trial.params, indent=2),
        "resolved_json": json.dumps(trial.resolved, indent=2),
    }
    return render(request, "dashboard/trial_detail.html", ctx)


@require_GET
@researcher_required
def artifact_download(request: HttpRequest, pk: int) -> FileResponse:
    artifact = get_object_or_404(
        Artifact.objects.filter(trial__in=trials_for(request.user)).select_related("trial"), pk=pk
    )
    try:
        return kinds.file_response(artifact)  # its kind's content type (never the name's), as an attachment
    except FileNotFoundError:
        raise Http404(f"the file of artifact {artifact.pk} is missing from storage") from None


def _plain_404(reason: str) -> HttpResponseNotFound:
    return HttpResponseNotFound(reason, content_type="text/plain; charset=utf-8")


def _byte_range(handle: Any, start: int, end: int) -> Iterator[bytes]:
    handle.seek(start)
    left = end - start
    while left > 0:
        chunk = handle.read(min(PLAY_BLOCK, left))
        if not chunk:
            break
        left -= len(chunk)
        yield chunk


@require_GET
@researcher_required
def artifact_play(request: HttpRequest, pk: int) -> HttpResponse:
    """A recording played in the trial page: inline, WebM/MP4 by its bytes, with HTTP Range for seeking.

    The same ownership check as the download (another researcher's artifact is a 404); an artifact
    that is not playable media (another kind, or bytes that are not WebM/MP4) is a 404 saying why.
    """
    artifact = get_object_or_404(
        Artifact.objects.filter(trial__in=trials_for(request.user)).select_related("trial"), pk=pk
    )
    try:
        response = kinds.file_response(artifact, inline=True)
    except FileNotFoundError:
        return _plain_404(f"the file of artifact {artifact.pk} is missing from storage")
    except kinds.ContentMismatch as exc:
        return _plain_404(f"{exc.message}; download it instead")
    handle = response.file_to_stream
    size = handle.seek(0, os.SEEK_END)
    handle.seek(0)
    try:
        byte_range = delivery.parse_range(request.headers.get("Range"), size)
    except delivery.RangeNotSatisfiable:
        handle.close()  # not response.close(): that signals the end of the request (closes the DB)
        refused = HttpResponse(status=416)
        refused["Content-Range"] = f"bytes */{size}"
        return refused
    response["Accept-Ranges"] = "bytes"
    response["Cache-Control"] = "private, no-store"
    if byte_range is not None:
        start, end = byte_range
        response.streaming_content = _byte_range(handle, start, end)
        response.status_code = 206
        response["Content-Range"] = f"bytes {start}-{end - 1}/{size}"
        response["Content-Length"] = str(end - start)
    return response
