"""The New-sweep form in Chromium (issue 15): rd_qoe's parameter groups start closed at the thesis
defaults, a group opens with a click (a <details>, no script), a boolean is a checkbox, and one
submit with two mistakes of different kinds (the form's own and the sweep spec's) shows both."""

from __future__ import annotations

import re
from typing import Any

import pytest
from playwright.sync_api import expect

from experiments.models import Sweep

pytestmark = [pytest.mark.e2e]


def _is_open(page: Any, group: str) -> bool:
    return page.locator(f"details#group-{group}").evaluate("el => el.open")


def test_groups_open_on_demand_a_checkbox_ticks_and_two_mistakes_show_at_once(
    live_server: Any, alice: Any, chromium_page: Any, log_in: Any, save_screenshot: Any
) -> None:
    page = chromium_page
    log_in(page, live_server.url, alice, next="/sweeps/new/?job_type=rd_qoe")
    page.get_by_role("heading", name="New sweep").wait_for()

    # The thesis defaults are collapsed; protocol is required, so its group is open.
    assert [_is_open(page, g) for g in ("link", "protocol", "driver", "recording")] == [
        False,
        True,
        False,
        False,
    ]
    record = page.get_by_label("record: fixed value")
    expect(record).to_be_hidden()
    expect(page.get_by_label("rate: values to sweep", exact=True)).to_be_hidden()

    # Open the recording group and tick the checkbox.
    page.locator("details#group-recording > summary").click()
    assert _is_open(page, "recording")
    expect(record).to_be_visible()
    assert record.get_attribute("type") == "checkbox" and not record.is_checked()
    record.check()

    # Two mistakes: no experiment (the form's check) and an unknown protocol (the sweep spec's check).
    page.get_by_label("protocol: values to sweep", exact=True).fill("vnc, ftp")
    page.get_by_label("Sweep name").fill("recorded")
    page.get_by_role("button", name="Create sweep").click()
    page.wait_for_load_state("load")

    summary = page.locator("#form-problems")
    expect(summary).to_contain_text("these 2 problems")
    expect(summary).to_contain_text("Choose an experiment or name a new one.")
    expect(summary).to_contain_text("protocol: values to sweep")
    expect(page.locator("#id_new_experiment_errors")).to_contain_text("Choose an experiment")
    expect(page.locator("#id_grid_protocol_errors")).to_contain_text("value 'ftp': Input should be 'vnc'")
    # What was typed and ticked is kept, and the groups with something in them stay open.
    assert record.is_checked() and _is_open(page, "recording") and not _is_open(page, "driver")
    save_screenshot(page, "sweeps/sweep-form-errors")

    # The summary's link takes the researcher to the field.
    summary.get_by_role("link", name="protocol: values to sweep").click()
    expect(page.get_by_label("protocol: values to sweep", exact=True)).to_be_in_viewport()

    # Corrected, it creates the sweep with the ticked value.
    page.get_by_label("New experiment name").fill("form e2e")
    page.get_by_label("protocol: values to sweep", exact=True).fill("vnc, spice")
    page.get_by_role("button", name="Create sweep").click()
    # (The browser keeps the summary link's #fragment across the redirect.)
    page.wait_for_url(re.compile(r"/sweeps/\d+/(#.*)?$"))
    sweep = Sweep.objects.get(pk=int(re.search(r"/sweeps/(\d+)/", page.url).group(1)))
    assert sweep.fixed == {"record": True}
    assert sweep.grid == {"protocol": ["vnc", "spice"]}
    # The refused submit is answered with status 400 on purpose (Chromium logs that as a console error);
    # nothing else may go wrong: no CSP violation, no script error, no failed request.
    refused = "Failed to load resource: the server responded with a status of 400 (Bad Request)"
    assert [p for p in page.qoelab_problems if p != f"console: {refused}"] == [], page.qoelab_problems
    assert len(page.qoelab_problems) <= 1
