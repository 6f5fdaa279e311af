"""Choice sets of the ratings app, and the fixed wording of the scale evaluators answer on."""

from __future__ import annotations

from django.db import models


class CampaignMode(models.TextChoices):
    LIVE = "live", "live (the evaluator operates the remote desktop)"
    RECORDED = "recorded", "recorded (the evaluator watches recordings)"


class CampaignStatus(models.TextChoices):
    DRAFT = "draft", "draft"
    OPEN = "open", "open"
    CLOSED = "closed", "closed"


class ConditionKind(models.TextChoices):
    NORMAL = "normal", "condition"
    # DCR: reference against reference, an attentive evaluator answers 5 (imperceptible); ACR: the
    # reference alone, answered "Excellent" or "Good".
    GOLD = "gold", "gold trap (the reference)"
    # ACR-HR: the reference, shown as one more case to rate; each rater's vote on it is subtracted
    # from their votes on the cases (ITU-T P.910's DMOS).
    HIDDEN_REFERENCE = "hidden_ref", "hidden reference (ACR-HR)"
    # The same condition again, later in the order: the two answers should differ by at most 1.
    REPEAT = "repeat", "consistency repeat"
    TRAINING_BEST = "training_best", "training anchor (best)"
    TRAINING_WORST = "training_worst", "training anchor (worst)"


TRAINING_KINDS = frozenset({ConditionKind.TRAINING_BEST, ConditionKind.TRAINING_WORST})
# Conditions whose ratings make the DMOS table (gold and repeats are quality control only).
RESULT_KINDS = frozenset({ConditionKind.NORMAL})


class Phase(models.TextChoices):
    TRAINING = "training", "training"
    MAIN = "main", "main"


class Stage(models.TextChoices):
    REFERENCE = "reference", "reference"
    DEGRADED = "degraded", "degraded"


class SlotState(models.TextChoices):
    WAITING = "waiting", "waiting"
    ACTIVE = "active", "active"
    RELEASED = "released", "released"


class RatingMethod(models.TextChoices):
    """ITU-T P.910's rating methods: a campaign's, or the one an imported rating set used."""

    ACR = "acr", "ACR (absolute category rating: MOS)"
    ACR_HR = "acr-hr", "ACR-HR (ACR with hidden reference: DMOS)"
    DCR = "dcr", "DCR (degradation category rating)"


# What each method's score of a condition is, as every results page and CSV names it.
QUANTITY: dict[str, str] = {
    RatingMethod.DCR: "DCR mean (the thesis' DMOS)",
    RatingMethod.ACR: "ACR MOS",
    RatingMethod.ACR_HR: "ACR-HR DMOS",
}


# ITU-T P.910 (DCR) five-grade impairment scale, worded exactly as the Recommendation (thesis Table 4.1).
IMPAIRMENT_SCALE: tuple[tuple[int, str], ...] = (
    (5, "Imperceptible"),
    (4, "Perceptible but not annoying"),
    (3, "Slightly annoying"),
    (2, "Annoying"),
    (1, "Very annoying"),
)
# ITU-T P.910 (ACR, and ACR-HR's votes) five-grade quality scale, worded as the Recommendation.
QUALITY_SCALE: tuple[tuple[int, str], ...] = (
    (5, "Excellent"),
    (4, "Good"),
    (3, "Fair"),
    (2, "Poor"),
    (1, "Bad"),
)
SCORE_MIN, SCORE_MAX = 1, 5


def scale_of(method: str) -> tuple[tuple[int, str], ...]:
    """The grades an evaluator answers on: DCR's impairment scale, or ACR's quality scale."""
    return IMPAIRMENT_SCALE if method == RatingMethod.DCR else QUALITY_SCALE


# The thesis' four aspects (Table 4.2): key -> label shown to the evaluator.
DEFAULT_ASPECTS: tuple[tuple[str, str], ...] = (
    ("screen_response", "Screen response time"),
    ("mouse_response", "Mouse response time"),
    ("keyboard_response", "Keyboard response time"),
    ("image_clarity", "Image clarity"),
)
# A recorded campaign's evaluator only watches: of the four, only what a viewer can judge.
RECORDED_ASPECTS: tuple[str, ...] = ("screen_response", "image_clarity")
# A live campaign's evaluator clicks through the workload pages and types nothing (issue 33: the
# keyboard question was asked anyway): of the four, what clicking pages lets them judge.
LIVE_ASPECTS: tuple[str, ...] = ("screen_response", "mouse_response", "image_clarity")
# Aspects that need the evaluator's own hand on the mouse or keyboard (live mode).
HANDS_ON_ASPECTS: frozenset[str] = frozenset({"mouse_response", "keyboard_response"})
# What each default aspect asks, in plain language for the form.
ASPECT_HELP: dict[str, str] = {
    "screen_response": "How long the screen took to change after you clicked.",
    "mouse_response": "How quickly the mouse pointer followed your hand.",
    "keyboard_response": "How quickly typed text appeared.",
    "image_clarity": "How sharp and clean the picture looked.",
}
# Recorded mode: the evaluator watches someone else's clicks (issue 33: "after you clicked").
RECORDED_ASPECT_HELP: dict[str, str] = {
    "screen_response": "How long the screen took to change after each click in the video.",
}


class StudyFormat(models.TextChoices):
    LONG = "long", "long: rater,stimulus,score[,condition][,reference][,repeat]"
    MATRIX = "matrix", "matrix: one row per stimulus, one column per rater, nan for a missing vote"
