"""Admin: researchers' API tokens are listed (owner, age) and can be revoked; only hashes exist."""

from django.contrib import admin

from accounts.models import ApiToken


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    list_display = ["user", "created", "token_hash"]
    search_fields = ["user__username"]
    readonly_fields = ["user", "token_hash", "created"]

    def has_add_permission(self, request):  # type: ignore[no-untyped-def]
        return False  # issued by POST /api/auth/token/ or manage.py create_researcher
