"""Campaign lifecycle pages: archive / unarchive, and delete behind a server-rendered confirmation.

GET ``/campaigns/<id>/delete/`` lists what goes (conditions, invited evaluators, ratings and their
records; the recordings stay with their sweep); POST deletes it, checked again (``campaigns``).
Owner-only like the other campaign pages (staff may act on all).
"""

from __future__ import annotations

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_http_methods, require_POST

from experiments.access import researcher_required
from experiments.archiving import Refused
from ratings import campaigns, removal
from ratings.models import Campaign


def _campaign_or_404(request: HttpRequest, pk: int) -> Campaign:
    return get_object_or_404(campaigns.owned_campaigns(request.user), pk=pk)


@require_POST
@researcher_required
def campaign_archive(request: HttpRequest, pk: int) -> HttpResponse:
    """POST ``archived=1`` hides the campaign from the campaign list; ``archived=0`` restores it."""
    campaign = _campaign_or_404(request, pk)
    archive = request.POST.get("archived", "1") != "0"
    removal.set_archived(campaign, archive)
    if archive:
        messages.success(
            request,
            f"Campaign '{campaign.name}' archived: hidden from the list (Rating campaigns › Show archived); "
            "its links, results and exports work as before.",
        )
    else:
        messages.success(request, f"Campaign '{campaign.name}' is back in the list.")
    return redirect("ratings:campaign", pk=campaign.pk)


@require_http_methods(["GET", "POST"])
@researcher_required
def campaign_delete(request: HttpRequest, pk: int) -> HttpResponse:
    campaign = _campaign_or_404(request, pk)
    refused = None
    if request.method == "POST":
        name = campaign.name
        try:
            plan = removal.delete_campaign(campaign, expect=request.POST.get("expect", ""))
        except Refused as exc:
            if not Campaign.objects.filter(pk=campaign.pk).exists():
                messages.error(request, " ".join(exc.reasons))
                return redirect("ratings:campaigns")
            refused = exc.reasons
        else:
            messages.success(
                request,
                f"Deleted rating campaign '{name}': {plan.conditions} conditions, {plan.evaluators} "
                f"evaluators, {plan.ratings} ratings.",
            )
            return redirect("ratings:campaigns")
    plan = removal.plan_campaign_delete(campaign)
    if refused is not None:
        refused = [r for r in refused if r not in plan.refusals]
    status = 409 if refused is not None else 200  # the GET page itself is fine, reasons and all
    ctx = {"plan": plan, "campaign": campaign, "refused": refused}
    return render(request, "ratings/campaign_confirm_delete.html", ctx, status=status)
