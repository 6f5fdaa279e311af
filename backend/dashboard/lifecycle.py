"""Lifecycle pages: delete (behind a confirmation page), archive, clone a sweep into the form, re-run
failed trials; and the experiment list with its "show archived" filter.

A confirmation is a server-rendered page (the CSP allows no inline script, and it works without
JavaScript): GET lists what would go, taken from ``experiments.lifecycle``'s plan, with any reason it
cannot go now; POST deletes, checked again. Lookups go through ``experiments.access`` as everywhere:
another researcher's experiment is a 404, staff may act on all.
"""

from __future__ import annotations

import json
from typing import Any

from django.contrib import messages
from django.db.models import Count, Q
from django.http import HttpRequest, HttpResponse, HttpResponseBadRequest
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from dashboard import views
from dashboard.forms import SweepForm
from dashboard.services import describe_params, trial_counts
from experiments import archiving, jobtypes, lifecycle
from experiments.access import experiments_for, researcher_required, sweeps_for
from experiments.choices import TrialStatus
from experiments.models import Experiment, Sweep, Trial
from qoelab_web import listing

RECENT_SWEEPS = 10  # on the experiment list


def _archived(request: HttpRequest) -> bool | None:
    """``?archived=1`` lists archived ones, ``?archived=all`` everything; ValueError on anything else."""
    return archiving.parse_archived(request.GET.get("archived"))


EXPERIMENT_SORTS = {"name": "Name", "created": "Created", "trials": "Trials"}
EXPERIMENT_ORDER = {"name": ["name"], "created": ["created_at"], "trials": ["n_trials"]}


@require_GET
@researcher_required
def experiment_list(request: HttpRequest) -> HttpResponse:
    """Experiments (paginated, sorted, filtered: qoelab_web.listing) and recent sweeps; archived
    experiments (and their sweeps) only with ``?archived=1``."""
    try:
        archived = _archived(request)
    except ValueError as exc:
        return HttpResponseBadRequest(f"archived: {exc}", content_type="text/plain")
    mine = experiments_for(request.user)
    shown = archiving.filter_archived(mine, archived)
    job_types = sorted(set(shown.order_by().values_list("job_type", flat=True).distinct()))
    filters = [
        listing.Filter("job_type", "Job type", choices=[(j, j) for j in job_types]),
        listing.Filter("q", "Name contains", kind="text"),
        listing.Filter("from", "Created from", kind="date"),
        listing.Filter("to", "Created to", kind="date"),
    ]
    if request.user.is_staff:
        owners = shown.order_by("owner__username").values_list("owner__username", flat=True).distinct()
        filters.insert(1, listing.Filter("owner", "Owner", choices=[(o, o) for o in owners]))
    try:
        lst = listing.parse(
            request, sorts=EXPERIMENT_SORTS, default_sort="-created", filters=filters, keep=["archived"]
        )
        where: dict[str, Any] = listing.date_range(lst, "created_at")
        if "job_type" in lst.values:
            where["job_type"] = lst.values["job_type"]
        if "owner" in lst.values:
            where["owner__username"] = lst.values["owner"]
        if "q" in lst.values:
            where["name__icontains"] = lst.values["q"]
        experiments = shown.filter(**where).select_related("owner")
        if lst.sort.removeprefix("-") == "trials":  # the one order that needs every experiment's count
            experiments = experiments.annotate(n_trials=Count("sweeps__trials"))
        page = listing.paginate(lst, experiments, EXPERIMENT_ORDER)
    except listing.ListError as exc:
        return listing.bad_request(exc)
    rows = _with_counts(list(page.object_list))
    # The newest sweeps by the index first, then their counts: annotating before the cut counted the
    # trials of every sweep in the lab (issue 33: 42 ms of 100 at 10,000 sweeps).
    newest = (
        archiving.filter_archived(sweeps_for(request.user), archived, "experiment__archived_at")
        .order_by("-created_at", "-pk")
        .values_list("pk", flat=True)[:RECENT_SWEEPS]
    )
    recent = (
        Sweep.objects.filter(pk__in=list(newest))
        .select_related("experiment")
        .annotate(
            **trial_counts("trials"),
            n_cancelled=Count("trials", filter=Q(trials__status=TrialStatus.CANCELLED)),
        )
        .order_by("-created_at", "-pk")  # the newest first (it listed the oldest)
    )
    ctx = {
        "experiments": rows,
        "lst": lst,
        "any_experiments": lst.count > 0 or lst.filtered,
        "recent": recent,
        "archived": archived,
        "n_archived": mine.filter(archived_at__isnull=False).count(),
    }
    return render(request, "dashboard/experiment_list.html", ctx)


