"""The evaluator flow: consent, the seeded order, screens seen, the current condition, submitting ratings.

Holds every rule the server enforces on an evaluator (order, required screens, idempotent submit),
so the HTML pages and the API agree; ``FlowError`` carries the message the evaluator is shown.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import Count
from django.utils import timezone

from ratings import delivery
from ratings.campaigns import condition_problems
from ratings.choices import (
    ASPECT_HELP,
    RECORDED_ASPECT_HELP,
    SCORE_MAX,
    SCORE_MIN,
    TRAINING_KINDS,
    CampaignMode,
    CampaignStatus,
    ConditionKind,
    Stage,
    scale_of,
)
from ratings.models import Campaign, Condition, Evaluator, Playback, Rating, ScreenEvent

# A stimulus is a recording of a few pages; an hour of playback per report is no real play.
MAX_PLAYED_S = 3600.0


class FlowError(Exception):
    """The evaluator asked for something the flow does not allow now; ``message`` is shown as is."""

    def __init__(self, message: str, status: int = 409) -> None:
        self.message = message
        self.status = status
        super().__init__(message)


def build_order(campaign: Campaign, seed: int) -> list[int]:
    """Training anchors (best, then worst) then every other condition in a seeded random order.

    A consistency repeat is never placed right after the condition it repeats.
    """
    conds = list(campaign.conditions.order_by("position", "id"))
    training = [
        c.pk
        for k in (ConditionKind.TRAINING_BEST, ConditionKind.TRAINING_WORST)
        for c in conds
        if c.kind == k
    ]
    main = [c for c in conds if c.kind not in TRAINING_KINDS]
    rng = random.Random(seed)
    rng.shuffle(main)
    for i, c in enumerate(main):
        if c.repeat_of_id and i > 0 and main[i - 1].pk == c.repeat_of_id and len(main) > 2:
            j = (i + 2) % len(main) if (i + 2) < len(main) else 0
            main[i], main[j] = main[j], main[i]
    return training + [c.pk for c in main]


def open_link(evaluator: Evaluator) -> None:
    if evaluator.first_opened_at is None:
        Evaluator.objects.filter(pk=evaluator.pk, first_opened_at=None).update(first_opened_at=timezone.now())
        evaluator.refresh_from_db()


def check_campaign_open(evaluator: Evaluator) -> None:
    status = evaluator.campaign.status
    if status == CampaignStatus.DRAFT:
        raise FlowError("This campaign has not started yet. Please try the link again later.", 409)
    if status == CampaignStatus.CLOSED:
        raise FlowError("This campaign is closed. Thank you for your interest.", 409)


@transaction.atomic
def give_consent(evaluator: Evaluator) -> Evaluator:
    """Record consent and fix the evaluator's order (once; a second consent changes nothing)."""
    ev = Evaluator.objects.select_for_update().select_related("campaign").get(pk=evaluator.pk)
    check_campaign_open(ev)
    if ev.consent_at is None:
        ev.consent_at = timezone.now()
        ev.order = build_order(ev.campaign, ev.seed)
        ev.position = 0
        ev.save(update_fields=["consent_at", "order", "position"])
    return ev


def _current(evaluator: Evaluator, condition_id: int) -> Condition:
    """The condition, if it is the evaluator's current one; FlowError otherwise."""
    check_campaign_open(evaluator)
    if evaluator.consent_at is None:
        raise FlowError("Please read the instructions and give your consent first.", 409)
    if evaluator.finished_at is not None:
        raise FlowError("You have already finished this campaign. Thank you!", 409)
    current = evaluator.current_condition_id()
    if condition_id not in evaluator.order:
        raise FlowError("This condition is not part of your tasks.", 404)
    if current != condition_id:
        raise FlowError("This is not your current condition; the page will show where you are.", 409)
    return Condition.objects.select_related("recording", "reference").get(pk=condition_id)


def screens_seen(evaluator: Evaluator, condition: Condition) -> dict[str, int]:
    rows = (
        ScreenEvent.objects.filter(evaluator=evaluator, condition=condition)
        .values("stage")
        .annotate(n=Count("id"))
    )
    out = {Stage.REFERENCE: 0, Stage.DEGRADED: 0}
    out.update({r["stage"]: r["n"] for r in rows})
    return out


