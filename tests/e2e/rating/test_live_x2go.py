"""Live mode with X2Go in Debian's Chromium: the native X2Go client runs on the worker across the emulated
link, and the evaluator operates it through noVNC over an unimpaired local view (x11vnc on the client's
display) — the page says so, and so does the trial's summary and provenance.

The whole stack is real: live_server, the scheduler thread, a ``qoelab worker`` subprocess (lab_stack),
the provider ``ratings.live_provider`` creating a ``live_session`` trial, the worker building the link,
sshd + x2goserver in the server namespace, pyhoca-cli/nxproxy in the client namespace, x11vnc and
websockify in the root namespace.
"""

from __future__ import annotations

import shutil
from typing import Any

import pytest

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

SCREENS = 2
NOTE = (
    "You are seeing the X2Go client's screen through a local view; the network conditions apply "
    "between that client and the server."
)


@pytest.fixture
def x2go_campaign(open_live_campaign: Any) -> tuple[Any, str]:
    for tool in ("pyhoca-cli", "nxproxy", "x2goruncommand", "sshd", "x11vnc"):
        if shutil.which(tool) is None:
            pytest.skip(f"{tool} is not installed: X2Go live mode needs x2goserver, pyhoca-cli and nxproxy")
    return open_live_campaign("x2go", "X1", SCREENS)


def test_the_evaluator_operates_x2go_through_a_local_view_and_the_page_and_results_say_so(
    x2go_campaign: tuple[Any, str], live_visit: Any, rate_live: Any
) -> None:
    campaign, token = x2go_campaign
    trial, summary = rate_live(campaign, lambda: _go_through(live_visit, campaign, token), timeout_s=90)
    assert summary["screens"] >= SCREENS, summary
    assert summary["local_view"] == 1.0, summary
    provenance = trial.provenance
    assert provenance.get("local_view") is True and provenance.get("view_note") == NOTE, provenance


def _go_through(visit: Any, campaign: Any, token: str) -> None:
    from ratings.models import Evaluator, ScreenEvent, Slot

    manifest = visit.start(token, SCREENS)
    # X2Go comes up over SSH across the link; then noVNC connects to the local view.
    visit.connected(timeout_ms=150_000)
    notice = visit.page.locator("#live-session [data-role='local-view']")
    assert notice.is_visible() and notice.inner_text().strip() == NOTE
    slot = Slot.objects.get(evaluator__campaign=campaign, state="active")
    assert slot.session["client"] == "x2go-view" and slot.session["local_view"] is True
    canvas = visit.painted("#live-session [data-role='client'] canvas", "rating/live_x2go_local_view")
    visit.click_through(canvas, manifest, SCREENS, timeout_ms=45_000)
    ev = Evaluator.objects.get(campaign=campaign, label="X1")
    assert ScreenEvent.objects.filter(evaluator=ev, stage="degraded").count() == SCREENS
