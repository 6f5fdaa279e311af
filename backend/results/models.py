"""Generic result tables that fit every job type, so a new job type needs no migration.

- Sample: per-event rows (RD: one per screen update with T, X, rate), values as JSON.
- SeriesPoint: time series (APT goodput and N per step; VOSE throughput and CPU per second).
- SummaryValue: one number per (trial, metric) -- what the charts aggregate.
- Artifact: files (pcap, video, logs) uploaded by the worker over the API, with size and SHA-256.
"""

from __future__ import annotations

from django.db import models

from accounts.visibility import owned_by
from experiments.models import Trial


class Sample(models.Model):
    trial = models.ForeignKey(Trial, on_delete=models.CASCADE, related_name="samples")
    kind = models.CharField(max_length=64)
    index = models.PositiveIntegerField()
    values = models.JSONField(default=dict)

    class Meta:
        ordering = ["trial_id", "kind", "index"]
        constraints = [
            models.UniqueConstraint(fields=["trial", "kind", "index"], name="sample_unique_trial_kind_index")
        ]

    def __str__(self) -> str:
        return f"{self.kind}[{self.index}] of trial {self.trial_id}"


class SeriesPoint(models.Model):
    trial = models.ForeignKey(Trial, on_delete=models.CASCADE, related_name="series")
    name = models.CharField(max_length=64)
    t = models.FloatField(help_text="seconds from the start of the measurement, or step number")
    value = models.FloatField()

    class Meta:
        ordering = ["trial_id", "name", "t"]
        indexes = [models.Index(fields=["trial", "name"], name="seriespoint_trial_name")]

    def __str__(self) -> str:
        return f"{self.name}({self.t})={self.value}"


class SummaryValue(models.Model):
    trial = models.ForeignKey(Trial, on_delete=models.CASCADE, related_name="summary")
    name = models.CharField(max_length=64)
    value = models.FloatField()

    class Meta:
        ordering = ["trial_id", "name"]
        constraints = [models.UniqueConstraint(fields=["trial", "name"], name="summary_unique_trial_name")]

    def __str__(self) -> str:
        return f"{self.name}={self.value}"


def artifact_path(instance: Artifact, filename: str) -> str:
    trial = instance.trial
    return f"artifacts/sweep-{trial.sweep_id}/trial-{trial.pk}/attempt-{instance.attempt}/{filename}"


class Artifact(models.Model):
    objects = owned_by("trial__sweep__experiment__owner").as_manager()
    trial = models.ForeignKey(Trial, on_delete=models.CASCADE, related_name="artifacts")
    attempt = models.PositiveIntegerField(default=1)
    kind = models.CharField(max_length=32, help_text="pcap, video, log, json, ...")
    name = models.CharField(max_length=255, help_text="file name as uploaded")
    file = models.FileField(upload_to=artifact_path, max_length=500)
    size = models.BigIntegerField()
    sha256 = models.CharField(max_length=64)
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["trial_id", "id"]

    def __str__(self) -> str:
        return f"{self.kind} {self.name} of trial {self.trial_id}"
