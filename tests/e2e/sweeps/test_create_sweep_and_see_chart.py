"""A researcher logs in, creates a link_check sweep in the form, watches it finish, sees a chart.

Runs against the real stack (``lab_stack``: live server, scheduler, a real Celery worker that
builds the emulated links and runs iperf3) in Debian's Chromium. The chart is checked through the
Chart.js instance's data, not just by the presence of a canvas.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from playwright.sync_api import expect

pytestmark = [pytest.mark.e2e, pytest.mark.celery, pytest.mark.netns, pytest.mark.slow]

FINISH_TIMEOUT_MS = 300_000  # four link checks of ~10 s each, plus scheduling, with a wide margin

# The preset chart "rate" of link_check: measured TCP goodput against the configured rate.
CHART_POINTS_JS = """() => {
  const canvas = document.querySelector('figure[data-chart-key="rate"] canvas');
  const chart = canvas && window.Chart.getChart(canvas);
  if (!chart) return null;
  return chart.data.datasets
    .filter((d) => d.qoelabErrorBars)
    .map((d) => ({
      label: d.label,
      points: d.data.map((p) => ({x: p.x, y: p.y, yMin: p.yMin, yMax: p.yMax, n: p.n})),
    }));
}"""


def test_a_researcher_creates_a_sweep_in_the_form_and_sees_its_chart_fill(
    lab_stack: Any, chromium_page: Any, save_screenshot: Any
) -> None:
    page = chromium_page
    username, password = lab_stack.researcher

    # The site sends a visitor to the login page; log in there like a person would.
    page.goto(lab_stack.url + "/")
    assert "/accounts/login/" in page.url
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill(password)
    page.get_by_role("button", name="Log in").click()
    page.get_by_role("heading", name="Experiments").wait_for()

    page.get_by_role("navigation", name="Main").get_by_role("link", name="New sweep").click()
    assert page.get_by_label("Job type").input_value() == "link_check"
    page.get_by_label("New experiment name").fill("e2e link fidelity")
    page.get_by_label("Sweep name").fill("two rates")
    page.get_by_label("rate: values to sweep", exact=True).fill("5mbit, 10mbit")
    page.get_by_label("delay: fixed value", exact=True).fill("5ms")
    page.get_by_label("duration: fixed value", exact=True).fill("1s")
    page.get_by_label("Repetitions").fill("2")
    page.get_by_role("button", name="Create sweep").click()

    page.wait_for_url(re.compile(r"/sweeps/\d+/$"))
    page.get_by_role("heading", name="two rates").wait_for()
    sweep_id = int(page.url.rstrip("/").rsplit("/", 1)[1])
    assert page.locator('[data-field="total"]').inner_text() == "4"
    # Marks this document: if the page reloaded itself, the mark would be gone.
    page.evaluate("() => { window.qoelabNoReload = true; }")

    try:
        finished = "() => document.getElementById('progress').dataset.state === 'finished'"
        page.wait_for_function(finished, timeout=FINISH_TIMEOUT_MS)
    except Exception:
        save_screenshot(page, "sweeps/create_sweep_timeout")
        from experiments.models import Trial

        states = list(Trial.objects.filter(sweep_id=sweep_id).values_list("index", "status", "error"))
        pytest.fail(f"sweep {sweep_id} did not finish in the page: {states}\n{lab_stack.worker.log_tail()}")

    assert page.evaluate("() => window.qoelabNoReload") is True, "the page reloaded instead of polling"
    progress = page.locator("#progress")
    assert progress.locator('[data-field="done"]').inner_text() == "4"
    # The page re-fetches the trial table before it shows "finished".
    trials = page.get_by_role("table", name="Trials")
    ended = "tbody tr[data-status=succeeded], tbody tr[data-status=failed], tbody tr[data-status=cancelled]"
    expect(trials.locator(ended)).to_have_count(4, timeout=1000)
    statuses = trials.locator("tbody tr").evaluate_all("rows => rows.map(r => r.dataset.status)")
    errors = trials.locator("td.error").all_inner_texts()
    assert statuses == ["succeeded"] * 4, f"trial errors: {errors}"
    assert progress.locator('[data-field="failed"]').inner_text() == "0"

    # The chart refreshes when trials finish; wait for both points, then read them from Chart.js.
    # Each point is the mean of the two repetitions with its 95 % interval as whiskers.
    # A redraw from before the last trial finished may still be on screen: wait for the final one.
    full = f"(({CHART_POINTS_JS})()?.flatMap((d) => d.points) ?? [])"
    page.wait_for_function(f"() => {full}.length === 2 && {full}.every((p) => p.n === 2)", timeout=30_000)
    series = page.evaluate(CHART_POINTS_JS)
    assert [s["label"] for s in series] == ["delay = 5ms"]
    points = series[0]["points"]
    assert [p["x"] for p in points] == [5, 10]  # Mbit/s on the axis
    assert all(p["n"] == 2 for p in points)
    assert all(p["yMin"] <= p["y"] <= p["yMax"] for p in points), points
    # Goodput measured through the emulated link: positive and not above the configured rate
    # by more than measurement noise (the link check's own tolerances are tested elsewhere).
    for p in points:
        assert 0 < p["y"] <= p["x"] * 1.1, points
    assert page.get_by_role("img", name="Chart: Measured TCP goodput vs configured rate").is_visible()
    preset = page.locator("figure.chart").first
    assert preset.locator("[data-role=chart-stat]").inner_text().startswith("mean ± 95 % CI")

    save_screenshot(page, "sweeps/create_sweep_and_see_chart")
    assert page.qoelab_problems == []

    # An impossible custom chart says the server's reason and leaves no stale chart beside it.
    custom = page.locator("#custom-chart-figure")
    page.wait_for_function("() => document.getElementById('custom-chart-figure').dataset.points > 0")
    page.get_by_label("Panels per").select_option("rate")  # the same parameter as x
    expect(custom.locator("[data-role=chart-note]")).to_contain_text("facet: must differ")
    assert custom.evaluate("(f) => f.dataset.points") == "0"
    assert custom.evaluate("(f) => window.Chart.getChart(f.querySelector('canvas')) === undefined")
    # The browser logs the refused request itself; nothing else went wrong.
    assert [p for p in page.qoelab_problems if "status of 400" not in p] == []
