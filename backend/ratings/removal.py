"""Archiving and deleting a campaign (the pages in ``ratings.lifecycle`` and the API share these).

Deleting takes the campaign's conditions, evaluators, ratings and their records; the recordings stay
with their sweep's trials. An open campaign is refused, and so is a deletion whose confirmed plan
no longer matches what would go.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from django.db import transaction
from django.utils import timezone

from experiments.archiving import Refused
from ratings.choices import CampaignStatus, SlotState
from ratings.models import Campaign, Condition, Evaluator, MediaDelivery, Rating, ScreenEvent, Slot


def set_archived(campaign: Campaign, archived: bool) -> Campaign:
    """Hide the campaign from the default lists (it stays reachable by URL), or restore it."""
    qs = Campaign.objects.filter(pk=campaign.pk)
    if archived:
        qs.filter(archived_at__isnull=True).update(archived_at=timezone.now())
    else:
        qs.update(archived_at=None)
    campaign.refresh_from_db(fields=["archived_at"])
    return campaign


@dataclass
class CampaignDeletePlan:
    """What deleting a campaign removes; its recordings stay (they belong to the sweep's trials)."""

    campaign: Campaign
    conditions: int
    evaluators: int
    ratings: int
    screen_events: int
    deliveries: int
    live_slots: int
    recordings_kept: int
    refusals: list[str] = field(default_factory=list)

    @property
    def allowed(self) -> bool:
        return not self.refusals

    @property
    def fingerprint(self) -> str:
        return f"c{self.conditions}-e{self.evaluators}-r{self.ratings}-s{self.screen_events}"


def plan_campaign_delete(campaign: Campaign) -> CampaignDeletePlan:
    conds = Condition.objects.filter(campaign=campaign)
    kept = {pk for pair in conds.values_list("recording_id", "reference_id") for pk in pair if pk is not None}
    plan = CampaignDeletePlan(
        campaign=campaign,
        conditions=conds.count(),
        evaluators=Evaluator.objects.filter(campaign=campaign).count(),
        ratings=Rating.objects.filter(condition__campaign=campaign).count(),
        screen_events=ScreenEvent.objects.filter(condition__campaign=campaign).count(),
        deliveries=MediaDelivery.objects.filter(condition__campaign=campaign).count(),
        live_slots=Slot.objects.filter(condition__campaign=campaign).count(),
        recordings_kept=len(kept),
    )
    if campaign.status == CampaignStatus.OPEN:
        plan.refusals.append(
            "The campaign is open: close it first (an evaluator may be rating right now), then delete it."
        )
    return plan


def delete_campaign(campaign: Campaign, expect: str | None = None) -> CampaignDeletePlan:
    """Delete the campaign with its conditions, evaluators, ratings and their records.

    Refused (nothing deleted) while it is open, or when ``expect`` (the fingerprint of the plan that
    was confirmed) no longer matches what would go. Returns the plan that was carried out.
    """
    with transaction.atomic():
        locked = Campaign.objects.select_for_update().filter(pk=campaign.pk).first()
        if locked is None:
            raise Refused(["The campaign is already gone."])
        plan = plan_campaign_delete(locked)
        if plan.refusals:
            raise Refused(plan.refusals)
        if expect is not None and expect != plan.fingerprint:
            raise Refused(
                [
                    "What deleting this campaign would remove has changed since the confirmation was "
                    "shown (new ratings?): look at the list again."
                ]
            )
        remove_campaign(locked, "its campaign was deleted")
    return plan


def remove_campaign(campaign: Campaign, reason: str) -> None:
    """Release the campaign's live reservations (stopping their sessions), then delete its rows."""
    from ratings import live

    open_states = [s for s in SlotState.values if s != SlotState.RELEASED]
    for evaluator in Evaluator.objects.filter(campaign=campaign, slots__state__in=open_states).distinct():
        live.release_for(evaluator, reason)
    campaign.delete()
