"""The Link traces page: the library's traces and the researcher's uploaded ones, with what each
offers and the reference a sweep's ``link_trace`` / ``up_link_trace`` names; an upload form."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_http_methods

from experiments import link_traces
from experiments.access import researcher_required
from experiments.models import LinkTrace


@require_http_methods(["GET", "POST"])
@researcher_required
def link_traces_page(request: HttpRequest) -> HttpResponse:
    errors: dict[str, str] = {}
    name = ""
    if request.method == "POST":
        name = request.POST.get("name", "").strip()
        upload = request.FILES.get("file")
        if upload is None:
            errors["file"] = "choose a trace file (one integer millisecond per line)"
        else:
            name = name or upload.name
            try:
                text = upload.read(link_traces.traces.MAX_TRACE_BYTES + 1).decode("ascii")
            except UnicodeDecodeError:
                errors["file"] = f"{upload.name}: not a text file of millisecond timestamps"
            else:
                try:
                    trace, new = link_traces.upload(request.user, name, text)
                except link_traces.TraceRefused as exc:
                    errors["file" if exc.field == "text" else "name"] = exc.message
                else:
                    return redirect(reverse("dashboard:link_traces") + f"?kept={trace.pk}&new={int(new)}")
    mine = [
        link_traces.describe(t) for t in LinkTrace.objects.select_related("owner").visible_to(request.user)
    ]
    kept = request.GET.get("kept", "")
    return render(
        request,
        "dashboard/link_traces.html",
        {
            "library": link_traces.library(),
            "mine": mine,
            "errors": errors,
            "name": name,
            "kept": int(kept) if kept.isdigit() else None,
            "kept_new": request.GET.get("new") == "1",
        },  # fmt: skip
        status=400 if errors else 200,
    )
