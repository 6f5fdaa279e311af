"""A VOSE speedup sweep runs on the real worker and its sweep page draws Fig. 3.11 in Chromium:
vose's throughput against speedup, with the software and hardware runs (which have no speedup) as
dashed reference lines, and the chapter-3 findings section."""

from __future__ import annotations

from typing import Any

import pytest

pytestmark = [pytest.mark.e2e, pytest.mark.celery, pytest.mark.netns, pytest.mark.slow]

FINISH_TIMEOUT_MS = 300_000  # four 1 s streams with calibration and namespaces, with a wide margin

DATASETS_JS = """() => {
  const canvas = document.querySelector('figure[data-chart-key="fig311"] canvas');
  const chart = canvas && window.Chart.getChart(canvas);
  if (!chart) return null;
  return chart.data.datasets.map((d) => ({
    label: d.label, dashed: Array.isArray(d.borderDash) && d.borderDash.length > 0,
    points: d.data.map((p) => ({x: p.x, y: p.y})),
  }));
}"""


def test_a_checksum_speedup_sweep_draws_fig_311_with_reference_lines(
    lab_stack: Any, chromium_page: Any, save_screenshot: Any
) -> None:
    spec = {
        "experiment": {"name": "e2e vose"},
        "job_type": "vose",
        "name": "checksum speedup",
        "grid": {"mode": ["software", "hardware", "vose"], "speedup": [2, "inf"]},
        "fixed": {"path": "kernel_csum", "duration": "1s", "calibration_samples": 200},
        "repetitions": 1,
    }
    sweep = lab_stack.api().post("/api/sweeps/", spec, "creating the sweep")
    assert sweep["trial_count"] == 4  # software and hardware once: speedup applies to vose only

    page = chromium_page
    username, password = lab_stack.researcher
    page.goto(lab_stack.url + f"/sweeps/{sweep['id']}/")
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill(password)
    page.get_by_role("button", name="Log in").click()
    page.get_by_role("heading", name="checksum speedup").wait_for()
    try:
        finished = "() => document.getElementById('progress').dataset.state === 'finished'"
        page.wait_for_function(finished, timeout=FINISH_TIMEOUT_MS)
    except Exception:
        save_screenshot(page, "vose/speedup_sweep_timeout")
        pytest.fail(f"the vose sweep did not finish: {lab_stack.worker.log_tail()}")
    trials = lab_stack.api().get_all("/api/trials/", sweep=sweep["id"])
    assert [t["status"] for t in trials] == ["succeeded"] * 4, [t["error"] for t in trials]

    # A redraw from before the last trial finished may still be on screen: wait for the final one
    # (three series, vose with both speedups).
    full = f"(({DATASETS_JS})() ?? [])"
    vose_full = "d.some((s) => s.points.length === 2 && !s.dashed)"
    final = f"() => {{ const d = {full}; return d.length === 3 && {vose_full}; }}"
    page.wait_for_function(final, timeout=30_000)
    sets = {d["label"]: d for d in page.evaluate(DATASETS_JS)}
    assert set(sets) == {"mode = software", "mode = hardware", "mode = vose"}, sets
    vose = sets["mode = vose"]
    assert not vose["dashed"] and len(vose["points"]) == 2  # speedup 2 and inf
    for ref in ("mode = software", "mode = hardware"):
        line = sets[ref]["points"]
        assert sets[ref]["dashed"] and len(line) == 2 and line[0]["y"] == line[1]["y"] > 0
        # The reference spans vose's x range (categories 0 and 1: "2" and "inf").
        assert [p["x"] for p in line] == [p["x"] for p in vose["points"]]
    page.locator('[data-finding="checksum_gain_by_2x"]').wait_for(state="attached")
    save_screenshot(page, "vose/speedup_sweep")
    assert page.qoelab_problems == []
