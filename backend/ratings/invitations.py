"""Evaluator links: invite evaluators, reissue or revoke a link, find the evaluator of a token.

Raw tokens are returned once and never stored; only their hashes are.
"""

from __future__ import annotations

import re
import secrets

from django.db import transaction
from django.utils import timezone

from ratings.campaigns import CampaignError
from ratings.choices import CampaignStatus
from ratings.models import Campaign, Evaluator, hash_token

MAX_INVITES = 200


def new_token() -> str:
    return secrets.token_urlsafe(32)


@transaction.atomic
def invite(
    campaign: Campaign, labels: list[str] | None = None, count: int | None = None
) -> list[tuple[Evaluator, str]]:
    """Create evaluators with fresh one-time link tokens; the raw tokens are returned once, never stored."""
    if campaign.status == CampaignStatus.CLOSED:
        raise CampaignError([{"field": "status", "message": "the campaign is closed"}])
    if labels is None:
        if not isinstance(count, int) or not 1 <= count <= MAX_INVITES:
            raise CampaignError(
                [{"field": "count", "message": f"must be a whole number from 1 to {MAX_INVITES}"}]
            )
        start = campaign.evaluators.count() + 1
        labels = [f"E{start + i}" for i in range(count)]
    labels = [str(x).strip()[:100] for x in labels]
    if not labels or any(not x for x in labels) or len(labels) > MAX_INVITES:
        raise CampaignError([{"field": "labels", "message": f"1 to {MAX_INVITES} non-empty labels"}])
    taken = set(campaign.evaluators.filter(label__in=labels).values_list("label", flat=True))
    dupes = taken | {x for x in labels if labels.count(x) > 1}
    if dupes:
        raise CampaignError([{"field": "labels", "message": f"already used: {', '.join(sorted(dupes))}"}])
    out = []
    for label in labels:
        raw = new_token()
        ev = Evaluator.objects.create(
            campaign=campaign, label=label, token_hash=hash_token(raw), seed=secrets.randbits(48)
        )
        out.append((ev, raw))
    return out


def reissue(evaluator: Evaluator) -> str:
    """A new link for the same evaluator (progress kept); the old link stops working."""
    raw = new_token()
    Evaluator.objects.filter(pk=evaluator.pk).update(token_hash=hash_token(raw), revoked_at=None)
    evaluator.refresh_from_db()
    return raw


def revoke(evaluator: Evaluator) -> None:
    Evaluator.objects.filter(pk=evaluator.pk).update(revoked_at=timezone.now())
    evaluator.refresh_from_db()


TOKEN_SHAPE = re.compile(r"^[A-Za-z0-9_-]{20,100}$")


def evaluator_for_token(raw: str | None) -> Evaluator | None:
    if not raw or not TOKEN_SHAPE.match(raw):
        return None
    ev = Evaluator.objects.select_related("campaign").filter(token_hash=hash_token(raw)).first()
    if ev is None or ev.revoked_at is not None:
        return None
    return ev
