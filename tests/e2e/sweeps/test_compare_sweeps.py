"""A researcher overlays two sweeps of one job type in Chromium (dashboard.compare; issue 15)."""

from __future__ import annotations

from typing import Any

import pytest

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


def test_two_sweeps_picked_in_the_form_are_drawn_in_one_chart(
    live_server: Any, chromium_page: Any, alice: Any, measured_sweep: Any, log_in: Any
) -> None:
    ns, vm = measured_sweep(alice, "namespace mode", 0.0), measured_sweep(alice, "vm mode", 50.0)
    page = chromium_page
    log_in(page, live_server.url, alice, next="/compare/")
    page.get_by_role("heading", name="Compare sweeps").wait_for()
    page.get_by_label("Job type").select_option("rd_qoe")
    page.get_by_role("button", name="Choose sweeps").click()
    page.get_by_label(f"#{ns.pk} namespace mode").check()
    page.get_by_label(f"#{vm.pk} vm mode").check()
    page.get_by_label("Metric (y)").select_option("T_ms")
    page.get_by_label("Parameter (x)").select_option("rate")
    page.get_by_role("button", name="Compare").click()
    page.wait_for_function("() => Number(document.getElementById('compare-figure').dataset.points) === 4")
    series = page.evaluate(
        """() => window.Chart.getChart(document.querySelector('#compare-figure canvas')).data.datasets
              .map((d) => ({label: d.label, y: d.data.map((p) => p.y)}))"""
    )
    assert series == [
        {"label": f"#{ns.pk} namespace mode", "y": [10.5, 1.5]},
        {"label": f"#{vm.pk} vm mode", "y": [60.5, 51.5]},
    ]
    assert page.get_by_role("button", name="Download SVG").is_visible()
    assert not page.qoelab_problems, page.qoelab_problems
