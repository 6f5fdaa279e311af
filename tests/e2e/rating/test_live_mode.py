"""Live mode in Debian's Chromium: the evaluator's page connects through noVNC to a real VNC server across
the emulated link and clicks through the screens before the form enables.

The whole stack is real: live_server, the scheduler thread, a ``qoelab worker`` subprocess (lab_stack),
the provider ``ratings.live_provider`` creating a ``live_session`` trial for the slot, the worker
building the link, the namespace desktop, x11vnc, socat in the client namespace and websockify.
"""

from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import expect

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

SCREENS = 2


@pytest.fixture
def live_campaign(open_live_campaign: Any) -> tuple[Any, str]:
    return open_live_campaign("vnc", "L1", SCREENS)


def test_the_evaluator_operates_vnc_through_novnc_across_the_emulated_link_before_the_form_opens(
    live_campaign: tuple[Any, str], live_visit: Any, rate_live: Any
) -> None:
    campaign, token = live_campaign
    _, summary = rate_live(campaign, lambda: _go_through(live_visit, campaign, token))
    assert summary["screens"] >= SCREENS, summary


def _go_through(visit: Any, campaign: Any, token: str) -> None:
    from experiments.models import Trial
    from ratings.models import Evaluator, ScreenEvent, Slot

    manifest = visit.start(token, SCREENS)
    # The remote desktop: noVNC connects to websockify on the worker once the session is reported.
    visit.connected(timeout_ms=120_000)
    slot = Slot.objects.get(evaluator__campaign=campaign, state="active")
    trial = Trial.objects.get(pk=slot.session["trial"])
    assert trial.sweep.job_type == "live_session" and trial.status == "running"
    assert slot.session["client"] == "novnc" and slot.session["websocket_url"].startswith("ws://")
    # The page brought the desktop into view when it connected: the evaluator need not look for it.
    canvas = visit.page.locator("#live-session [data-role='client'] canvas")
    canvas.wait_for()
    expect(canvas).to_be_in_viewport(ratio=1)
    canvas = visit.painted("#live-session [data-role='client'] canvas", "rating/live_novnc")
    visit.click_through(canvas, manifest, SCREENS, timeout_ms=30_000)

    ev = Evaluator.objects.get(campaign=campaign, label="L1")
    assert ScreenEvent.objects.filter(evaluator=ev, stage="degraded").count() == SCREENS
    # The worker counted the pages the remote browser loaded (clicks beside the link do not count).
    slot.refresh_from_db()
    assert slot.session["pages_seen"] >= SCREENS