def _with_counts(experiments: list[Experiment]) -> list[Experiment]:
    """Sweep and trial counts of one page of experiments, in two grouped queries over that page only
    (annotating the whole list aggregated every trial of the lab before cutting the page, issue 33)."""
    ids = [e.pk for e in experiments]
    sweeps = dict(
        Sweep.objects.filter(experiment_id__in=ids)
        .order_by()
        .values("experiment_id")
        .annotate(n=Count("pk"))
        .values_list("experiment_id", "n")
    )
    trials = {
        row["sweep__experiment_id"]: row
        for row in Trial.objects.filter(sweep__experiment_id__in=ids)
        .order_by()
        .values("sweep__experiment_id")
        .annotate(**trial_counts())
    }
    for e in experiments:
        row = trials.get(e.pk, {})
        e.n_sweeps = sweeps.get(e.pk, 0)
        e.n_trials, e.n_done, e.n_failed = (row.get(k, 0) for k in ("n_trials", "n_done", "n_failed"))
    return experiments


@require_POST
@researcher_required
def experiment_archive(request: HttpRequest, pk: int) -> HttpResponse:
    """POST ``archived=1`` hides the experiment and its sweeps from the lists; ``archived=0`` restores."""
    experiment = get_object_or_404(experiments_for(request.user), pk=pk)
    archive = request.POST.get("archived", "1") != "0"
    archiving.set_experiment_archived(experiment, archive)
    if archive:
        messages.success(
            request,
            f"Experiment '{experiment.name}' archived: it and its sweeps are hidden from the lists "
            "(Experiments › Show archived finds them).",
        )
    else:
        messages.success(request, f"Experiment '{experiment.name}' is back in the lists.")
    return redirect("dashboard:experiment", pk=experiment.pk)


def _confirm(
    request: HttpRequest, plan: lifecycle.DeletePlan, back: str, refused: list[str] | None = None
) -> HttpResponse:
    """The confirmation page: what goes and why it cannot; 409 when a POST deleted nothing."""
    ctx = {"plan": plan, "back": back, "action": request.path, "refused": refused}
    status = 409 if refused is not None else 200  # the GET page itself is fine, reasons and all
    return render(request, "dashboard/confirm_delete.html", ctx, status=status)


def _replan(plan: lifecycle.DeletePlan, user: Any) -> lifecycle.DeletePlan:
    if plan.kind == "experiment":
        return lifecycle.plan_experiment_delete(plan.target, user)  # type: ignore[arg-type]
    return lifecycle.plan_sweep_delete(plan.target, user)  # type: ignore[arg-type]


def _delete(request: HttpRequest, plan: lifecycle.DeletePlan, back: str, done: str) -> HttpResponse:
    if request.method == "GET":
        return _confirm(request, plan, back)
    try:
        report = lifecycle.delete(plan, request.user, expect=request.POST.get("expect", ""))
    except lifecycle.Refused as exc:
        if not type(plan.target).objects.filter(pk=plan.target.pk).exists():
            messages.error(request, " ".join(exc.reasons))
            return redirect(done)
        # Nothing was deleted: show the list as it is now, with the reason (once).
        fresh = _replan(plan, request.user)
        return _confirm(request, fresh, back, refused=[r for r in exc.reasons if r not in fresh.refusals])
    messages.success(request, str(report))
    return redirect(done)


@require_http_methods(["GET", "POST"])
@researcher_required
def experiment_delete(request: HttpRequest, pk: int) -> HttpResponse:
    experiment = get_object_or_404(experiments_for(request.user).select_related("owner"), pk=pk)
    plan = lifecycle.plan_experiment_delete(experiment, request.user)
    back = reverse("dashboard:experiment", args=[experiment.pk])
    return _delete(request, plan, back, reverse("dashboard:experiments"))


