"""A researcher makes rating campaigns in Chromium: each mode gets the aspects its evaluators can
judge and the stimulus count they really see; a hands-on aspect in recorded mode is kept with a
warning; sweeps that record no sessions are not offered (issue 15)."""

from __future__ import annotations

import re
from typing import Any

import pytest

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


def _aspects(page: Any) -> str:
    facts = page.locator("dl.facts")
    return facts.locator("dt", has_text="Aspects").locator("xpath=following-sibling::dd[1]").inner_text()


def test_each_mode_gets_its_aspects_and_a_hands_on_aspect_in_recorded_mode_is_warned(
    live_server: Any, chromium_page: Any, alice: Any, log_in: Any
) -> None:
    from experiments.services import create_sweep
    from ratings import demo

    sweep = demo.demo_sweep(
        alice, [{"protocol": "vnc", "rate": "1mbit", "delay": d} for d in ("10ms", "50ms")]
    )
    links = create_sweep(
        {"experiment": {"name": "links"}, "job_type": "link_check", "name": "only links",
         "grid": {"rate": ["1mbit"]}, "fixed": {"delay": "5ms", "duration": "1s"}},
        alice,
    )  # fmt: skip
    page = chromium_page
    log_in(page, live_server.url, alice, next="/campaigns/new/")
    page.get_by_role("heading", name="New rating campaign").wait_for()
    options = page.get_by_label("Conditions from sweep").locator("option").all_inner_texts()
    assert any(sweep.name in o for o in options) and not any(links.name in o for o in options), options

    # Recorded (the default), aspects left empty: the two a viewer can judge, one video per stage.
    page.get_by_label("Campaign name").fill("recorded default")
    page.get_by_label("Conditions from sweep").select_option(str(sweep.pk))
    page.get_by_role("button", name="Create campaign").click()
    page.get_by_role("heading", name="recorded default").wait_for()
    assert _aspects(page) == "Screen response time; Image clarity"
    assert "each watched once, whole" in page.locator('[data-field="stimuli"]').inner_text()
    assert page.locator('[data-role="aspect-warning"]').count() == 0

    # Live: the three of the thesis' four a live session exercises (nothing is typed), five screens.
    page.goto(f"{live_server.url}/campaigns/new/")
    page.get_by_label("Campaign name").fill("live default")
    page.get_by_label("Mode", exact=True).select_option("live")
    page.get_by_label("Conditions from sweep").select_option(str(sweep.pk))
    page.get_by_role("button", name="Create campaign").click()
    page.get_by_role("heading", name="live default").wait_for()
    assert _aspects(page) == "Screen response time; Mouse response time; Image clarity"
    assert page.locator('[data-field="stimuli"]').inner_text().startswith("5 screens")

    # Recorded with the mouse asked for anyway: kept, and the page says why it is doubtful.
    page.goto(f"{live_server.url}/campaigns/new/")
    page.get_by_label("Campaign name").fill("recorded mouse")
    page.get_by_label("Conditions from sweep").select_option(str(sweep.pk))
    page.get_by_label("Aspects to rate").fill("Screen response time\nMouse response time")
    page.get_by_role("button", name="Create campaign").click()
    page.get_by_role("heading", name="recorded mouse").wait_for()
    assert "Mouse response time" in _aspects(page)
    warning = page.locator('[data-role="aspect-warning"]')
    assert warning.count() == 1 and re.search(r"only watch", warning.inner_text())

    # A screen count for a recorded campaign is refused, naming the field, and nothing is created.
    page.goto(f"{live_server.url}/campaigns/new/")
    page.get_by_label("Campaign name").fill("recorded five")
    page.get_by_label("Conditions from sweep").select_option(str(sweep.pk))
    page.get_by_label("Screens per stage (live mode)").fill("5")
    page.get_by_role("button", name="Create campaign").click()
    page.get_by_role("alert").filter(has_text="live campaigns only").wait_for()
    assert page.get_by_role("heading", name="New rating campaign").is_visible()
    # The refused form answers 400, which the browser logs; nothing else went wrong.
    assert [p for p in page.qoelab_problems if "status of 400" not in p] == []