def _not_seen_yet(campaign: Campaign, state: dict[str, Any]) -> str:
    """Why the form is still closed, in the evaluator's words."""
    if campaign.mode == CampaignMode.RECORDED:
        missing = [
            what
            for what, done in (("the reference video", state["reference_done"]),
                               ("the video of the case", state["degraded_done"]))
            if not done
        ]  # fmt: skip
        if Stage.REFERENCE not in campaign.stages:
            missing = ["the video"]
        return f"Please watch {' and '.join(missing)} to the end first; then the questions open."
    if Stage.REFERENCE not in campaign.stages:
        return (
            f"Please go through the whole remote desktop session first ({state['required']} pages; so "
            f"far {state['degraded_seen']}); then the questions open."
        )
    return (
        "Please go through the whole reference and the whole remote desktop session first "
        f"({state['required']} pages each; so far {state['reference_seen']} and {state['degraded_seen']}); "
        "then the questions open."
    )


def form_state(evaluator: Evaluator, condition: Condition) -> dict[str, Any]:
    campaign = evaluator.campaign
    seen = screens_seen(evaluator, condition)
    need = campaign.required_screens
    problems = condition_problems(campaign, condition)
    # Seen means seen: in recorded mode the server must also have handed out every byte of both videos.
    undelivered = "" if problems else delivery.delivery_problem(evaluator, condition)
    # ACR shows no reference: its stage is done from the start (and cannot be reported).
    reference_done = seen[Stage.REFERENCE] >= need or Stage.REFERENCE not in campaign.stages
    return {
        "required": need,
        "stages": list(campaign.stages),
        "reference_seen": seen[Stage.REFERENCE],
        "degraded_seen": seen[Stage.DEGRADED],
        "reference_done": reference_done,
        "degraded_done": seen[Stage.DEGRADED] >= need,
        "problems": problems,
        "delivery_problem": undelivered,
        "enabled": not problems and not undelivered and reference_done and seen[Stage.DEGRADED] >= need,
    }


def record_screen(
    evaluator: Evaluator,
    condition_id: int,
    stage: str,
    index: int,
    client_t: float | None = None,
    played_s: float | None = None,
) -> dict[str, Any]:
    """Store that a screen (or a whole video) of a stage was seen; the reference comes first.

    ``played_s`` (recorded mode): the seconds the page played the video for this report; every
    report is a ``Playback`` row, replays included, for the playback screening rule.
    """
    condition = _current(evaluator, condition_id)
    campaign = evaluator.campaign
    if stage not in campaign.stages:
        raise FlowError(f"stage must be one of {', '.join(campaign.stages)}", 400)
    need = campaign.required_screens
    if not isinstance(index, int) or not 0 <= index < need:
        raise FlowError(f"index must be from 0 to {need - 1}", 400)
    problems = condition_problems(campaign, condition)
    if problems:
        raise FlowError(problems[0].capitalize() + "; this case cannot be rated now.", 409)
    if stage == Stage.DEGRADED and not form_state(evaluator, condition)["reference_done"]:
        raise FlowError("Please go through the reference first, then the condition to rate.", 409)
    if campaign.mode == CampaignMode.LIVE and stage == Stage.DEGRADED:
        reported = delivery.pages_reported(evaluator, condition)
        if index >= reported:
            raise FlowError(
                "The remote desktop has not reached that point yet. Keep going through the session; "
                "it counts as soon as the lab computer has shown it.",
                409,
            )
    ScreenEvent.objects.get_or_create(
        evaluator=evaluator,
        condition=condition,
        stage=stage,
        screen_index=index,
        defaults={"client_t": client_t},
    )
    if played_s is not None and campaign.mode == CampaignMode.RECORDED:
        if not 0 <= played_s <= MAX_PLAYED_S:
            raise FlowError(f"played_s must be from 0 to {MAX_PLAYED_S:g} seconds", 400)
        Playback.objects.create(evaluator=evaluator, condition=condition, stage=stage, seconds=played_s)
    return form_state(evaluator, condition)


