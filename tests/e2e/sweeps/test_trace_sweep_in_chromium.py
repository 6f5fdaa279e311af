"""Issue 37's "done when": a researcher creates an rd_qoe sweep over the shipped LTE trace in the
New-sweep form, a real worker runs it (VNC over linkemu replaying Verizon LTE both ways), and the
trial page draws the link log: the trace's capacity against the throughput, per direction.

Runs against the real stack (``lab_stack``) in Debian's Chromium; the chart is read from Chart.js.
"""

from __future__ import annotations

import re
from typing import Any

import pytest

pytestmark = [pytest.mark.e2e, pytest.mark.celery, pytest.mark.netns, pytest.mark.slow]

DATASETS_JS = """(key) => {
  const chart = window.Chart?.getChart(document.querySelector(`figure[data-link-log="${key}"] canvas`));
  return chart ? chart.data.datasets.map((d) => ({label: d.label, n: d.data.length,
                                                   max: Math.max(...d.data.map((p) => p.y ?? 0))})) : null;
}"""


def test_an_rd_qoe_sweep_over_the_lte_trace_runs_from_the_form_and_draws_its_link_log(
    lab_stack: Any, chromium_page: Any, save_screenshot: Any
) -> None:
    from experiments.models import Trial

    page = chromium_page
    username, password = lab_stack.researcher
    page.goto(lab_stack.url + "/sweeps/new/?job_type=rd_qoe")
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill(password)
    page.get_by_role("button", name="Log in").click()
    page.get_by_role("heading", name="New sweep").wait_for()

    page.get_by_label("New experiment name").fill("e2e remote desktop over LTE")
    page.get_by_label("Sweep name").fill("vnc over Verizon LTE")
    page.get_by_label("protocol: values to sweep", exact=True).fill("vnc")
    page.locator("details#group-link > summary").click()
    page.get_by_label("link_trace: values to sweep", exact=True).fill("Verizon-LTE-short.down")
    page.get_by_label("up_link_trace: fixed value", exact=True).fill("Verizon-LTE-short.up")
    page.get_by_label("delay: fixed value", exact=True).fill("20ms")
    page.locator("details#group-driver > summary").click()
    page.get_by_label("pages: fixed value", exact=True).fill("2")
    page.get_by_role("button", name="Create sweep").click()
    page.wait_for_url(re.compile(r"/sweeps/\d+/$"))
    sweep_id = int(page.url.rstrip("/").rsplit("/", 1)[1])

    finished = "() => document.getElementById('progress').dataset.state === 'finished'"
    try:
        page.wait_for_function(finished, timeout=600_000)
    except Exception:
        states = list(Trial.objects.filter(sweep_id=sweep_id).values_list("status", "error"))
        pytest.fail(f"sweep {sweep_id} did not finish: {states}\n{lab_stack.worker.log_tail()}")
    (trial,) = Trial.objects.filter(sweep_id=sweep_id)
    assert trial.status == "succeeded", (trial.error, lab_stack.worker.log_tail())
    assert trial.params["link_trace"] == "Verizon-LTE-short.down"

    page.goto(f"{lab_stack.url}/trials/{trial.pk}/")
    page.get_by_role("heading", name="Link log").wait_for()
    for direction in ("down", "up"):
        page.wait_for_function(f"() => ({DATASETS_JS})('{direction}-rate') !== null", timeout=15_000)
        drawn = {d["label"]: d for d in page.evaluate(DATASETS_JS, f"{direction}-rate")}
        capacity, throughput = drawn["capacity (trace)"], drawn["throughput"]
        assert capacity["n"] == throughput["n"] > 10, drawn  # 100 ms bins over the trial's link
        # The LTE trace offers up to tens of Mbit/s in a 100 ms bin; the session used some of it,
        # never more than was offered.
        assert capacity["max"] > 1 and 0 < throughput["max"] <= capacity["max"] * 1.05, drawn
        assert page.evaluate(DATASETS_JS, f"{direction}-delay") is not None
    save_screenshot(page, "dashboard/rd_qoe_lte_link_log")
    assert not page.qoelab_problems, page.qoelab_problems
