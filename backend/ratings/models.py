"""Campaign -> Condition (what is rated) and Evaluator (who rates, by link) -> Rating, ScreenEvent,
MediaDelivery, Slot.

Run state lives here, not in the browser: an evaluator's randomised order, position and the screens
seen are rows, so a reload or a closed tab resumes where it stopped, and the server (not the page)
decides when the rating form may be answered.
"""

from __future__ import annotations

from django.conf import settings
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models

from accounts.visibility import owned_by
from qoelab_web.tokens import hash_token  # noqa: F401 (evaluator links are stored hashed)
from ratings.choices import (
    DEFAULT_ASPECTS,
    HANDS_ON_ASPECTS,
    LIVE_ASPECTS,
    RECORDED_ASPECTS,
    SCORE_MAX,
    SCORE_MIN,
    TRAINING_KINDS,
    CampaignMode,
    CampaignStatus,
    ConditionKind,
    Phase,
    RatingMethod,
    SlotState,
    Stage,
    StudyFormat,
)
from ratings.screening import default as screening_default


def default_aspects(mode: str | None = None) -> list[dict[str, str]]:
    """Of the thesis' four aspects, what this mode's evaluator can judge: the three a live session's
    clicking exercises (nothing is typed), or the two a viewer can judge (recorded mode)."""
    keep = RECORDED_ASPECTS if mode == CampaignMode.RECORDED else LIVE_ASPECTS
    return [{"key": k, "label": label} for k, label in DEFAULT_ASPECTS if k in keep]


class Campaign(models.Model):
    objects = owned_by("owner").as_manager()
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="campaigns")
    name = models.CharField(max_length=200)
    description = models.TextField(blank=True)
    sweep = models.ForeignKey(
        "experiments.Sweep", null=True, blank=True, on_delete=models.SET_NULL, related_name="campaigns"
    )
    mode = models.CharField(max_length=10, choices=CampaignMode.choices, default=CampaignMode.RECORDED)
    method = models.CharField(
        max_length=10,
        choices=RatingMethod.choices,
        default=RatingMethod.DCR,
        help_text="ITU-T P.910 method: DCR (reference, then the case) or ACR / ACR-HR (the case alone)",
    )
    aspects = models.JSONField(default=default_aspects, help_text="[{key, label}] in the order shown")
    screens_per_condition = models.PositiveIntegerField(
        default=5, validators=[MinValueValidator(1), MaxValueValidator(50)]
    )
    status = models.CharField(max_length=10, choices=CampaignStatus.choices, default=CampaignStatus.DRAFT)
    created = models.DateTimeField(auto_now_add=True)
    opened_at = models.DateTimeField(null=True, blank=True)
    closed_at = models.DateTimeField(null=True, blank=True)
    archived_at = models.DateTimeField(null=True, blank=True, help_text="set: hidden from the default lists")
    screening = models.JSONField(
        default=screening_default, help_text="which screening and cleansing rules run (ratings/screening.py)"
    )

    class Meta:
        ordering = ["-created", "-id"]

    def __str__(self) -> str:
        return self.name

    @property
    def aspect_keys(self) -> list[str]:
        return [a["key"] for a in self.aspects]

    @property
    def aspect_warnings(self) -> list[str]:
        """Aspects this mode's evaluators cannot judge (kept: the researcher chose them)."""
        if self.mode != CampaignMode.RECORDED:
            return [
                f"'{a['label']}': the live session's pages have nothing to type (the evaluator only "
                "clicks NEXT), so its answers cannot rate typing."
                for a in self.aspects
                if a["key"] == "keyboard_response"
            ]
        return [
            f"'{a['label']}' needs the evaluator's own hand on the mouse or keyboard; in a recorded "
            "campaign they only watch, so its answers rate the video, not the response."
            for a in self.aspects
            if a["key"] in HANDS_ON_ASPECTS
        ]

    @property
    def stages(self) -> tuple[str, ...]:
        """What each case shows, in order: DCR the reference and then the case, ACR and ACR-HR the
        case alone (ACR-HR's reference is a case of its own, not marked as such)."""
        if self.method == RatingMethod.DCR:
            return (Stage.REFERENCE, Stage.DEGRADED)
        return (Stage.DEGRADED,)

    @property
    def required_screens(self) -> int:
        """Screens per stage before the form enables: one whole video (recorded) or N screens (live)."""
        return 1 if self.mode == CampaignMode.RECORDED else self.screens_per_condition


