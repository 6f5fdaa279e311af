"""Live mode in Debian's Chromium: the evaluator's page connects through noVNC to a real VNC server across
the emulated link and clicks through the screens before the form enables.

The whole stack is real: live_server, the scheduler thread, a ``qoelab worker`` subprocess (lab_stack),
the provider ``ratings.live_provider`` creating a ``live_session`` trial for the slot, the worker
building the link, the namespace desktop, x11vnc, socat in the client namespace and websockify.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import expect

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

SCREENS = 2


@pytest.fixture
def live_campaign(open_live_campaign: Any) -> tuple[Any, str]:
    return open_live_campaign("vnc", "L1", SCREENS)


def test_the_evaluator_operates_vnc_through_novnc_across_the_emulated_link_before_the_form_opens(
    lab_stack: Any,
    chromium_page: Any,
    live_campaign: tuple[Any, str],
    rate_live: Any,
    save_screenshot: Any,
    tmp_path: Path,
    view_reference: Any,
    wait_until_painted: Any,
) -> None:
    campaign, token = live_campaign
    _, summary = rate_live(
        campaign,
        lambda: _go_through(
            lab_stack,
            chromium_page,
            campaign,
            token,
            save_screenshot,
            tmp_path,
            view_reference,
            wait_until_painted,
        ),
    )
    assert summary["screens"] >= SCREENS, summary


def _go_through(
    lab_stack: Any,
    page: Any,
    campaign: Any,
    token: str,
    save_screenshot: Any,
    tmp_path: Path,
    view_reference: Any,
    wait_until_painted: Any,
) -> None:
    from experiments.models import Trial
    from qoelab.rd.workload import generate
    from ratings.models import Evaluator, ScreenEvent, Slot

    manifest = generate(tmp_path / "pages", pages=max(SCREENS, 2), seed=1)  # what the worker shows
    view_reference(page, lab_stack.url, token, SCREENS)

    # The remote desktop: noVNC connects to websockify on the worker once the session is reported.
    page.locator("#live-session[data-connected='true']").wait_for(timeout=120_000)
    slot = Slot.objects.get(evaluator__campaign=campaign, state="active")
    trial = Trial.objects.get(pk=slot.session["trial"])
    assert trial.sweep.job_type == "live_session" and trial.status == "running"
    assert slot.session["client"] == "novnc" and slot.session["websocket_url"].startswith("ws://")
    canvas = page.locator("#live-session [data-role='client'] canvas")
    canvas.wait_for()
    # The page brought the desktop into view when it connected: the evaluator need not look for it.
    expect(canvas).to_be_in_viewport(ratio=1)
    canvas.scroll_into_view_if_needed()
    wait_until_painted(page, "#live-session [data-role='client'] canvas")  # the first update, drawn
    save_screenshot(page, "rating/live_novnc")
    for n in range(SCREENS):
        box = canvas.bounding_box()  # viewport coordinates, after scrolling
        assert box is not None and round(box["width"]) == 800 and round(box["height"]) == 600, box
        cx, cy = manifest.page(n + 1).link.center
        page.mouse.click(box["x"] + cx, box["y"] + cy)
        page.locator("[data-role='degraded-count']").filter(has_text=str(n + 1)).wait_for(timeout=30_000)
        if n < SCREENS - 1:
            assert page.evaluate("() => document.getElementById('rating-fields').disabled")
    page.wait_for_function("() => !document.getElementById('rating-fields').disabled", timeout=15_000)

    ev = Evaluator.objects.get(campaign=campaign, label="L1")
    assert ScreenEvent.objects.filter(evaluator=ev, stage="degraded").count() == SCREENS
    # The worker counted the pages the remote browser loaded (clicks beside the link do not count).
    slot.refresh_from_db()
    assert slot.session["pages_seen"] >= SCREENS
