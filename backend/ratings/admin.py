"""Admin views of campaigns (read-mostly; tokens are only ever hashes)."""

from django.contrib import admin

from ratings.models import Campaign, Condition, Evaluator, Rating, Slot


class ConditionInline(admin.TabularInline):
    model = Condition
    extra = 0
    fields = ["label", "kind", "params", "recording", "reference", "measured_tcp_bps", "position"]
    raw_id_fields = ["recording", "reference", "repeat_of"]


@admin.register(Campaign)
class CampaignAdmin(admin.ModelAdmin):
    list_display = ["name", "owner", "mode", "status", "created"]
    list_filter = ["mode", "status"]
    inlines = [ConditionInline]


@admin.register(Evaluator)
class EvaluatorAdmin(admin.ModelAdmin):
    list_display = ["label", "campaign", "position", "consent_at", "finished_at", "revoked_at"]
    readonly_fields = ["token_hash", "seed", "order"]


@admin.register(Rating)
class RatingAdmin(admin.ModelAdmin):
    list_display = ["evaluator", "condition", "aspect", "score", "phase", "created"]
    list_filter = ["phase", "aspect"]


@admin.register(Slot)
class SlotAdmin(admin.ModelAdmin):
    list_display = ["evaluator", "condition", "state", "expires_at"]
    list_filter = ["state"]
