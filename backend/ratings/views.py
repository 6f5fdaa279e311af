"""Researcher pages under /campaigns/: create (from a sweep or by hand), invite, progress, results, CSV.

Owner-only like the dashboard: ``researcher_required`` and lookups through ``owned_campaigns``, so
another researcher's campaign is a 404 and an evaluator (no account) is sent to the login page.
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import messages
from django.db.models import Count, Q
from django.http import HttpRequest, HttpResponse, HttpResponseBadRequest, StreamingHttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from experiments import jobtypes
from experiments.access import researcher_required, sweeps_for
from experiments.archiving import parse_archived
from qoelab_web import listing
from qoelab_web.baseurl import BaseUrlMissing, site_base_url
from ratings import analysis, campaigns, delivery, invitations, live
from ratings.choices import (
    DEFAULT_ASPECTS,
    LIVE_ASPECTS,
    RECORDED_ASPECTS,
    CampaignMode,
    CampaignStatus,
    ConditionKind,
    RatingMethod,
)
from ratings.models import Campaign, Condition, Evaluator

RECORDED_LABELS = [label for key, label in DEFAULT_ASPECTS if key in RECORDED_ASPECTS]


class CampaignForm(forms.Form):
    name = forms.CharField(max_length=200, label="Campaign name")
    mode = forms.ChoiceField(choices=CampaignMode.choices, initial=CampaignMode.RECORDED, label="Mode")
    method = forms.ChoiceField(
        choices=RatingMethod.choices,
        initial=RatingMethod.DCR,
        required=False,  # a form posted without it (an older page, a script) makes the thesis' DCR
        label="Method (ITU-T P.910)",
        help_text="DCR: the reference, then the case, rated for impairment (the thesis'). ACR: the case "
        "alone, rated for quality (MOS). ACR-HR: ACR with the reference hidden among the cases (DMOS = "
        "vote − the same evaluator's vote on the reference + 5); recorded campaigns only.",
    )
    sweep = forms.ModelChoiceField(
        queryset=None, required=False, label="Conditions from sweep", empty_label="— none (by hand) —"
    )
    conditions = forms.CharField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 4}),
        label="Conditions by hand",
        help_text="One per line: protocol rate delay [loss], e.g. 'vnc 1mbit 10ms 0%'. Added to the sweep's.",
    )
    aspects = forms.CharField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 4}),
        label="Aspects to rate",
        help_text="One per line, in the order evaluators see them. Empty: the mode's default — recorded: "
        f"{' and '.join(RECORDED_LABELS)} (a viewer cannot judge mouse or keyboard response); live: "
        f"{', '.join(label for key, label in DEFAULT_ASPECTS if key in LIVE_ASPECTS)} (the live pages have "
        "nothing to type, so not keyboard response).",
    )
    screens_per_condition = forms.IntegerField(
        required=False,
        min_value=1,
        max_value=50,
        label="Screens per stage (live mode)",
        help_text="How many screens of the reference and of the session a live evaluator goes through "
        "(empty: 5, the thesis'). Leave it empty for a recorded campaign: each video is watched once, whole.",
    )
    add_gold = forms.BooleanField(
        required=False,
        initial=True,
        label="Add a gold trap (the reference: against itself in DCR, alone in ACR)",
        help_text="An ACR-HR campaign's hidden reference is its trap.",
    )
    add_repeat = forms.BooleanField(required=False, initial=True, label="Add a consistency repeat")
    min_correlation = forms.FloatField(
        required=False, min_value=-1, max_value=1, initial=0.75,
        label="Screening: exclude below this correlation r",
        help_text="Pearson r of an evaluator's scores with the other evaluators' mean (ITU-T P.913; 0.75).",
    )  # fmt: skip
    screen_vote_variance = forms.BooleanField(
        required=False, label="Screening: exclude an evaluator whose votes vary less than 0.15 (ITU-T P.910)"
    )
    screen_bt500 = forms.BooleanField(
        required=False, label="Screening: ITU-R BT.500 kurtosis-based rejection"
    )
    screen_outlier_votes = forms.BooleanField(
        required=False, label="Cleansing: leave out single votes at |z| >= 3.29 (ITU-T P.910)"
    )
    screen_playback = forms.BooleanField(
        required=False,
        label="Screening: exclude an evaluator who played the videos more than 115 % of their length in "
        "all (ITU-T P.910; recorded campaigns)",
    )

    def screening(self) -> dict[str, Any]:
        """The campaign's screening settings from the form (the API takes every bound)."""
        d = self.cleaned_data
        return {
            "correlation": {
                "on": True,
                "min_r": 0.75 if d.get("min_correlation") is None else d["min_correlation"],
            },
            "vote_variance": {"on": bool(d.get("screen_vote_variance"))},
            "bt500": {"on": bool(d.get("screen_bt500"))},
            "outlier_votes": {"on": bool(d.get("screen_outlier_votes"))},
            "playback": {"on": bool(d.get("screen_playback"))},
        }

    def __init__(self, *args: Any, user: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # Only sweeps whose trials record sessions: a link_check sweep has nothing to show evaluators.
        self.fields["sweep"].queryset = (
            sweeps_for(user).filter(job_type__in=jobtypes.stimulus_job_types()).order_by("-created_at")
        )

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        rows = []
        for n, line in enumerate((data.get("conditions") or "").splitlines(), start=1):
            parts = line.split()
            if not parts:
                continue
            if len(parts) < 3 or len(parts) > 4:
                self.add_error(
                    "conditions", f"line {n}: expected 'protocol rate delay [loss]', got {line.strip()!r}"
                )
                continue
            params = dict(zip(("protocol", "rate", "delay", "loss"), parts, strict=False))
            rows.append({"params": params})
        data["condition_rows"] = rows
        if not data.get("sweep") and not rows and not self.errors:
            self.add_error("sweep", "pick a sweep or enter conditions by hand")
        data["aspect_list"] = [x.strip() for x in (data.get("aspects") or "").splitlines() if x.strip()]
        return data


def _campaign_or_404(request: HttpRequest, pk: int) -> Campaign:
    return get_object_or_404(campaigns.owned_campaigns(request.user), pk=pk)


CAMPAIGN_SORTS = {"name": "Name", "created": "Created", "status": "Status", "mode": "Mode"}
CAMPAIGN_ORDER = {
    "name": ["name"],
    "created": ["created"],
    "status": ["status", "name"],
    "mode": ["mode", "name"],
}


@require_GET
@researcher_required
def campaign_list(request: HttpRequest) -> HttpResponse:
    """Current campaigns; ``?archived=1`` the archived ones, ``?archived=all`` both. Paginated, sorted
    and filtered by status, mode and (staff) owner as qoelab_web.listing says; counts are annotated."""
    try:
        archived = parse_archived(request.GET.get("archived"))
    except ValueError as exc:
        return HttpResponseBadRequest(f"archived: {exc}", content_type="text/plain")
    owned = campaigns.listed_campaigns(request.user, archived)
    filters = [
        listing.Filter("status", "Status", choices=[(v, v) for v in CampaignStatus.values]),
        listing.Filter("mode", "Mode", choices=[(v, v) for v in CampaignMode.values]),
        listing.Filter("q", "Name contains", kind="text"),
    ]
    if request.user.is_staff:
        owners = owned.order_by("owner__username").values_list("owner__username", flat=True).distinct()
        filters.append(listing.Filter("owner", "Owner", choices=[(o, o) for o in owners]))
    try:
        lst = listing.parse(
            request, sorts=CAMPAIGN_SORTS, default_sort="-created", filters=filters, keep=["archived"]
        )
        where: dict[str, Any] = {}
        for name, lookup in (("status", "status"), ("mode", "mode"), ("owner", "owner__username")):
            if name in lst.values:
                where[lookup] = lst.values[name]
        if "q" in lst.values:
            where["name__icontains"] = lst.values["q"]
        rows = owned.filter(**where).annotate(
            n_conditions=Count("conditions", distinct=True),
            n_invited=Count("evaluators", distinct=True),
            n_started=Count("evaluators", filter=Q(evaluators__consent_at__isnull=False), distinct=True),
            n_finished=Count("evaluators", filter=Q(evaluators__finished_at__isnull=False), distinct=True),
        )
        page = listing.paginate(lst, rows, CAMPAIGN_ORDER)
    except listing.ListError as exc:
        return listing.bad_request(exc)
    n_archived = campaigns.listed_campaigns(request.user, True).count()
    ctx = {
        "campaigns": page.object_list,
        "lst": lst,
        "any_campaigns": lst.count > 0 or lst.filtered,
        "archived": archived,
        "n_archived": n_archived,
    }
    return render(request, "ratings/campaign_list.html", ctx)


@require_http_methods(["GET", "POST"])
@researcher_required
def campaign_new(request: HttpRequest) -> HttpResponse:
    initial = {}
    if (sid := request.GET.get("sweep", "")).isdigit():
        initial["sweep"] = sid
    form = CampaignForm(request.POST or None, user=request.user, initial=initial)
    if request.method == "POST" and form.is_valid():
        d = form.cleaned_data
        try:
            campaign = campaigns.create_campaign(
                request.user,
                name=d["name"],
                mode=d["mode"],
                method=d["method"] or RatingMethod.DCR,
                sweep=d["sweep"],
                conditions=d["condition_rows"],
                aspects=d["aspect_list"],
                screens_per_condition=d["screens_per_condition"],
                add_gold=d["add_gold"],
                add_repeat=d["add_repeat"],
                screening=form.screening(),
            )
        except campaigns.CampaignError as exc:
            for e in exc.errors:
                field = e["field"].split(".")[0].split("[")[0]
                form.add_error(field if field in form.fields else None, e["message"])
        else:
            messages.success(
                request, f"Campaign '{campaign.name}' created with {campaign.conditions.count()} conditions."
            )
            for warning in campaign.aspect_warnings:
                messages.warning(request, warning)
            return redirect("ratings:campaign", pk=campaign.pk)
    status = 400 if request.method == "POST" else 200
    return render(request, "ratings/campaign_new.html", {"form": form}, status=status)


def _detail_context(request: HttpRequest, campaign: Campaign) -> dict[str, Any]:
    conds = list(campaign.conditions.select_related("recording", "reference", "repeat_of"))
    normal = [c for c in conds if c.kind == ConditionKind.NORMAL]
    labels = dict(campaign.evaluators.values_list("id", "label"))
    return {
        "campaign": campaign,
        "conditions": [{"c": c, "problems": campaigns.condition_problems(campaign, c)} for c in conds],
        "normal": normal,
        "best": next((c for c in conds if c.kind == ConditionKind.TRAINING_BEST), None),
        "worst": next((c for c in conds if c.kind == ConditionKind.TRAINING_WORST), None),
        "progress": analysis.progress(campaign),
        "suspicious": [
            {"label": labels.get(ev, str(ev)), "reasons": reasons}
            for ev, reasons in delivery.suspicious_sessions(campaign).items()
        ],
        "problems": campaigns.readiness_problems(campaign) if campaign.status == CampaignStatus.DRAFT else [],
        "live_reason": "" if live.available() else live.unavailable_reason(),
        "is_live": campaign.mode == CampaignMode.LIVE,
    }


@require_GET
@researcher_required
def campaign_detail(request: HttpRequest, pk: int) -> HttpResponse:
    campaign = _campaign_or_404(request, pk)
    return render(request, "ratings/campaign_detail.html", _detail_context(request, campaign))


@require_POST
@researcher_required
def campaign_action(request: HttpRequest, pk: int) -> HttpResponse:
    campaign = _campaign_or_404(request, pk)
    action = request.POST.get("action", "")
    try:
        if action == "open":
            campaigns.open_campaign(campaign)
            messages.success(request, "The campaign is open: invited evaluators can start.")
        elif action == "close":
            campaigns.close_campaign(campaign)
            messages.success(request, "The campaign is closed.")
        elif action == "refresh":
            n = campaigns.attach_recordings(campaign)
            messages.success(request, f"Recordings refreshed: {n} condition(s) changed.")
        elif action == "anchors":
            _set_anchors(campaign, request.POST.get("best", ""), request.POST.get("worst", ""))
            messages.success(request, "Training anchors updated.")
        else:
            messages.error(request, f"Unknown action {action!r}.")
    except campaigns.CampaignError as exc:
        for e in exc.errors:
            messages.error(request, e["message"])
    return redirect("ratings:campaign", pk=campaign.pk)


def _set_anchors(campaign: Campaign, best: str, worst: str) -> None:
    if campaign.status != CampaignStatus.DRAFT:
        raise campaigns.CampaignError([{"field": "status", "message": "anchors can only change in a draft"}])
    normal = {str(c.pk): c for c in campaign.conditions.filter(kind=ConditionKind.NORMAL)}
    for kind, value in ((ConditionKind.TRAINING_BEST, best), (ConditionKind.TRAINING_WORST, worst)):
        src = normal.get(value)
        if src is None:
            raise campaigns.CampaignError(
                [{"field": kind, "message": "pick one of the campaign's conditions"}]
            )
        prefix = "Training (best)" if kind == ConditionKind.TRAINING_BEST else "Training (worst)"
        Condition.objects.filter(campaign=campaign, kind=kind).update(
            label=f"{prefix}: {src.label}"[:200],
            params=src.params,
            recording=src.recording,
            reference=src.reference,
            measured_tcp_bps=src.measured_tcp_bps,
            source_trials=src.source_trials,
        )


@require_POST
@researcher_required
@never_cache
def campaign_invite(request: HttpRequest, pk: int) -> HttpResponse:
    """Create evaluators and show their links once (this response is the only place they appear)."""
    campaign = _campaign_or_404(request, pk)
    try:
        base = site_base_url(request)  # before any evaluator exists: a link cannot be shown later
    except BaseUrlMissing as exc:
        messages.error(request, exc.message)
        return redirect("ratings:campaign", pk=campaign.pk)
    raw_labels = [x.strip() for x in request.POST.get("labels", "").splitlines() if x.strip()]
    count = request.POST.get("count", "")
    try:
        made = invitations.invite(
            campaign,
            labels=raw_labels or None,
            count=int(count) if count.isdigit() else None,
        )
    except campaigns.CampaignError as exc:
        for e in exc.errors:
            messages.error(request, e["message"])
        return redirect("ratings:campaign", pk=campaign.pk)
    links = [{"label": ev.label, "url": base + reverse("ratings_rate:rate", args=[raw])} for ev, raw in made]
    ctx = {**_detail_context(request, campaign), "links": links}
    response = render(request, "ratings/campaign_detail.html", ctx)
    response["Cache-Control"] = "no-store"
    return response


@require_POST
@researcher_required
@never_cache
def evaluator_action(request: HttpRequest, pk: int, evaluator: int) -> HttpResponse:
    campaign = _campaign_or_404(request, pk)
    ev = get_object_or_404(Evaluator, pk=evaluator, campaign=campaign)
    if request.POST.get("action") == "revoke":
        invitations.revoke(ev)
        messages.success(request, f"The link of {ev.label} no longer works.")
        return redirect("ratings:campaign", pk=campaign.pk)
    try:
        base = site_base_url(request)  # before the old link stops working
    except BaseUrlMissing as exc:
        messages.error(request, exc.message)
        return redirect("ratings:campaign", pk=campaign.pk)
    raw = invitations.reissue(ev)
    links = [{"label": ev.label, "url": base + reverse("ratings_rate:rate", args=[raw])}]
    response = render(
        request, "ratings/campaign_detail.html", {**_detail_context(request, campaign), "links": links}
    )
    response["Cache-Control"] = "no-store"
    return response


@require_GET
@researcher_required
def campaign_progress(request: HttpRequest, pk: int) -> HttpResponse:
    from django.http import JsonResponse

    return JsonResponse(analysis.progress(_campaign_or_404(request, pk)))


@require_GET
@researcher_required
def campaign_results(request: HttpRequest, pk: int) -> HttpResponse:
    campaign = _campaign_or_404(request, pk)
    result = analysis.analyze(campaign)
    protocols = sorted({r["system"] for r in result["all"]["dmos"]})
    charts = {
        part: {
            f"{a['key']}|{p}": analysis.chart_payloads(
                result[part], a["key"], p, analysis.Y_LABEL[campaign.method], result["y_range"]
            )
            for a in campaign.aspects
            for p in protocols
        }
        for part in ("all", "screened")
    }
    ctx = {
        "campaign": campaign,
        "analysis": result,
        "y_label": analysis.Y_LABEL[campaign.method],
        "protocols": protocols,
        "charts_json": charts,
        "excluded_ids": {e["id"] for e in result["excluded"]},
        # Live X2Go is shown through the native client over an unimpaired local view (docs/ratings.md).
        "x2go_local_view": campaign.mode == "live" and "x2go" in protocols,
    }
    return render(request, "ratings/campaign_results.html", ctx)


def csv_response(rows: Any, filename: str) -> StreamingHttpResponse:
    """A streamed CSV download (campaign and imported-study exports)."""
    response = StreamingHttpResponse(rows, content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    return response


@require_GET
@researcher_required
def export_ratings(request: HttpRequest, pk: int) -> StreamingHttpResponse:
    campaign = _campaign_or_404(request, pk)
    return csv_response(analysis.ratings_csv(campaign), f"campaign-{campaign.pk}-ratings.csv")


@require_GET
@researcher_required
def export_summary(request: HttpRequest, pk: int) -> StreamingHttpResponse:
    campaign = _campaign_or_404(request, pk)
    return csv_response(analysis.summary_csv(campaign), f"campaign-{campaign.pk}-dmos.csv")
