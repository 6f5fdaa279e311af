"""Screen recordings for recorded-mode ratings (qoelab.rd.record): real ffmpeg, Xvfb and a real trial.

Prefixes start with ``rdt`` (not ``ql``): a qoelab worker starting on this host cleans every ``ql*``
trial it finds.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import time
from pathlib import Path

import psutil
import pytest

from qoelab import jobs
from qoelab.jobtype import TrialContext
from qoelab.params import validate_params
from qoelab.procs import ENV_RD, ProcSet
from qoelab.rd.display import start_xvfb
from qoelab.rd.record import REFERENCE_NAME, Recording, finish, probe

JOB = jobs.get("rd_qoe")


def _missing(*tools: tuple[str, str]) -> str | None:
    for tool, pkg in tools:
        if shutil.which(tool) is None and not Path("/usr/sbin", tool).exists():
            return f"{tool} is not installed (Debian package {pkg})"
    return None


def _prefix() -> str:
    return "rdt" + secrets.token_hex(3)


def _ffmpeg_of(prefix: str) -> list[psutil.Process]:
    """ffmpeg processes carrying the trial's marker."""
    found = []
    for p in psutil.process_iter(["name"]):
        try:
            if p.info["name"] == "ffmpeg" and p.environ().get(ENV_RD) == prefix:
                found.append(p)
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return found


@pytest.mark.slow
def test_a_recording_stopped_with_q_is_a_finished_vp8_webm_with_its_start_epoch(tmp_path: Path) -> None:
    reason = _missing(("Xvfb", "xvfb"), ("ffmpeg", "ffmpeg"), ("xclock", "x11-apps"), ("xdotool", "xdotool"))
    if reason:
        pytest.skip(reason)
    prefix = _prefix()
    procs = ProcSet(prefix, tmp_path / "logs")
    try:
        screen = start_xvfb(procs, 1024, 768, name="rec-xvfb")
        procs.spawn("xclock", ["xclock", "-update", "1", "-geometry", "300x300+50+60"], env=screen.env())
        before = time.time()
        rec = Recording(
            screen, tmp_path / "r.raw.mkv", prefix, tmp_path / "logs" / "ff.log", region=(40, 50, 800, 600)
        )
        rec.start()
        assert before - 1 < rec.start_epoch < time.time()
        assert _ffmpeg_of(prefix), "ffmpeg should be running while recording"
        # The stimulus, not a wait for something: 2 s of clock, a click, 1 s more (start() returned
        # at ffmpeg's first frame).
        time.sleep(2.0)
        click = {"index": 0, "t": time.time(), "page": 2}
        time.sleep(1.0)
        out = finish(rec, [click], "recording", tmp_path / "recording.webm", prefix)
        finished = time.time()
    finally:
        procs.stop_all()
    assert rec.info.get("stopped_with") is None, "ffmpeg should have ended on 'q', not on a signal"
    info = probe(out)
    assert info["codec"] == "vp8" and (info["width"], info["height"]) == (800, 600)
    # At least the 3 s recorded, at most until finish() returned: a loaded host only adds to both.
    assert 2.5 < info["duration_s"] < finished - rec.start_epoch + 0.5, info
    meta = json.loads(out.with_suffix(".json").read_text())
    assert meta["start_epoch"] == rec.start_epoch
    offset = meta["clicks"][0]["offset_s"]
    assert offset >= 2.0 and offset == pytest.approx(click["t"] - rec.start_epoch, abs=1e-3), meta["clicks"]
    assert not (tmp_path / "r.raw.mkv").exists()
    assert not _ffmpeg_of(prefix)


@pytest.mark.netns
@pytest.mark.slow
def test_a_recorded_two_page_trial_gives_a_degraded_and_a_reference_webm(tmp_path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root to create network namespaces and start X servers")
    reason = _missing(
        ("Xvfb", "xvfb"), ("chromium", "chromium"), ("dumpcap", "tshark"), ("xdotool", "xdotool"),
        ("iperf3", "iperf3"), ("x11vnc", "x11vnc"), ("xtightvncviewer", "xtightvncviewer"),
        ("ffmpeg", "ffmpeg"),
    )  # fmt: skip
    if reason:
        pytest.skip(reason)
    params = validate_params(
        JOB.params,
        {"protocol": "vnc", "rate": "10mbit", "delay": "10ms", "pages": 2, "quiet": "300ms",
         "pause": "500ms", "update_timeout": "15s", "verify_duration": "1s", "record": True},
    )  # fmt: skip
    prefix = _prefix()
    ctx = TrialContext(trial_id="t", workdir=tmp_path, prefix=prefix)
    result = JOB.run(params, ctx)

    assert "error" not in result.provenance["recordings"], result.provenance["recordings"]
    assert result.provenance["recordings"]["stimulus_check"]["ok"], result.provenance["recordings"]
    videos = {a.path.name: a for a in ctx.artifacts if a.kind == "video"}
    assert sorted(videos) == ["recording.webm", REFERENCE_NAME]
    clicks = json.loads((tmp_path / "rd" / "clicks.json").read_text())
    clicks = clicks["clicks"] if isinstance(clicks, dict) else clicks
    durations = {}
    for name, artifact in videos.items():
        info = probe(artifact.path)
        assert info["codec"] == "vp8" and "webm" in info["format"], info
        assert (info["width"], info["height"]) == (800, 600), info
        assert info["duration_s"] > 0
        durations[name] = info["duration_s"]
        meta = json.loads(artifact.path.with_suffix(".json").read_text())
        assert [c["offset_s"] > 0.5 for c in meta["clicks"]] == [True, True]
        assert all(c["offset_s"] < info["duration_s"] for c in meta["clicks"])
    # The reference replays the same clicks at the same offsets and lasts as long (within a frame or two).
    assert durations[REFERENCE_NAME] == pytest.approx(durations["recording.webm"], abs=0.6)
    deg = json.loads((tmp_path / "rd" / "recording.json").read_text())
    ref = json.loads((tmp_path / "rd" / "reference.json").read_text())
    assert [c["t"] for c in deg["clicks"]] == [c["t"] for c in clicks]
    for d, r in zip(deg["clicks"], ref["clicks"], strict=True):
        assert r["offset_s"] == pytest.approx(d["offset_s"], abs=0.3)
    assert {a.path.name for a in ctx.artifacts} >= {"recording.json", "reference.json"}
    assert not _ffmpeg_of(prefix), "teardown must leave no ffmpeg behind"
    assert result.summary["n"] == 2 and result.summary["n_timed_out"] == 0
