"""Live mode with SPICE in Debian's Chromium: spice-html5 in the page connects through websockify and the
client-side relay to the Xorg+spiceqxl server across the emulated link, shows the remote display, and
the evaluator clicks through the screens on it.

The whole stack is real (lab_stack: live_server, scheduler, a ``qoelab worker`` subprocess).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

SCREENS = 2
SPICE_CLIENT = Path(__file__).resolve().parents[3] / "frontend/dist/vendor/spice-html5/main.js"


@pytest.fixture
def spice_campaign(open_live_campaign: Any) -> tuple[Any, str]:
    if not Path("/usr/lib/xorg/modules/drivers/spiceqxl_drv.so").exists():
        pytest.skip("the spiceqxl Xorg driver is not installed (Debian package xserver-xspice)")
    if not SPICE_CLIENT.exists():
        pytest.skip("spice-html5 is not built into the static files (npm run build with package spice-html5)")
    return open_live_campaign("spice", "S1", SCREENS)


def test_spice_html5_connects_across_the_emulated_link_and_the_evaluator_clicks_through(
    spice_campaign: tuple[Any, str], live_visit: Any, rate_live: Any
) -> None:
    campaign, token = spice_campaign
    errors: list[str] = []
    live_visit.page.on("pageerror", lambda e: errors.append(f"{e} {e.stack}"))
    trial, _ = rate_live(campaign, lambda: _go_through(live_visit, campaign, token))
    # Seen once in ~10 CI runs: spice-html5's *cursor* channel gets a link reply "Permission denied"
    # from Xspice (cause not found; the display channel and the clicks below are unaffected, and the
    # evaluator keeps the browser's own pointer). Any other page error still fails the test.
    cursor_link = [e for e in errors if e.startswith("Permission denied") and "SpiceCursorConn" in e]
    if cursor_link:
        print(f"spice-html5 cursor channel refused (tolerated, see comment): {cursor_link}")
    assert not [e for e in errors if e not in cursor_link], errors
    assert trial.provenance.get("client") == "spice-html5" and trial.provenance.get("local_view") is False


def _go_through(visit: Any, campaign: Any, token: str) -> None:
    from ratings.models import Slot

    manifest = visit.start(token, SCREENS)
    visit.connected(timeout_ms=120_000)
    slot = Slot.objects.get(evaluator__campaign=campaign, state="active")
    assert slot.session["client"] == "spice-html5" and slot.session["websocket_url"].startswith("ws://")
    status = visit.page.locator("#live-session [data-role='client-status']").inner_text()
    assert "Connected to the remote desktop (SPICE" in status, status
    assert visit.page.locator("#live-session [data-role='local-view']").is_hidden()
    # The display channel draws into a canvas inside #spice-screen.
    canvas = visit.painted("#spice-screen canvas", "rating/live_spice_html5")
    visit.click_through(canvas, manifest, SCREENS, timeout_ms=30_000)
