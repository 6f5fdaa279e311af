"""A researcher reads a trial page in Debian's Chromium (issue 15): its recording plays in the page,
its values are in readable units, and its number is the one in the URL.

Runs against pytest-django's live server with real PostgreSQL rows and a real WebM recording made by
ffmpeg, stored as a trial artifact of kind ``video`` (no worker is needed).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import expect

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

# The browser's own reading of the recording: metadata loaded (readyState >= 1) and a duration.
VIDEO_STATE_JS = """(v) => ({ready: v.readyState, duration: v.duration, error: v.error && v.error.code,
                             width: v.videoWidth})"""


@pytest.fixture
def trial(alice: Any, settings: Any, tmp_path: Path) -> Any:
    from ratings import demo
    from results.models import SummaryValue

    settings.MEDIA_ROOT = tmp_path / "media"
    link = {
        "mode": "full",
        "ok": True,
        "measured": {"tcp_down_bps": 9.46e6, "rtt_ms": 20.4, "loss_pct": 0.0},
    }
    points = [{"protocol": "vnc", "rate": r, "delay": "10ms"} for r in ("1mbit", "10mbit")]
    sweep = demo.demo_sweep(alice, points, links=[None, link])
    trial = sweep.trials.get(index=1)
    demo.add_video_artifact(trial, demo.make_video(tmp_path / "screen.webm", seconds=1.5, size="320x240"))
    for name, value in {
        "rate_bps": 9.46e6,
        "T_ms": 412.5,
        "bytes_down": 183_456.0,
        "configured_delay_ms": 10.0,
    }.items():
        SummaryValue.objects.create(trial=trial, name=name, value=value)
    return trial


def test_the_trial_page_plays_its_recording_and_shows_values_in_units(
    live_server: Any, chromium_page: Any, alice: Any, trial: Any, save_screenshot: Any, log_in: Any
) -> None:
    page = chromium_page
    log_in(page, live_server.url, alice)
    page.get_by_role("heading", name="Experiments").wait_for()

    page.goto(f"{live_server.url}/trials/{trial.pk}/")
    expect(page.get_by_role("heading", level=1)).to_contain_text(f"Trial {trial.pk}")
    expect(page.locator('[data-field="place"]')).to_contain_text("Point 2 of 2, repetition 1 of 1")

    # The recording plays in the page: the browser fetched it from the play view and read its length.
    video = page.locator("figure.recording video")
    expect(video).to_have_count(1)
    page.wait_for_function("(v) => v.readyState >= 1", arg=video.element_handle(), timeout=15_000)
    state = video.evaluate(VIDEO_STATE_JS)
    assert state["error"] is None and state["width"] == 320, state
    assert 1.0 < state["duration"] < 2.0, state

    # Values in units a person reads, the stored value with every digit on hover.
    summary = page.get_by_role("table", name="Summary values")
    rate = summary.locator('tr[data-metric="rate_bps"]')
    expect(rate.locator("td").nth(1)).to_have_text("9.46 Mbit/s")
    assert rate.locator(".qty").get_attribute("title") == "9,460,000 bit/s"
    expect(summary.locator('tr[data-metric="bytes_down"] td').nth(1)).to_have_text("183.5 kB")
    undeclared = summary.locator('tr[data-metric="configured_delay_ms"] td')
    expect(undeclared.nth(0)).to_have_text("configured delay")
    expect(undeclared.nth(1)).to_have_text("10 ms")

    # Link verification as a table; the raw JSON stays folded until asked for.
    link = page.get_by_role("table", name="Link verification")
    expect(link.get_by_role("row", name="measured.tcp_down_bps")).to_contain_text("9.46 Mbit/s")
    raw = page.locator("details.raw-json").first
    expect(raw.locator("pre")).to_be_hidden()
    raw.locator("summary").click()
    expect(raw.locator("pre")).to_contain_text('"tcp_down_bps": 9460000.0')

    save_screenshot(page, "sweeps/trial_page")
    assert page.qoelab_problems == []


def test_a_trace_links_log_is_drawn_on_the_trial_page(
    live_server: Any, chromium_page: Any, alice: Any, trial: Any, log_in: Any, save_screenshot: Any
) -> None:
    import json

    from django.core.files.base import ContentFile

    from qoelab.emulation.linklog import ARTIFACT
    from results.models import Artifact

    # Two seconds of an on/off trace: 1 s at one opportunity per ms (12 Mbit/s), 1 s off; the link
    # carried all it was offered, and packets waited up to 1 s through the outage.
    n = 2000
    on = [1500 if i < 1000 else 0 for i in range(n)]
    log = {"version": 1, "bin_ms": 1, "directions": {"down": {
        "trace": "onoff.down", "start_ms": 0, "ms": n, "truncated": False, "offered_bytes": on,
        "delivered_bytes": on, "queue_bytes": [-1] * n, "drops": [0] * n,
        "queue_delay_ms": [1.0 if i < 1000 else -1.0 for i in range(n)]}}}  # fmt: skip
    data = json.dumps(log).encode()
    art = Artifact(trial=trial, kind="json", name=ARTIFACT, size=len(data), sha256="0" * 64)
    art.file.save(ARTIFACT, ContentFile(data), save=True)
    page = chromium_page
    log_in(page, live_server.url, alice)
    page.goto(f"{live_server.url}/trials/{trial.pk}/")
    page.get_by_role("heading", name="Link log").wait_for()
    chart = "window.Chart?.getChart(document.querySelector('figure[data-link-log=\"down-rate\"] canvas'))"
    page.wait_for_function(f"() => !!{chart}", timeout=15_000)
    drawn = page.evaluate(f"() => {chart}.data.datasets.map((d) => ({{label: d.label, n: d.data.length, "
                          "max: Math.max(...d.data.map((p) => p.y))}))")  # fmt: skip
    assert drawn == [
        {"label": "capacity (trace)", "n": 20, "max": 12},
        {"label": "throughput", "n": 20, "max": 12},
    ], drawn
    assert page.evaluate(
        "() => !!window.Chart.getChart(document.querySelector('figure[data-link-log=\"down-delay\"] canvas'))"
    )
    save_screenshot(page, "dashboard/trial_link_log")
    assert not page.qoelab_problems, page.qoelab_problems