@require_http_methods(["GET", "POST"])
@researcher_required
def sweep_delete(request: HttpRequest, pk: int) -> HttpResponse:
    sweep = get_object_or_404(sweeps_for(request.user), pk=pk)
    plan = lifecycle.plan_sweep_delete(sweep, request.user)
    back = reverse("dashboard:sweep", args=[sweep.pk])
    return _delete(request, plan, back, reverse("dashboard:experiment", args=[sweep.experiment_id]))


@require_POST
@researcher_required
def sweep_rerun_failed(request: HttpRequest, pk: int) -> HttpResponse:
    sweep = get_object_or_404(sweeps_for(request.user), pk=pk)
    try:
        n = lifecycle.rerun_failed(sweep, request.user)
    except lifecycle.Refused as exc:
        for reason in exc.reasons:
            messages.error(request, reason)
    else:
        if n:
            messages.success(
                request,
                f"{n} failed trial{'s' if n != 1 else ''} re-queued with fresh attempts; "
                "their earlier failures stay in each trial's attempt log.",
            )
        else:
            messages.info(request, "No failed trials to re-run.")
    return redirect("dashboard:sweep", pk=sweep.pk)


# --- clone a sweep into the form ----------------------------------------------------------------


def _as_text(value: Any) -> str:
    """A stored parameter value as a person would type it in the form."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)  # round-trips exactly (1e6 -> '1000000.0'); the job type reads plain numbers
    return json.dumps(value)


def clone_initial(sweep: Sweep, job: Any, user: Any) -> tuple[dict[str, Any], list[str]]:
    """The new-sweep form's initial values copied from ``sweep``, and notes on what could not be."""
    known = {p.name for p in describe_params(job)}
    initial: dict[str, Any] = {
        "repetitions": sweep.repetitions,
        "order": sweep.order,
        "name": "",
    }
    notes = []
    mine = Experiment.objects.filter(pk=sweep.experiment_id, owner=user, job_type=job.name).first()
    if mine is not None:
        initial["experiment"] = mine.pk
    else:  # staff cloning someone else's sweep: a new experiment of their own, named alike
        initial["new_experiment"] = sweep.experiment.name
    for name in sweep.grid_order or list(sweep.grid):
        values = sweep.grid.get(name)
        if values is None:
            continue
        if name not in known:
            notes.append(f"Swept parameter '{name}' is no longer a parameter of {job.name}: left out.")
            continue
        texts = [_as_text(v) for v in values]
        if any("," in t for t in texts):
            notes.append(f"A value of '{name}' contains a comma, which the form cannot list: check that row.")
        initial[f"grid_{name}"] = ", ".join(texts)
    for name, value in (sweep.fixed or {}).items():
        if name not in known:
            notes.append(f"Fixed parameter '{name}' is no longer a parameter of {job.name}: left out.")
            continue
        initial[f"fixed_{name}"] = _as_text(value)
    if sweep.order == "random":
        notes.append(
            f"The seed is left empty, so the new sweep is shuffled afresh; enter {sweep.seed} to repeat "
            "the original order."
        )
    return initial, notes


@require_http_methods(["GET", "POST"])
@researcher_required
def sweep_new(request: HttpRequest) -> HttpResponse:
    """The new-sweep form; ``?from=<sweep id>`` prefills it from that sweep (nothing is created until
    the form is submitted, which ``views.sweep_new`` handles as any other)."""
    source = request.GET.get("from", "")
    if request.method != "GET" or not source:
        return views.sweep_new(request)
    if not source.isdigit():
        return HttpResponseBadRequest(f"from: must be a sweep id, got {source!r}", content_type="text/plain")
    sweep = get_object_or_404(sweeps_for(request.user), pk=int(source))
    jobs = jobtypes.offered()
    job = jobs.get(sweep.job_type)
    if job is None:
        messages.error(
            request,
            f"Job type {sweep.job_type!r} is not registered in this backend, so the sweep cannot be cloned.",
        )
        return redirect("dashboard:sweep", pk=sweep.pk)
    initial, notes = clone_initial(sweep, job, request.user)
    form = SweepForm(None, job=job, user=request.user, initial=initial)
    ctx = {
        "form": form,
        "job": job,
        "jobs": sorted(jobs.values(), key=lambda j: j.name),
        "clone_of": sweep,
        "clone_notes": notes,
    }
    return render(request, "dashboard/sweep_new.html", ctx)
