"""Serializers of the ratings API (researcher campaign CRUD and the evaluator endpoints)."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from ratings import screening as screening_settings
from ratings.choices import CampaignMode, RatingMethod, Stage
from ratings.flow import MAX_PLAYED_S
from ratings.models import Campaign, Condition, Evaluator


class AspectSerializer(serializers.Serializer):
    key = serializers.RegexField(r"^[a-z][a-z0-9_]{0,63}$")
    label = serializers.CharField(max_length=100)


class ConditionSerializer(serializers.ModelSerializer):
    recording = serializers.PrimaryKeyRelatedField(read_only=True, allow_null=True)
    reference = serializers.PrimaryKeyRelatedField(read_only=True, allow_null=True)

    class Meta:
        model = Condition
        fields = [
            "id", "label", "params", "kind", "repeat_of", "recording", "reference",
            "measured_tcp_bps", "source_trials", "position",
        ]  # fmt: skip
        read_only_fields = fields


class ConditionInputSerializer(serializers.Serializer):
    label = serializers.CharField(max_length=200, required=False, allow_blank=True)
    params = serializers.DictField(
        help_text="protocol, rate, delay, loss ... (rate/delay/loss in human units)"
    )
    measured_tcp_bps = serializers.FloatField(required=False, allow_null=True, min_value=1)
    recording = serializers.IntegerField(required=False, allow_null=True, help_text="video artifact id")
    reference = serializers.IntegerField(required=False, allow_null=True, help_text="video artifact id")


class EvaluatorSerializer(serializers.ModelSerializer):
    state = serializers.CharField(read_only=True)
    total = serializers.IntegerField(read_only=True)

    class Meta:
        model = Evaluator
        fields = [
            "id",
            "label",
            "state",
            "position",
            "total",
            "invited_at",
            "first_opened_at",
            "consent_at",
            "finished_at",
        ]
        read_only_fields = fields


class CampaignSerializer(serializers.ModelSerializer):
    conditions = ConditionSerializer(many=True, read_only=True)
    evaluators = EvaluatorSerializer(many=True, read_only=True)
    aspects = AspectSerializer(many=True, read_only=True)
    aspect_warnings = serializers.ListField(
        child=serializers.CharField(), read_only=True, help_text="aspects this mode's evaluators cannot judge"
    )

    class Meta:
        model = Campaign
        fields = [
            "id", "name", "description", "sweep", "mode", "method", "aspects", "aspect_warnings",
            "screens_per_condition", "status", "created", "opened_at", "closed_at", "archived_at",
            "conditions", "evaluators", "screening",
        ]  # fmt: skip
        read_only_fields = [
            "sweep", "mode", "method", "aspects", "screens_per_condition", "status",
            "created", "opened_at", "closed_at", "archived_at",
        ]  # fmt: skip

    def validate_screening(self, value: Any) -> dict[str, Any]:
        """The rules and bounds, checked (each error names its part, e.g. screening.gold.on)."""
        try:
            return screening_settings.parse(value).model_dump()
        except screening_settings.ScreeningError as exc:
            raise serializers.ValidationError([f"{e['field']}: {e['message']}" for e in exc.errors]) from None


class CampaignCreateSerializer(serializers.Serializer):
    name = serializers.CharField(max_length=200)
    description = serializers.CharField(required=False, allow_blank=True, default="")
    mode = serializers.ChoiceField(choices=CampaignMode.choices, default=CampaignMode.RECORDED)
    method = serializers.ChoiceField(
        choices=RatingMethod.choices,
        default=RatingMethod.DCR,
        help_text="ITU-T P.910: dcr (reference, then the case; the thesis'), acr (the case alone: MOS) or "
        "acr-hr (acr with a hidden reference: DMOS; recorded campaigns only)",
    )
    aspects = AspectSerializer(
        many=True,
        required=False,
        help_text="default: live, the thesis' four aspects; recorded, the two a viewer can judge "
        "(screen response time, image clarity)",
    )
    screens_per_condition = serializers.IntegerField(
        min_value=1,
        max_value=50,
        required=False,
        allow_null=True,
        help_text="live mode: screens per stage (default 5); recorded campaigns show each video once, whole",
    )
    sweep = serializers.IntegerField(required=False, allow_null=True, help_text="conditions from this sweep")
    conditions = ConditionInputSerializer(many=True, required=False, help_text="conditions by hand")
    add_gold = serializers.BooleanField(default=True)
    add_repeat = serializers.BooleanField(default=True)
    training_best = serializers.IntegerField(required=False, allow_null=True, min_value=0)
    training_worst = serializers.IntegerField(required=False, allow_null=True, min_value=0)
    screening = serializers.JSONField(
        required=False,
        help_text="screening and cleansing rules, each {on, bound}: correlation {min_r 0.75}, gold "
        "{fail_at_or_below 3}, repeat {max_difference 1} (on by default); vote_variance {min 0.15}, "
        "bt500 {}, outlier_votes {z 3.29} (off by default); parts left out keep their defaults",
    )


class InviteSerializer(serializers.Serializer):
    labels = serializers.ListField(
        child=serializers.CharField(max_length=100), required=False, max_length=200
    )
    count = serializers.IntegerField(required=False, min_value=1, max_value=200)

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if not attrs.get("labels") and not attrs.get("count"):
            raise serializers.ValidationError({"count": ["give labels or a count"]})
        return attrs


class InvitationSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    label = serializers.CharField()
    token = serializers.CharField(help_text="shown once; only its hash is stored")
    url = serializers.CharField()


class ScreenSerializer(serializers.Serializer):
    condition = serializers.IntegerField()
    stage = serializers.ChoiceField(choices=Stage.choices)
    index = serializers.IntegerField(min_value=0)
    client_t = serializers.FloatField(required=False, allow_null=True)
    played_s = serializers.FloatField(
        required=False,
        allow_null=True,
        min_value=0.0,
        max_value=MAX_PLAYED_S,
        help_text="recorded mode: seconds of this stage's video played since its play button was pressed",
    )


class SubmitSerializer(serializers.Serializer):
    condition = serializers.IntegerField()
    scores = serializers.DictField(child=serializers.IntegerField(), help_text="{aspect key: 1..5}")


class SubmitReplySerializer(serializers.Serializer):
    changed = serializers.BooleanField()
    detail = serializers.CharField()
    position = serializers.IntegerField()
    total = serializers.IntegerField()
    finished = serializers.BooleanField()


class SlotSerializer(serializers.Serializer):
    id = serializers.IntegerField(required=False)
    state = serializers.CharField()
    condition = serializers.IntegerField(required=False)
    queue_position = serializers.IntegerField()
    expires_at = serializers.CharField(required=False)
    available = serializers.BooleanField()


class SessionSerializer(serializers.Serializer):
    available = serializers.BooleanField()
    websocket_url = serializers.CharField(required=False)
    client = serializers.CharField(required=False)
    detail = serializers.CharField(required=False)
