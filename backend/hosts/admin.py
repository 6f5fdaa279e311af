"""Admin for lab hosts (tokens are set with manage.py add_host, never shown)."""

from django.contrib import admin

from hosts.models import WorkerHost


@admin.register(WorkerHost)
class WorkerHostAdmin(admin.ModelAdmin):
    list_display = ["name", "enabled", "last_heartbeat", "concurrency", "kernel"]
    list_filter = ["enabled"]
    search_fields = ["name"]
    exclude = ["token_hash"]
    readonly_fields = ["capabilities", "queues", "versions", "running", "last_heartbeat", "kernel"]
