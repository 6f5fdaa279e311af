"""Researcher pages for imported studies under /campaigns/studies/ (owner-only, like campaigns)."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import messages
from django.http import HttpRequest, HttpResponse, StreamingHttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from experiments.access import researcher_required
from qoelab.subjective import report
from ratings import studies
from ratings.choices import RatingMethod, StudyFormat
from ratings.models import ImportedStudy
from ratings.views import csv_response


class StudyForm(forms.Form):
    name = forms.CharField(max_length=200)
    source = forms.CharField(
        required=False, widget=forms.Textarea(attrs={"rows": 2}),
        help_text="Where the ratings come from: a citation, a URL or a note (shown on the results page).",
    )  # fmt: skip
    file = forms.FileField(
        label="Rating file (CSV)",
        help_text="long: a header row rater,stimulus,score and optionally condition, reference, repeat; "
        "matrix: P.910 Appendix VI's layout (no header).",
    )
    file_format = forms.ChoiceField(label="Layout", choices=StudyFormat.choices, initial=StudyFormat.LONG)
    method = forms.ChoiceField(
        choices=RatingMethod.choices, initial=RatingMethod.ACR,
        help_text="ACR-HR needs the long layout's reference column (each test stimulus' hidden reference).",
    )  # fmt: skip
    scale_low = forms.FloatField(label="Scale bottom", initial=1)
    scale_high = forms.FloatField(label="Scale top", initial=5)


def _study_or_404(request: HttpRequest, pk: int) -> ImportedStudy:
    return get_object_or_404(ImportedStudy.objects.visible_to(request.user), pk=pk)


@require_GET
@researcher_required
def study_list(request: HttpRequest) -> HttpResponse:
    items = ImportedStudy.objects.visible_to(request.user).defer("votes_csv")
    return render(request, "ratings/study_list.html", {"studies": items})


@require_http_methods(["GET", "POST"])
@researcher_required
def study_new(request: HttpRequest) -> HttpResponse:
    form = StudyForm(request.POST or None, request.FILES or None)
    if request.method == "POST" and form.is_valid():
        d = form.cleaned_data
        upload = d["file"]
        try:
            text = studies.decode(upload.read(), upload.name)
            study = studies.import_study(
                request.user, name=d["name"], text=text, file_format=d["file_format"], method=d["method"],
                scale=(d["scale_low"], d["scale_high"]), source=d["source"], file_name=upload.name,
            )  # fmt: skip
        except studies.StudyError as err:
            form.add_error(err.field if err.field in form.fields else None, err.message)
        else:
            messages.success(
                request, f"Imported '{study.name}': {study.n_votes} votes by {study.n_raters} raters "
                f"on {study.n_stimuli} stimuli.",
            )  # fmt: skip
            return redirect("ratings:study", pk=study.pk)
    status = 400 if request.method == "POST" else 200
    return render(request, "ratings/study_new.html", {"form": form}, status=status)


@require_GET
@researcher_required
def study_results(request: HttpRequest, pk: int) -> HttpResponse:
    study = _study_or_404(request, pk)
    result = studies.analyze(study)
    ctx: dict[str, Any] = {
        "study": study,
        "quantity": report.METHODS[study.method],
        "analysis": result,
        "rows": studies.rows(result),
        "raters": studies.rater_rows(result),
        "model": result["p910"],
        "plain": result["mean"],
        "chart_json": studies.chart_payload(study, result),
    }
    return render(request, "ratings/study_results.html", ctx)


@require_POST
@researcher_required
def study_delete(request: HttpRequest, pk: int) -> HttpResponse:
    study = _study_or_404(request, pk)
    name = study.name
    study.delete()
    messages.success(request, f"Deleted the imported study '{name}'.")
    return redirect("ratings:studies")


@require_GET
@researcher_required
def export_votes(request: HttpRequest, pk: int) -> StreamingHttpResponse:
    """The file as it was imported."""
    study = _study_or_404(request, pk)
    return csv_response(iter([study.votes_csv]), f"study-{study.pk}-votes.csv")


@require_GET
@researcher_required
def export_scores(request: HttpRequest, pk: int) -> StreamingHttpResponse:
    study = _study_or_404(request, pk)
    return csv_response(studies.scores_csv(study), f"study-{study.pk}-scores.csv")
