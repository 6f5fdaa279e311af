"""Recorded-mode ratings from real rd_qoe recordings (qoelab.rd.record) stored as trial artifacts.

The videos are made by the worker's own recorder: a reference (the workload pages in the kiosk
browser on a throwaway Xvfb, clicked) and a degraded-style recording (x11grab of an Xvfb). They are
stored under the names the worker uploads (``recording.webm``, ``reference.webm``) through the same
service the worker API uses, and a recorded campaign made from the sweep opens and serves them.
"""

from __future__ import annotations

import hashlib
import shutil
import time
from pathlib import Path
from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.urls import reverse
from django.utils import timezone

pytestmark = pytest.mark.django_db


def _missing() -> str | None:
    for tool, pkg in (
        ("Xvfb", "xvfb"),
        ("ffmpeg", "ffmpeg"),
        ("chromium", "chromium"),
        ("xdotool", "xdotool"),
    ):
        if shutil.which(tool) is None:
            return f"{tool} is not installed (Debian package {pkg})"
    return None


@pytest.fixture(scope="session")
def recorded_files(tmp_path_factory: Any) -> dict[str, Path]:
    """A real reference and degraded recording, made once by qoelab.rd.record."""
    reason = _missing()
    if reason:
        pytest.skip(reason)
    from qoelab.procs import ProcSet
    from qoelab.rd.display import start_xvfb
    from qoelab.rd.record import Recording, finish, record_reference
    from qoelab.rd.workload import generate

    d = tmp_path_factory.mktemp("rd-recordings")
    prefix = "rdtrec" + hashlib.sha256(str(d).encode()).hexdigest()[:4]
    manifest = generate(d / "pages", pages=2, seed=3)
    procs = ProcSet(prefix, d / "logs")
    try:
        screen = start_xvfb(procs, 1024, 768, name="deg-xvfb")
        procs.spawn("xclock", ["xclock", "-update", "1"], env=screen.env())
        rec = Recording(
            screen, d / "recording.raw.mkv", prefix, d / "logs" / "ffmpeg.log", region=(0, 0, 800, 600)
        )
        rec.start()
        time.sleep(1.0)
        clicks = [{"index": 0, "t": time.time(), "page": 2}]
        time.sleep(1.5)
        rec.stop_epoch = time.time()
        degraded = finish(rec, clicks, "recording", d / "recording.webm", prefix)
    finally:
        procs.stop_all()
    reference = record_reference(
        d, manifest, d / "pages", clicks, rec.start_epoch, rec.stop_epoch - rec.start_epoch, prefix
    )
    return {"recording": degraded, "reference": reference}


def _store(trial: Any, path: Path) -> Any:
    from results.services import store_artifact

    data = path.read_bytes()
    upload = SimpleUploadedFile(path.name, data, content_type="video/webm")  # the name the worker sends
    return store_artifact(trial, upload, "video", hashlib.sha256(data).hexdigest())


def _rd_sweep(owner: Any) -> Any:
    from experiments.services import create_sweep

    spec = {
        "experiment": {"name": "recorded"},
        "job_type": "rd_qoe",
        "grid": {"protocol": ["vnc", "spice"], "rate": ["1mbit", "10mbit"]},
        "fixed": {"delay": "10ms", "pages": 2, "record": True},
        "repetitions": 1,
    }
    sweep = create_sweep(spec, owner)
    now = timezone.now()
    for t in sweep.trials.all():
        link = {"measured": {"tcp_down_bps": 0.96 * t.resolved["rate"]}}
        sweep.trials.filter(pk=t.pk).update(status="succeeded", started_at=now, finished_at=now, link=link)
    return sweep


def test_a_recorded_campaign_from_an_rd_qoe_sweep_opens_and_serves_the_trial_recordings(
    alice: Any, recorded_files: dict[str, Path], media_root: Any
) -> None:
    from qoelab.rd.record import probe
    from ratings import campaigns, flow, invitations
    from ratings.choices import CampaignMode, CampaignStatus, ConditionKind

    sweep = _rd_sweep(alice)
    stored = {}
    for trial in sweep.trials.all():
        stored[trial.pk] = (
            _store(trial, recorded_files["recording"]),
            _store(trial, recorded_files["reference"]),
        )
    campaign = campaigns.create_campaign(
        alice, name="recorded rd", sweep=sweep, mode=CampaignMode.RECORDED, seed=3
    )
    normal = list(
        campaign.conditions.filter(kind=ConditionKind.NORMAL).select_related("recording", "reference")
    )
    assert len(normal) == 4
    for c in normal:
        (trial_id,) = c.source_trials
        recording, reference = stored[trial_id]
        assert c.recording_id == recording.pk and c.recording.name == "recording.webm"
        assert c.reference_id == reference.pk and c.reference.name == "reference.webm"
    campaign = campaigns.open_campaign(campaign)
    assert campaign.status == CampaignStatus.OPEN

    ((evaluator, token),) = invitations.invite(campaign, count=1)
    flow.open_link(evaluator)
    flow.give_consent(evaluator)
    evaluator.refresh_from_db()
    condition = evaluator.current_condition_id()
    client = Client()
    for stage, name in (("reference", "reference"), ("degraded", "recording")):
        r = client.get(reverse("ratings_rate:media", args=[token, condition, stage]))
        assert r.status_code == 200, (stage, r.status_code)
        assert r["Content-Type"] == "video/webm"
        body = b"".join(r.streaming_content)
        assert body == recorded_files[name].read_bytes()
    for path in recorded_files.values():
        info = probe(path)
        assert info["codec"] == "vp8" and (info["width"], info["height"]) == (800, 600)
        assert info["duration_s"] > 2.0


def test_a_recorded_campaign_without_recordings_names_what_is_missing(alice: Any) -> None:
    from ratings import campaigns

    sweep = _rd_sweep(alice)
    campaign = campaigns.create_campaign(alice, name="no videos", sweep=sweep, mode="recorded", seed=3)
    with pytest.raises(campaigns.CampaignError) as err:
        campaigns.open_campaign(campaign)
    messages = [e["message"] for e in err.value.errors]
    assert [m for m in messages if "record" in m] == [
        f"none of the conditions has a recording: sweep {sweep.name!r} did not record its trials; "
        + campaigns.HOW_TO_RECORD
    ]