def validate_scores(campaign: Campaign, scores: Any) -> dict[str, int]:
    if not isinstance(scores, dict):
        raise FlowError("scores must be an object {aspect: 1..5}", 400)
    keys = campaign.aspect_keys
    missing = [
        a["label"] for a in campaign.aspects if a["key"] not in scores or scores[a["key"]] in (None, "")
    ]
    if missing:
        raise FlowError(f"Please answer every question: missing {', '.join(missing)}.", 400)
    unknown = sorted(set(scores) - set(keys))
    if unknown:
        raise FlowError(f"unknown aspect(s): {', '.join(unknown)}", 400)
    out = {}
    for k in keys:
        raw = scores[k]
        try:
            v = int(raw)
        except (TypeError, ValueError):
            raise FlowError(
                f"{k}: the score must be a whole number from {SCORE_MIN} to {SCORE_MAX}", 400
            ) from None
        if isinstance(raw, bool) or str(raw).strip() not in {str(v)} or not SCORE_MIN <= v <= SCORE_MAX:
            raise FlowError(f"{k}: the score must be a whole number from {SCORE_MIN} to {SCORE_MAX}", 400)
        out[k] = v
    return out


@dataclass
class SubmitResult:
    changed: bool
    evaluator: Evaluator
    detail: str


def submit_ratings(evaluator: Evaluator, condition_id: int, scores: Any) -> SubmitResult:
    """Store one answer per aspect for the current condition and move on; idempotent.

    Submitting again for a condition already answered (a double click, a reload re-posting the
    form, a retried request) stores nothing and answers ``changed = False``: a rating is stored once.
    """
    with transaction.atomic():
        ev = Evaluator.objects.select_for_update().select_related("campaign").get(pk=evaluator.pk)
        if (
            condition_id in ev.order
            and Rating.objects.filter(evaluator=ev, condition_id=condition_id).exists()
        ):
            return SubmitResult(False, ev, "already stored; the first answer counts")
        condition = _current(ev, condition_id)
        values = validate_scores(ev.campaign, scores)
        state = form_state(ev, condition)
        if state["problems"]:
            raise FlowError(state["problems"][0].capitalize() + "; this case cannot be rated now.", 409)
        if not (state["reference_done"] and state["degraded_done"]):
            raise FlowError(_not_seen_yet(ev.campaign, state), 409)
        if state["delivery_problem"]:
            raise FlowError(state["delivery_problem"], 409)
        seen = state["reference_seen"] + state["degraded_seen"]
        try:
            with transaction.atomic():
                Rating.objects.bulk_create(
                    [
                        Rating(
                            evaluator=ev,
                            condition=condition,
                            aspect=k,
                            score=v,
                            phase=condition.phase,
                            screens_seen=seen,
                        )
                        for k, v in values.items()
                    ]
                )
        except IntegrityError:
            return SubmitResult(False, ev, "already stored; the first answer counts")
        ev.position += 1
        fields = ["position"]
        if ev.position >= len(ev.order):
            ev.finished_at = timezone.now()
            fields.append("finished_at")
        ev.save(update_fields=fields)
    from ratings import live

    live.release_for(ev, "rated")
    return SubmitResult(True, ev, "stored")


def evaluator_state(evaluator: Evaluator) -> dict[str, Any]:
    """What the evaluator's page needs: where they are, the current condition and its form state."""
    campaign = evaluator.campaign
    n_training = Condition.objects.filter(pk__in=evaluator.order, kind__in=list(TRAINING_KINDS)).count()
    out: dict[str, Any] = {
        "campaign": campaign.name,
        "campaign_status": campaign.status,
        "mode": campaign.mode,
        "state": evaluator.state,
        "position": evaluator.position,
        "total": evaluator.total,
        "training_total": n_training,
        "aspects": campaign.aspects,
        "method": campaign.method,
        "scale": [{"score": s, "label": label} for s, label in scale_of(campaign.method)],
        "condition": None,
    }
    cid = evaluator.current_condition_id() if evaluator.consent_at else None
    if cid is not None:
        cond = Condition.objects.select_related("recording", "reference").get(pk=cid)
        out["phase"] = cond.phase
        out["condition"] = {
            "id": cond.pk,
            "number": evaluator.position + 1,
            "form": form_state(evaluator, cond),
        }
    return out


def aspect_rows(campaign: Campaign) -> list[dict[str, str]]:
    helps = {**ASPECT_HELP, **RECORDED_ASPECT_HELP} if campaign.mode == CampaignMode.RECORDED else ASPECT_HELP
    return [{**a, "help": helps.get(a["key"], "")} for a in campaign.aspects]
