"""What deleting takes from ratings, and what ratings keeps from pruning (connected to
``experiments.signals`` and ``results.signals`` in RatingsConfig.ready). A sweep's deletion takes the
rating campaigns that use its sweeps, or is refused because of them; artifact retention keeps the
recordings campaigns show.

A rating campaign "uses" a sweep when it was built from it (``Campaign.sweep``) or one of its
conditions shows one of the sweep's recordings. Such a campaign goes with the sweep, so it must be
one that could be deleted on its own: not open, the caller may act on it, and without ratings (a
campaign with ratings is people's time: it is deleted by name, on its own page, first).
"""

from __future__ import annotations

from typing import Any

from django.db.models import Q, QuerySet

from accounts.visibility import may_see
from experiments.lifecycle import CampaignUse, DeletePlan, counted
from ratings.models import Campaign, Condition, Evaluator, Rating
from ratings.removal import remove_campaign
from results.models import Artifact


def campaigns_using(sweep_ids: list[int]) -> QuerySet[Campaign]:
    """Rating campaigns built from these sweeps or showing one of their recordings."""
    recordings = Artifact.objects.filter(trial__sweep_id__in=sweep_ids).values("pk")
    showing = Condition.objects.filter(Q(recording__in=recordings) | Q(reference__in=recordings))
    return Campaign.objects.filter(
        Q(sweep_id__in=sweep_ids) | Q(pk__in=showing.values("campaign_id"))
    ).select_related("owner")


def plan_campaigns(sender: type, plan: DeletePlan, user: Any, **kwargs: Any) -> None:
    whose = "this sweep's" if plan.kind == "sweep" else "this experiment's"
    for c in campaigns_using([s.pk for s in plan.sweeps]).order_by("created", "id"):
        use = CampaignUse(
            id=c.pk,
            name=c.name,
            owner=c.owner.get_username(),
            status=c.status,
            conditions=Condition.objects.filter(campaign=c).count(),
            evaluators=Evaluator.objects.filter(campaign=c).count(),
            ratings=Rating.objects.filter(condition__campaign=c).count(),
        )
        plan.campaigns.append(use)
        named = f"Rating campaign '{use.name}' (#{use.id})"
        if use.ratings:
            plan.refusals.append(
                f"{named} uses {whose} recordings and has {counted(use.ratings, 'rating')}: "
                "delete that campaign first (on its own page), if its ratings are no longer needed."
            )
        elif use.status == "open":
            plan.refusals.append(f"{named} uses {whose} recordings and is open: close or delete it first.")
        if not may_see(user, c.owner):
            plan.refusals.append(
                f"{named} of {c.owner} uses {whose} recordings: only its owner can delete it."
            )


def remove_planned_campaigns(sender: type, plan: DeletePlan, reason: str, **kwargs: Any) -> None:
    for campaign in Campaign.objects.filter(pk__in=[c.id for c in plan.campaigns]):
        remove_campaign(campaign, reason)


def recordings_in_use(sender: type, **kwargs: Any) -> set[int]:
    """The artifacts a campaign's conditions show (recording or reference): kept when artifacts are pruned."""
    used: set[int] = set()
    for recording, reference in Condition.objects.values_list("recording_id", "reference_id"):
        used.update(pk for pk in (recording, reference) if pk is not None)
    return used