class Condition(models.Model):
    campaign = models.ForeignKey(Campaign, on_delete=models.CASCADE, related_name="conditions")
    label = models.CharField(max_length=200)
    params = models.JSONField(default=dict, blank=True, help_text="protocol, rate, delay, loss, ...")
    kind = models.CharField(max_length=16, choices=ConditionKind.choices, default=ConditionKind.NORMAL)
    repeat_of = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.CASCADE, related_name="repeats"
    )
    recording = models.ForeignKey(
        "results.Artifact", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    reference = models.ForeignKey(
        "results.Artifact", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    measured_tcp_bps = models.FloatField(
        null=True, blank=True, help_text="mean TCP goodput of the link verification of its trials"
    )
    source_trials = models.JSONField(default=list, blank=True, help_text="ids of the sweep's trials")
    position = models.PositiveIntegerField(default=0, help_text="display order on the campaign page")

    class Meta:
        ordering = ["campaign_id", "position", "id"]

    def __str__(self) -> str:
        return self.label

    @property
    def is_training(self) -> bool:
        return self.kind in TRAINING_KINDS

    @property
    def phase(self) -> str:
        return Phase.TRAINING if self.is_training else Phase.MAIN


class Evaluator(models.Model):
    campaign = models.ForeignKey(Campaign, on_delete=models.CASCADE, related_name="evaluators")
    token_hash = models.CharField(max_length=64, unique=True)
    label = models.CharField(max_length=100, help_text="display label; no personal data needed")
    seed = models.BigIntegerField(help_text="seed of this evaluator's randomised condition order")
    order = models.JSONField(default=list, blank=True, help_text="condition ids: training, then main")
    position = models.PositiveIntegerField(default=0, help_text="index into order of the current condition")
    invited_at = models.DateTimeField(auto_now_add=True)
    first_opened_at = models.DateTimeField(null=True, blank=True)
    consent_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["campaign_id", "id"]
        constraints = [
            models.UniqueConstraint(fields=["campaign", "label"], name="evaluator_unique_campaign_label")
        ]

    def __str__(self) -> str:
        return f"{self.label} ({self.campaign})"

    @property
    def total(self) -> int:
        return len(self.order)

    def current_condition_id(self) -> int | None:
        if self.finished_at or self.position >= len(self.order):
            return None
        return int(self.order[self.position])

    @property
    def state(self) -> str:
        if self.revoked_at:
            return "revoked"
        if self.finished_at:
            return "finished"
        if self.consent_at:
            return "rating"
        if self.first_opened_at:
            return "opened"
        return "invited"


class Rating(models.Model):
    evaluator = models.ForeignKey(Evaluator, on_delete=models.CASCADE, related_name="ratings")
    condition = models.ForeignKey(Condition, on_delete=models.CASCADE, related_name="ratings")
    aspect = models.CharField(max_length=64)
    score = models.PositiveSmallIntegerField(
        validators=[MinValueValidator(SCORE_MIN), MaxValueValidator(SCORE_MAX)]
    )
    phase = models.CharField(max_length=10, choices=Phase.choices, default=Phase.MAIN)
    screens_seen = models.PositiveIntegerField(default=0, help_text="screens seen (both stages) at submit")
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["evaluator_id", "condition_id", "aspect"]
        constraints = [
            models.UniqueConstraint(
                fields=["evaluator", "condition", "aspect", "phase"], name="rating_unique_submit"
            ),
            models.CheckConstraint(
                condition=models.Q(score__gte=SCORE_MIN, score__lte=SCORE_MAX), name="rating_score_1_to_5"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.evaluator_id}/{self.condition_id}/{self.aspect}={self.score}"


class ScreenEvent(models.Model):
    """One screen (live) or one whole video (recorded) of one stage, reported by the page when seen."""

    evaluator = models.ForeignKey(Evaluator, on_delete=models.CASCADE, related_name="screen_events")
    condition = models.ForeignKey(Condition, on_delete=models.CASCADE, related_name="screen_events")
    stage = models.CharField(max_length=10, choices=Stage.choices)
    screen_index = models.PositiveIntegerField()
    t = models.DateTimeField(auto_now_add=True)
    client_t = models.FloatField(null=True, blank=True, help_text="page clock (ms), for timing analysis")

    class Meta:
        ordering = ["evaluator_id", "condition_id", "t"]
        constraints = [
            models.UniqueConstraint(
                fields=["evaluator", "condition", "stage", "screen_index"], name="screen_event_unique"
            )
        ]


class Playback(models.Model):
    """One play of a recorded stimulus to its end, as the page measured it: replays add rows, so an
    evaluator's total playback can be held against the clips' length (ITU-T P.910 crowdsourcing)."""

    evaluator = models.ForeignKey(Evaluator, on_delete=models.CASCADE, related_name="playbacks")
    condition = models.ForeignKey(Condition, on_delete=models.CASCADE, related_name="playbacks")
    stage = models.CharField(max_length=10, choices=Stage.choices)
    seconds = models.FloatField(
        validators=[MinValueValidator(0.0)], help_text="seconds of video played (the page's measure)"
    )
    t = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["evaluator_id", "condition_id", "t"]


class MediaDelivery(models.Model):
    """Bytes of a stimulus video the media view handed to an evaluator's browser: one row per response.

    Written when the response starts (``sent_to = sent_from``) and again when it ends or is cut off,
    so the rows of an (evaluator, condition, stage) say which byte ranges of which file reached the
    page and when; a rating needs the union of its stimuli's ranges to cover each whole file.
    """

    evaluator = models.ForeignKey(Evaluator, on_delete=models.CASCADE, related_name="deliveries")
    condition = models.ForeignKey(Condition, on_delete=models.CASCADE, related_name="deliveries")
    stage = models.CharField(max_length=10, choices=Stage.choices)
    artifact = models.ForeignKey("results.Artifact", null=True, on_delete=models.SET_NULL, related_name="+")
    file_size = models.BigIntegerField(help_text="size of the file served, bytes")
    sent_from = models.BigIntegerField(help_text="first byte of the range served")
    sent_to = models.BigIntegerField(help_text="end (exclusive) of the bytes handed to the web server")
    requested_to = models.BigIntegerField(help_text="end (exclusive) of the range asked for")
    started_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True, help_text="last byte sent or response closed")

    class Meta:
        ordering = ["evaluator_id", "condition_id", "started_at", "id"]
        indexes = [models.Index(fields=["evaluator", "condition", "stage"], name="delivery_eval_cond_stage")]

    def __str__(self) -> str:
        return f"{self.evaluator_id}/{self.condition_id}/{self.stage} [{self.sent_from}, {self.sent_to})"


class Slot(models.Model):
    """A live-mode reservation of the lab for one evaluator and condition (one remote session)."""

    condition = models.ForeignKey(Condition, on_delete=models.CASCADE, related_name="slots")
    evaluator = models.ForeignKey(Evaluator, on_delete=models.CASCADE, related_name="slots")
    state = models.CharField(max_length=10, choices=SlotState.choices, default=SlotState.WAITING)
    created = models.DateTimeField(auto_now_add=True)
    activated_at = models.DateTimeField(null=True, blank=True)
    expires_at = models.DateTimeField(help_text="released after this unless the page renews it")
    released_at = models.DateTimeField(null=True, blank=True)
    release_reason = models.CharField(max_length=200, blank=True)
    session = models.JSONField(default=dict, blank=True, help_text="what the session provider returned")

    class Meta:
        ordering = ["created", "id"]
        constraints = [
            # One live reservation per evaluator at a time.
            models.UniqueConstraint(
                fields=["evaluator"],
                condition=~models.Q(state=SlotState.RELEASED),
                name="slot_one_open_per_evaluator",
            )
        ]
        indexes = [models.Index(fields=["state", "expires_at"], name="slot_state_expires")]

    def __str__(self) -> str:
        return f"slot {self.pk} ({self.state})"


class ImportedStudy(models.Model):
    """A rating set collected elsewhere (a paper pilot, an earlier study, a published dataset), kept
    as uploaded and analysed like a campaign's ratings; read-only once imported (docs/ratings.md)."""

    objects = owned_by("owner").as_manager()
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="imported_studies"
    )
    name = models.CharField(max_length=200)
    source = models.TextField(blank=True, help_text="where the ratings come from (a citation or a note)")
    method = models.CharField(max_length=10, choices=RatingMethod.choices, default=RatingMethod.ACR)
    file_format = models.CharField(max_length=10, choices=StudyFormat.choices, default=StudyFormat.LONG)
    scale_low = models.FloatField(default=1.0)
    scale_high = models.FloatField(default=5.0)
    file_name = models.CharField(max_length=255, blank=True)
    votes_csv = models.TextField(help_text="the file as uploaded (UTF-8)")
    n_votes = models.PositiveIntegerField(default=0)
    n_raters = models.PositiveIntegerField(default=0)
    n_stimuli = models.PositiveIntegerField(default=0)
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created", "-id"]
        verbose_name_plural = "imported studies"
        constraints = [
            models.CheckConstraint(
                condition=models.Q(scale_low__lt=models.F("scale_high")), name="study_scale_order"
            )
        ]

    def __str__(self) -> str:
        return self.name
