"""The evaluator page's layout in Debian's Chromium (issue 15): the stimulus at its size, controls in reach.

A laptop (1366 x 768): the recorded video is drawn at 800 x 600 CSS px and the Play buttons are in view on
arrival, without scrolling. A phone (390 x 844): the consent and condition pages say that a window at least
800 px wide is needed, show no video, form or remote desktop, and nothing is wider than the viewport.
Live mode: on a narrow window the page takes no place in the queue until it is widened.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
from playwright.sync_api import expect

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

NOTICE = re.compile(r"at least 800\s+px wide")  # 800&nbsp;px in the page
NO_OVERFLOW = "() => document.documentElement.scrollWidth <= window.innerWidth"
STARTED: list[int] = []


# The live-session provider of the live test (QOELAB_LIVE_SESSION_PROVIDER = this module): no lab needed.
def start_session(slot: Any) -> dict[str, Any]:
    STARTED.append(slot.pk)
    return {"error": "No remote desktop in this layout test."}


def stop_session(slot: Any) -> None:
    return None


@pytest.fixture
def recorded_campaign(alice: Any, recorded_sweep: Any) -> tuple[Any, str]:
    from ratings import campaigns, invitations

    campaign = campaigns.open_campaign(
        campaigns.create_campaign(alice, name="e2e layout", sweep=recorded_sweep, seed=3)
    )
    ((_, token),) = invitations.invite(campaign, labels=["W1"])
    return campaign, token


@pytest.fixture
def live_campaign(alice: Any, settings: Any) -> tuple[Any, str]:
    from ratings import campaigns, demo, invitations

    settings.QOELAB_LIVE_SESSION_PROVIDER = __name__
    STARTED.clear()
    points = [{"protocol": "vnc", "rate": r, "delay": d} for r, d in (("10mbit", "20ms"), ("2mbit", "50ms"))]
    sweep = demo.demo_sweep(alice, points, name="layout live demo")
    campaign = campaigns.open_campaign(
        campaigns.create_campaign(alice, name="e2e layout live", mode="live", sweep=sweep, seed=3)
    )
    ((_, token),) = invitations.invite(campaign, labels=["W2"])
    return campaign, token


def _consent(page: Any) -> None:
    page.get_by_label("I have read this and agree to take part").check()
    page.get_by_role("button", name="Start").click()
    page.get_by_role("heading", name="Practice 1 of 2: the best case").wait_for()


def _size(locator: Any) -> tuple[int, int]:
    box = locator.bounding_box()
    assert box is not None
    return round(box["width"]), round(box["height"])


def _inside_viewport(page: Any, locator: Any) -> bool:
    box, view = locator.bounding_box(), page.viewport_size
    assert box is not None
    return (
        box["x"] >= 0
        and box["y"] >= 0
        and box["x"] + box["width"] <= view["width"]
        and box["y"] + box["height"] <= view["height"]
    )


def _problems(page: Any) -> list[str]:
    return [p for p in page.qoelab_problems if "favicon" not in p]


@pytest.mark.parametrize(("width", "height"), [(1366, 768), (1920, 1080), (1024, 768), (840, 768)])
def test_on_a_laptop_the_video_is_800x600_and_the_play_buttons_are_in_view_on_arrival(
    live_server: Any,
    chromium_page: Any,
    recorded_campaign: tuple[Any, str],
    save_screenshot: Any,
    width: int,
    height: int,
) -> None:
    _, token = recorded_campaign
    page = chromium_page
    page.set_viewport_size({"width": width, "height": height})
    page.goto(f"{live_server.url}/rate/{token}/")
    expect(page.get_by_text(NOTICE)).to_be_hidden()
    _consent(page)

    reference = page.locator("video#video-reference")
    play_ref = page.get_by_role("button", name="Play the reference", exact=True)
    play_deg = page.get_by_role("button", name="Play the case to rate", exact=True)
    expect(reference).to_be_visible()
    expect(page.get_by_text(NOTICE)).to_be_hidden()
    assert page.evaluate("() => window.scrollY") == 0
    # Both Play buttons in view as the page opens (the second one waits for the reference).
    expect(play_ref).to_be_in_viewport(ratio=1)
    expect(play_deg).to_be_in_viewport(ratio=1)
    expect(play_deg).to_be_disabled()
    assert _inside_viewport(page, play_ref) and _inside_viewport(page, play_deg)
    assert _size(reference) == (800, 600), "the video must be drawn at its recorded size, 1:1"
    assert page.evaluate(NO_OVERFLOW)
    if width >= 1366:
        # On a 1366 x 768 laptop and wider, the whole video is in view too, beside the steps.
        expect(reference).to_be_in_viewport(ratio=1)
    save_screenshot(page, f"rating/layout_{width}x{height}")

    play_ref.click()
    page.locator("[data-seen='reference']").filter(has_text="Watched").wait_for(timeout=15_000)
    assert page.evaluate("() => document.getElementById('video-reference').videoWidth") == 800
    expect(play_deg).to_be_enabled()
    expect(play_deg).to_be_in_viewport(ratio=1)
    ref_box = reference.bounding_box()
    play_deg.click()
    # The case to rate plays in the reference's place, at the same size; the reference is not shown.
    degraded = page.locator("video#video-degraded")
    expect(degraded).to_be_visible()
    expect(reference).to_be_hidden()
    deg_box = degraded.bounding_box()
    assert deg_box is not None and ref_box is not None
    assert (round(deg_box["x"]), round(deg_box["width"]), round(deg_box["height"])) == (
        round(ref_box["x"]),
        800,
        600,
    )
    page.locator("[data-seen='degraded']").filter(has_text="Watched").wait_for(timeout=15_000)
    page.wait_for_function("() => !document.getElementById('rating-fields').disabled")

    # After a reload the next video to play is the one on the stage, and its button is in view.
    page.reload()
    page.get_by_role("heading", name="Practice 1 of 2: the best case").wait_for()
    expect(degraded).to_be_visible()
    expect(play_deg).to_be_in_viewport(ratio=1)
    assert _size(degraded) == (800, 600)
    assert not _problems(page), page.qoelab_problems


@pytest.fixture
def phone_page(chromium: Any) -> Iterator[Any]:
    """A page in a phone's browser (390 x 844, touch, a layout viewport that would widen to fit)."""
    context = chromium.new_context(
        viewport={"width": 390, "height": 844}, device_scale_factor=2, is_mobile=True, has_touch=True
    )
    page = context.new_page()
    problems: list[str] = []
    page.on("console", lambda m: problems.append(f"console: {m.text}") if m.type == "error" else None)
    page.on("pageerror", lambda e: problems.append(f"page error: {e}"))
    page.qoelab_problems = problems
    yield page
    context.close()


