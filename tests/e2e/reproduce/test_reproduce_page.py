"""A researcher opens the Reproduce page, sees each thesis experiment's size and estimated duration,
starts the quick Fig. 4.6 preset with one click and finds the chapter's findings checked on the sweep
page (inconclusive while no trial has finished: no worker runs here, so none is dispatched).
"""

from __future__ import annotations

import re
from typing import Any

import pytest

pytestmark = [pytest.mark.e2e]


def test_a_researcher_starts_a_quick_preset_and_sees_the_estimate_and_the_findings(
    live_server: Any, alice: Any, chromium_page: Any, save_screenshot: Any
) -> None:
    from experiments.models import Sweep

    page = chromium_page
    page.goto(live_server.url + "/accounts/login/")
    page.get_by_label("Username").fill(alice.username)
    page.get_by_label("Password").fill(f"{alice.username}-password-1")
    page.get_by_role("button", name="Log in").click()
    page.get_by_role("heading", name="Experiments").wait_for()

    page.get_by_role("navigation", name="Main").get_by_role("link", name="Reproduce").click()
    page.get_by_role("heading", name="Reproduce the thesis").wait_for()
    page.get_by_role("heading", name="Chapter 2: storage APT (parallel NBD and iSCSI sessions)").wait_for()
    quick = page.locator('[data-preset="ch4-fig46"] tr[data-size="quick"]')
    assert quick.locator('[data-field="units"]').inner_text() == "27"
    estimate = quick.locator('[data-field="estimate"]').inner_text()
    assert re.fullmatch(r"\d+ (min \d+ s|h \d+ min)", estimate), estimate
    assert "from defaults" in quick.locator('[data-field="basis"]').inner_text()
    save_screenshot(page, "reproduce/reproduce_page")

    page.get_by_role("button", name="Start Fig. 4.6 (quick)").click()
    page.wait_for_url(re.compile(r"/sweeps/\d+/$"))
    sweep = Sweep.objects.get(pk=int(page.url.rstrip("/").rsplit("/", 1)[1]))
    assert sweep.trial_count == 27
    assert page.locator('[data-field="total"]').inner_text() == "27"
    findings = page.locator("#findings")
    findings.get_by_role("heading", name="Thesis findings").wait_for()
    checks = findings.locator("article[data-finding]")
    names = {checks.nth(i).get_attribute("data-finding") for i in range(checks.count())}
    assert {"x2go_best_t_low_rate", "spice_best_t_high_rate", "x2go_smallest_x_and_rate"} <= names, names
    verdicts = {checks.nth(i).get_attribute("data-verdict") for i in range(checks.count())}
    assert verdicts == {"inconclusive"}, verdicts  # no trial has results yet
    save_screenshot(page, "reproduce/quick_fig46_started")
    assert not page.qoelab_problems, page.qoelab_problems
