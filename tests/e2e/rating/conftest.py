"""Fixtures of the rating browser tests: an open live campaign over two conditions of one protocol, and
the evaluator's visit to it (``live_visit``), whose steps the VNC, SPICE and X2Go tests share."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest


@pytest.fixture
def open_live_campaign(
    lab_stack: Any, alice: Any, settings: Any, tmp_path: Path
) -> Callable[[str, str, int], tuple[Any, str]]:
    """``open_live_campaign(protocol, label, screens)`` -> (campaign, the evaluator's token): alice's
    live campaign at 10 Mbit/s 20 ms and 2 Mbit/s 50 ms, run by the real worker of ``lab_stack``."""
    from ratings import campaigns, demo, invitations

    settings.MEDIA_ROOT = tmp_path / "media"
    settings.QOELAB_LIVE_SESSION_PROVIDER = "ratings.live_provider"

    def make(protocol: str, label: str, screens: int) -> tuple[Any, str]:
        points = [
            {"protocol": protocol, "rate": "10mbit", "delay": "20ms"},
            {"protocol": protocol, "rate": "2mbit", "delay": "50ms"},
        ]
        sweep = demo.demo_sweep(alice, points, name=f"live {protocol} demo")
        campaign = campaigns.create_campaign(
            alice,
            name=f"e2e live {protocol}",
            mode="live",
            sweep=sweep,
            screens_per_condition=screens,
            seed=3,
        )
        campaign = campaigns.open_campaign(campaign)
        ((_, token),) = invitations.invite(campaign, labels=[label])
        return campaign, token

    return make


@pytest.fixture
def rate_live(lab_stack: Any, chromium_page: Any) -> Callable[..., tuple[Any, dict[str, float]]]:
    """``rate_live(campaign, go_through, timeout_s)`` -> (the live_session trial, its summary).

    Runs ``go_through()`` (the evaluator's steps in ``chromium_page``), then leaves like an evaluator
    does, whatever happened: the page closes and the slot is released, so the worker tears the session
    down at its next report. Waits for the trial to succeed.
    """
    from experiments.models import Trial
    from ratings import live
    from ratings.models import Evaluator
    from results.models import SummaryValue

    def run(campaign: Any, go_through: Callable[[], None], timeout_s: float = 60) -> tuple[Any, dict]:
        try:
            go_through()
        finally:
            chromium_page.close()
            for ev in Evaluator.objects.filter(campaign=campaign):
                live.release_for(ev, "test done")
        trial = Trial.objects.get(sweep__job_type="live_session", sweep__experiment__owner=campaign.owner)
        lab_stack.wait_for(
            "the live_session trial to end",
            lambda: Trial.objects.get(pk=trial.pk).status == "succeeded",
            timeout_s,
        )
        trial.refresh_from_db()
        return trial, {v.name: v.value for v in SummaryValue.objects.filter(trial_id=trial.pk)}

    return run


FIELDS_DISABLED = "() => document.getElementById('rating-fields').disabled"


# True once the canvas holds more than one colour (a blank or unpainted canvas is uniform). Every
# 97th pixel is enough: the workload page has text, a link and blocks of colour.
_PAINTED = """(selector) => {
  const canvas = document.querySelector(selector);
  if (!canvas || !canvas.width || !canvas.height) return false;
  const ctx = canvas.getContext('2d');
  if (!ctx) return false;
  const d = ctx.getImageData(0, 0, canvas.width, canvas.height).data;
  for (let i = 4 * 97; i < d.length; i += 4 * 97) {
    if (d[i] !== d[0] || d[i + 1] !== d[1] || d[i + 2] !== d[2]) return true;
  }
  return false;
}"""


@dataclass
class LiveVisit:
    """An evaluator's visit to a live campaign in ``page``: the steps every live protocol shares."""

    stack: Any
    page: Any
    pages_dir: Path
    save_screenshot: Callable[[Any, str], Path]

    def start(self, token: str, screens: int) -> Any:
        """An evaluator's first steps: consent, the first practice condition, and the reference's pages
        clicked through in its frame (served by the backend at 800x600) while the rating form stays
        disabled. Returns the manifest of the pages the worker shows."""
        from qoelab.rd.workload import generate

        manifest = generate(self.pages_dir, pages=max(screens, 2), seed=1)  # what the worker shows
        page = self.page
        page.goto(f"{self.stack.url}/rate/{token}/")
        page.get_by_label("I have read this and agree to take part").check()
        page.get_by_role("button", name="Start").click()
        page.get_by_role("heading", name="Practice 1 of 2: the best case").wait_for()
        assert page.evaluate(FIELDS_DISABLED) is True
        frame = page.frame_locator("iframe[data-role='reference']")
        for n in range(screens):
            frame.get_by_text(f"NEXT {n + 1}", exact=True).click()
            page.locator("[data-role='reference-status']").filter(
                has_text="Reference done" if n == screens - 1 else f"Pages done: {n + 1}"
            ).wait_for(timeout=15_000)
        assert page.evaluate(FIELDS_DISABLED) is True, "the form must wait for the remote desktop too"
        # Issue 33: the remote desktop sat a screen's height below the done reference; the
        # reference's frame now folds away and the desktop takes its place.
        page.locator("iframe[data-role='reference']").wait_for(state="hidden")
        return manifest

    def connected(self, timeout_ms: float) -> None:
        """Until the page reports the remote desktop's client connected (the session is up)."""
        self.page.locator("#live-session[data-connected='true']").wait_for(timeout=timeout_ms)

    def painted(self, selector: str, screenshot: str) -> Any:
        """The client's canvas, scrolled into view once its first update across the emulated link is
        drawn (it shows more than one colour: a wait on a condition, not a fixed sleep); a screenshot
        kept."""
        canvas = self.page.locator(selector).first
        canvas.wait_for(timeout=30_000)
        canvas.scroll_into_view_if_needed()
        self.page.wait_for_function(_PAINTED, arg=selector, timeout=60_000)
        self.save_screenshot(self.page, screenshot)
        return canvas

    def click_through(self, canvas: Any, manifest: Any, screens: int, timeout_ms: float) -> None:
        """Click each page's link on the 800x600 remote screen; the form opens after the last page."""
        for n in range(screens):
            box = canvas.bounding_box()  # viewport coordinates, after scrolling
            assert box is not None and round(box["width"]) == 800 and round(box["height"]) == 600, box
            cx, cy = manifest.page(n + 1).link.center
            self.page.mouse.click(box["x"] + cx, box["y"] + cy)
            degraded = self.page.locator("[data-role='degraded-count']")
            degraded.filter(has_text=str(n + 1)).wait_for(timeout=timeout_ms)
            if n < screens - 1:
                assert self.page.evaluate(FIELDS_DISABLED) is True, f"the form opened after page {n + 1}"
        self.page.wait_for_function(f"() => !({FIELDS_DISABLED})()", timeout=15_000)


@pytest.fixture
def live_visit(lab_stack: Any, chromium_page: Any, tmp_path: Path, save_screenshot: Any) -> LiveVisit:
    return LiveVisit(lab_stack, chromium_page, tmp_path / "pages", save_screenshot)
