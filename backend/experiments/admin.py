"""Admin for experiments, sweeps and trials (read-mostly: status moves through services)."""

from django.contrib import admin

from experiments.models import Experiment, Sweep, Trial


@admin.register(Experiment)
class ExperimentAdmin(admin.ModelAdmin):
    list_display = ["name", "owner", "job_type", "created_at"]
    list_filter = ["job_type"]
    search_fields = ["name", "owner__username"]


@admin.register(Sweep)
class SweepAdmin(admin.ModelAdmin):
    list_display = ["name", "experiment", "job_type", "trial_count", "order", "created_at", "cancelled_at"]
    list_filter = ["job_type", "order"]
    readonly_fields = ["grid", "grid_order", "fixed", "repetitions", "order", "seed", "trial_count"]


@admin.register(Trial)
class TrialAdmin(admin.ModelAdmin):
    list_display = ["id", "sweep", "index", "status", "attempts", "host_name", "started_at", "finished_at"]
    list_filter = ["status"]
    search_fields = ["host_name", "error"]
    # Editing status by hand would bypass the transition rules.
    readonly_fields = [f.name for f in Trial._meta.fields]
