"""axe-core (the npm package, pinned in frontend/package.json) over the researcher's pages and the
evaluator's, in Debian's Chromium: no violation of serious or critical impact (issue 33 found a
trial-page table that scrolled but could not be reached by keyboard, two landmarks without distinct
names and an empty table header on the Reproduce page).

axe runs in the page through DevTools evaluation, which the pages' CSP does not govern; the pages
themselves stay under their CSP.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

AXE = Path(__file__).resolve().parents[3] / "frontend" / "node_modules" / "axe-core" / "axe.min.js"
BLOCKING = ("serious", "critical")


def violations(page: Any) -> list[str]:
    """The page's serious and critical axe violations, one readable line each."""
    if not page.evaluate("() => typeof window.axe !== 'undefined'"):
        page.evaluate(AXE.read_text())
    found = page.evaluate("() => axe.run(document, {resultTypes: ['violations']})")["violations"]
    return [
        f"{v['id']} ({v['impact']}): {v['help']} at {[n['target'] for n in v['nodes'][:3]]}"
        for v in found
        if v["impact"] in BLOCKING
    ]


def test_the_researcher_pages_have_no_serious_accessibility_violation(
    live_server: Any,
    chromium_page: Any,
    alice: Any,
    researcher_paths: list[str],
    log_in: Any,
    wait_for_charts: Any,
) -> None:
    assert AXE.is_file(), "axe-core is not installed: run `make deps` (npm ci in frontend/)"
    page = chromium_page
    page.goto(f"{live_server.url}/accounts/login/")
    problems = {"/accounts/login/": violations(page)}
    log_in(page, live_server.url, alice)
    # At a laptop's width and a phone's: wide tables scroll inside their box only on the phone, and
    # a box that scrolls must be reachable by keyboard.
    for width, height in ((1366, 768), (390, 844)):
        page.set_viewport_size({"width": width, "height": height})
        for path in researcher_paths:
            page.goto(live_server.url + path)
            page.wait_for_load_state("load")
            wait_for_charts(page, path)
            problems[f"{path} at {width} px"] = violations(page)
    assert not any(problems.values()), {p: v for p, v in problems.items() if v}


def test_the_evaluator_pages_have_no_serious_accessibility_violation(
    live_server: Any, chromium_page: Any, alice: Any, recorded_sweep: Any
) -> None:
    from ratings import campaigns, invitations

    campaign = campaigns.open_campaign(
        campaigns.create_campaign(alice, name="accessibility", sweep=recorded_sweep, seed=3)
    )
    ((_, token),) = invitations.invite(campaign, labels=["A1"])
    page = chromium_page
    page.goto(f"{live_server.url}/rate/{token}/")
    problems = {"consent": violations(page)}
    page.get_by_label("I have read this and agree to take part").check()
    page.get_by_role("button", name="Start").click()
    page.get_by_role("heading", name="Practice 1 of 2: the best case").wait_for()
    problems["condition"] = violations(page)
    assert not any(problems.values()), {p: v for p, v in problems.items() if v}
