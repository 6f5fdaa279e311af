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
    lab_stack: Any,
    chromium_page: Any,
    spice_campaign: tuple[Any, str],
    rate_live: Any,
    save_screenshot: Any,
    tmp_path: Path,
    view_reference: Any,
    wait_until_painted: Any,
) -> None:
    campaign, token = spice_campaign
    errors: list[str] = []
    chromium_page.on("pageerror", lambda e: errors.append(f"{e} {e.stack}"))
    trial, _ = rate_live(
        campaign,
        lambda: _go_through(
            chromium_page,
            lab_stack,
            campaign,
            token,
            save_screenshot,
            tmp_path,
            view_reference,
            wait_until_painted,
        ),
    )
    # Seen once in ~10 CI runs: spice-html5's *cursor* channel gets a link reply "Permission denied"
    # from Xspice (cause not found; the display channel and the clicks below are unaffected, and the
    # evaluator keeps the browser's own pointer). Any other page error still fails the test.
    cursor_link = [e for e in errors if e.startswith("Permission denied") and "SpiceCursorConn" in e]
    if cursor_link:
        print(f"spice-html5 cursor channel refused (tolerated, see comment): {cursor_link}")
    assert not [e for e in errors if e not in cursor_link], errors
    assert trial.provenance.get("client") == "spice-html5" and trial.provenance.get("local_view") is False


def _go_through(
    page: Any,
    lab_stack: Any,
    campaign: Any,
    token: str,
    save_screenshot: Any,
    tmp_path: Path,
    view_reference: Any,
    wait_until_painted: Any,
) -> None:
    from qoelab.rd.workload import generate
    from ratings.models import Slot

    manifest = generate(tmp_path / "pages", pages=max(SCREENS, 2), seed=1)
    view_reference(page, lab_stack.url, token, SCREENS)

    page.locator("#live-session[data-connected='true']").wait_for(timeout=120_000)
    slot = Slot.objects.get(evaluator__campaign=campaign, state="active")
    assert slot.session["client"] == "spice-html5" and slot.session["websocket_url"].startswith("ws://")
    status = page.locator("#live-session [data-role='client-status']").inner_text()
    assert "Connected to the remote desktop (SPICE" in status, status
    assert page.locator("#live-session [data-role='local-view']").is_hidden()
    # The display channel draws into a canvas inside #spice-screen.
    canvas = page.locator("#spice-screen canvas").first
    canvas.wait_for(timeout=30_000)
    canvas.scroll_into_view_if_needed()
    wait_until_painted(page, "#spice-screen canvas")  # the first display update, drawn
    save_screenshot(page, "rating/live_spice_html5")
    box = canvas.bounding_box()
    assert box is not None and round(box["width"]) == 800 and round(box["height"]) == 600, box
    for n in range(SCREENS):
        box = canvas.bounding_box()
        cx, cy = manifest.page(n + 1).link.center
        page.mouse.click(box["x"] + cx, box["y"] + cy)
        page.locator("[data-role='degraded-count']").filter(has_text=str(n + 1)).wait_for(timeout=30_000)
    page.wait_for_function("() => !document.getElementById('rating-fields').disabled", timeout=15_000)
