"""Artifact retention: old captures and logs go (file and row), measurements and rated videos stay."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.core.files.base import ContentFile
from django.core.management import CommandError, call_command
from django.utils import timezone

from experiments.services import create_sweep
from ratings.models import Campaign, Condition
from results.models import Artifact, SummaryValue
from results.services import prune_artifacts


@pytest.fixture
def trial(alice: Any) -> Any:
    spec = {"experiment": {"name": "retention"}, "job_type": "t_link", "grid": {"rate": ["1mbit"]}}
    t = create_sweep(spec, alice).trials.get()
    SummaryValue.objects.create(trial=t, name="tcp_down_bps", value=9.6e5)
    return t


def _artifact(trial: Any, name: str, kind: str, age_days: float, body: bytes = b"data") -> Artifact:
    art = Artifact(trial=trial, kind=kind, name=name, size=len(body), sha256="0" * 64)
    art.file.save(name, ContentFile(body), save=True)
    Artifact.objects.filter(pk=art.pk).update(created=timezone.now() - timedelta(days=age_days))
    return art


def _on_disk(art: Artifact) -> bool:
    return Path(art.file.path).exists()


def test_it_deletes_old_artifacts_with_their_files_and_keeps_new_ones_and_the_measurements(trial) -> None:
    old_pcap = _artifact(trial, "capture.pcap", "pcap", 40, b"x" * 1000)
    old_log = _artifact(trial, "run.log", "log", 31)
    new_pcap = _artifact(trial, "capture2.pcap", "pcap", 2)

    report = prune_artifacts(timedelta(days=30))

    assert (report.artifacts, report.bytes, report.missing_files) == (2, 1004, 0)
    assert list(Artifact.objects.values_list("pk", flat=True)) == [new_pcap.pk]
    assert not _on_disk(old_pcap) and not _on_disk(old_log) and _on_disk(new_pcap)
    assert SummaryValue.objects.filter(trial=trial).count() == 1


def test_a_dry_run_deletes_nothing_and_kinds_narrow_the_selection(trial) -> None:
    pcap = _artifact(trial, "capture.pcap", "pcap", 40)
    log = _artifact(trial, "run.log", "log", 40)

    dry = prune_artifacts(timedelta(days=30), dry_run=True)
    assert dry.artifacts == 2 and Artifact.objects.count() == 2 and _on_disk(pcap)

    only_pcaps = prune_artifacts(timedelta(days=30), ["pcap"])
    assert only_pcaps.artifacts == 1
    assert list(Artifact.objects.values_list("pk", flat=True)) == [log.pk]


def test_videos_a_rating_campaign_uses_are_kept(trial, alice) -> None:
    recording = _artifact(trial, "recording.webm", "video", 90)
    reference = _artifact(trial, "reference-recording.webm", "video", 90)
    unused = _artifact(trial, "other.webm", "video", 90)
    campaign = Campaign.objects.create(owner=alice, name="kept")
    Condition.objects.create(campaign=campaign, label="c1", recording=recording, reference=reference)

    report = prune_artifacts(timedelta(days=30))

    assert report.artifacts == 1 and report.kept_for_ratings == 2
    assert set(Artifact.objects.values_list("pk", flat=True)) == {recording.pk, reference.pk}
    assert _on_disk(recording) and not _on_disk(unused)


def test_a_row_whose_file_is_already_gone_is_removed_and_counted(trial) -> None:
    art = _artifact(trial, "capture.pcap", "pcap", 40)
    Path(art.file.path).unlink()

    report = prune_artifacts(timedelta(days=30))

    assert (report.artifacts, report.missing_files) == (1, 1)
    assert not Artifact.objects.exists()


def test_the_command_uses_the_setting_and_refuses_a_missing_or_bad_age(trial, settings, capsys) -> None:
    _artifact(trial, "capture.pcap", "pcap", 40)
    settings.QOELAB_ARTIFACT_RETENTION_DAYS = 0
    with pytest.raises(CommandError, match="--older-than: give the age in days"):
        call_command("prune_artifacts")
    with pytest.raises(CommandError, match=r"--older-than: must be more than 0 days, got -1"):
        call_command("prune_artifacts", "--older-than", "-1")

    call_command("prune_artifacts", "--older-than", "30", "--dry-run")
    assert "would delete 1 artifact(s)" in capsys.readouterr().out
    assert Artifact.objects.count() == 1

    settings.QOELAB_ARTIFACT_RETENTION_DAYS = 30
    call_command("prune_artifacts")
    assert "deleted 1 artifact(s)" in capsys.readouterr().out
    assert not Artifact.objects.exists()


def test_the_scheduler_applies_the_retention_setting_and_keeps_everything_at_zero(trial, settings) -> None:
    from qoelab_web.chores import every_chore

    # The scheduler loop runs every app's chores (qoelab_web.chores): retention is results', hourly.
    (retention,) = [c for c in every_chore() if c.call == "results.services.apply_retention"]
    assert retention.every_s == 3600.0
    _artifact(trial, "capture.pcap", "pcap", 40)
    settings.QOELAB_ARTIFACT_RETENTION_DAYS = 0
    retention.run_if_due(now=0.0)
    assert Artifact.objects.count() == 1
    settings.QOELAB_ARTIFACT_RETENTION_DAYS = 30
    retention.run_if_due(now=1.0)  # not due again within the hour
    assert Artifact.objects.count() == 1
    retention.run_if_due(now=3601.0)
    assert not Artifact.objects.exists()
