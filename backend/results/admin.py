"""Admin for artifacts (the other result tables are too large to browse here)."""

from django.contrib import admin

from results.models import Artifact


@admin.register(Artifact)
class ArtifactAdmin(admin.ModelAdmin):
    list_display = ["id", "trial", "kind", "name", "size", "created"]
    list_filter = ["kind"]
    readonly_fields = ["trial", "attempt", "kind", "name", "file", "size", "sha256"]