def test_on_a_phone_the_consent_and_condition_pages_ask_for_a_wider_window_instead_of_a_shrunk_video(
    live_server: Any, phone_page: Any, recorded_campaign: tuple[Any, str], save_screenshot: Any
) -> None:
    _, token = recorded_campaign
    page = phone_page
    page.goto(f"{live_server.url}/rate/{token}/")
    page.get_by_role("heading", name="Welcome, and thank you for helping").wait_for()
    # Before the first case: the consent page says it already.
    notice = page.get_by_text(NOTICE)
    expect(notice).to_be_visible()
    expect(notice).to_contain_text("the videos must be seen at their full size")
    assert page.evaluate(NO_OVERFLOW), page.evaluate("() => document.documentElement.scrollWidth")
    save_screenshot(page, "rating/layout_390_consent")

    _consent(page)
    expect(notice).to_be_visible()
    for hidden in ("video#video-reference", "video#video-degraded", "#rating-form"):
        expect(page.locator(hidden)).to_be_hidden()
    expect(page.get_by_role("button", name="Play the reference", exact=True)).to_be_hidden()
    assert page.evaluate(NO_OVERFLOW), page.evaluate("() => document.documentElement.scrollWidth")
    save_screenshot(page, "rating/layout_390_condition")

    # The same page on a wider window: the video is there at its size, the sentence is gone.
    page.set_viewport_size({"width": 1366, "height": 768})
    expect(notice).to_be_hidden()
    expect(page.locator("video#video-reference")).to_be_visible()
    assert _size(page.locator("video#video-reference")) == (800, 600)
    assert not _problems(page), page.qoelab_problems


def test_live_mode_on_a_narrow_window_shows_no_remote_desktop_and_takes_no_place_in_the_queue(
    live_server: Any, chromium_page: Any, live_campaign: tuple[Any, str]
) -> None:
    from ratings.models import Slot

    campaign, token = live_campaign
    page = chromium_page
    slot_calls: list[str] = []
    page.on("request", lambda r: slot_calls.append(r.method) if r.url.endswith("/api/rate/slot/") else None)
    page.set_viewport_size({"width": 390, "height": 844})
    page.goto(f"{live_server.url}/rate/{token}/")
    notice = page.get_by_text(NOTICE)
    expect(notice).to_contain_text("the remote desktop must be seen at its full size")
    _consent(page)
    expect(notice).to_contain_text("the remote desktop must be seen at its full size")
    expect(page.locator("#live-session")).to_be_hidden()
    expect(page.locator("#rating-form")).to_be_hidden()
    page.wait_for_function("() => !!window.qoelabRate")  # the page script ran
    page.wait_for_load_state("networkidle")
    assert slot_calls == [] and not Slot.objects.filter(evaluator__campaign=campaign).exists()
    assert page.evaluate(NO_OVERFLOW), page.evaluate("() => document.documentElement.scrollWidth")

    # Widened to a laptop: the remote-desktop view appears at 800 x 600 and the page asks for a place.
    with page.expect_request(lambda r: r.url.endswith("/api/rate/slot/") and r.method == "POST"):
        page.set_viewport_size({"width": 1366, "height": 768})
    expect(notice).to_be_hidden()
    frame = page.locator("iframe[data-role='reference']")
    expect(frame).to_be_visible()
    assert _size(frame) == (800, 600)
    page.get_by_text("No remote desktop in this layout test.").wait_for(timeout=15_000)
    assert Slot.objects.filter(evaluator__campaign=campaign).count() == 1 and len(STARTED) == 1
