"""Faceted charts (one panel per value of a parameter): the rd_qoe Fig. 4.7/4.8 presets, PostgreSQL."""

from __future__ import annotations

import math

import pytest
from django.contrib.auth.models import User
from django.utils import timezone

from experiments.models import Sweep
from experiments.services import create_sweep
from results.models import SummaryValue
from results.services import aggregate

pytestmark = pytest.mark.django_db

T_975_DF1 = 12.706204736174707  # Student t quantile for n = 2, from tables


def _t_ms(protocol: str, rate: float, delay: float, repetition: int) -> float:
    """A made-up T that differs per protocol, rate and delay, so pooled and split means differ."""
    base = {"vnc": 100.0, "spice": 200.0}[protocol]
    return base + (1e7 / rate) * 100.0 + delay * 1e4 + 10.0 * repetition


def _delay_sweep(user: User) -> Sweep:
    spec = {
        "experiment": {"name": "T vs delay"},
        "job_type": "rd_qoe",
        "grid": {"protocol": ["vnc", "spice"], "rate": ["1mbit", "10mbit"], "delay": ["10ms", "50ms"]},
        "fixed": {"pages": 2},
        "repetitions": 2,
    }
    sweep = create_sweep(spec, user)
    now = timezone.now()
    for t in sweep.trials.all():
        sweep.trials.filter(pk=t.pk).update(status="succeeded", started_at=now, finished_at=now)
        r = t.resolved
        SummaryValue.objects.create(
            trial=t, name="T_ms", value=_t_ms(r["protocol"], r["rate"], r["delay"], t.repetition)
        )
    return sweep


def test_the_fig_4_7_preset_has_one_panel_per_rate_with_that_rates_points(client_for, alice) -> None:
    sweep = _delay_sweep(alice)
    data = client_for(alice).get(f"/sweeps/{sweep.pk}/chart.json?preset=fig47_T").json()
    assert data["facet"] == "rate"
    assert [p["label"] for p in data["panels"]] == ["(a) rate = 1mbit", "(b) rate = 10mbit"]
    assert [p["value"] for p in data["panels"]] == [1e6, 1e7]
    for panel, rate in zip(data["panels"], (1e6, 1e7), strict=True):
        assert [s["label"] for s in panel["series"]] == ["protocol = spice", "protocol = vnc"]
        for s in panel["series"]:
            protocol = s["label"].split(" = ")[1]
            assert [p["x"] for p in s["points"]] == [0.01, 0.05]
            for point in s["points"]:
                values = [_t_ms(protocol, rate, point["x"], rep) for rep in (0, 1)]
                assert point["n"] == 2
                assert point["mean"] == pytest.approx(sum(values) / 2)
                half = T_975_DF1 * 10.0 / math.sqrt(2) / math.sqrt(2)  # s = 10/√2 for two values 10 apart
                assert point["ci_high"] - point["mean"] == pytest.approx(half)
    # The top-level series still pool both rates (what clients without panels draw).
    pooled = data["series"][1]["points"][0]
    assert pooled["n"] == 4
    assert pooled["mean"] == pytest.approx(
        sum(_t_ms("vnc", rate, 0.01, rep) for rate in (1e6, 1e7) for rep in (0, 1)) / 4
    )


def test_a_preset_without_a_facet_is_a_single_panel_equal_to_the_series(client_for, alice) -> None:
    sweep = _delay_sweep(alice)
    data = client_for(alice).get(f"/sweeps/{sweep.pk}/chart.json?preset=fig46_T").json()
    assert data["facet"] is None
    (panel,) = data["panels"]
    assert panel["label"] == "" and panel["series"] == data["series"]


def test_the_custom_chart_takes_a_facet_and_rejects_one_equal_to_x(client_for, alice) -> None:
    sweep = _delay_sweep(alice)
    c = client_for(alice)
    url = f"/sweeps/{sweep.pk}/chart.json?y=T_ms&x=rate&series=protocol&facet=delay"
    data = c.get(url).json()
    assert [p["label"] for p in data["panels"]] == ["(a) delay = 10ms", "(b) delay = 50ms"]
    (spice_at_1mbit, _) = data["panels"][1]["series"][0]["points"]
    assert spice_at_1mbit["mean"] == pytest.approx(_t_ms("spice", 1e6, 0.05, 0) + 5.0)
    bad = c.get(f"/sweeps/{sweep.pk}/chart.json?y=T_ms&x=rate&facet=rate")
    assert bad.status_code == 400 and "must differ" in bad.json()["errors"]["facet"]
    unknown = c.get(f"/sweeps/{sweep.pk}/chart.json?y=T_ms&x=rate&facet=colour")
    assert unknown.status_code == 400 and "parameter of rd_qoe" in unknown.json()["errors"]["facet"]


def test_the_sweep_page_marks_the_faceted_presets(client_for, alice) -> None:
    sweep = _delay_sweep(alice)
    html = client_for(alice).get(f"/sweeps/{sweep.pk}/").content.decode()
    assert 'data-chart-key="fig47_T" data-facet="rate"' in html
    assert 'class="chart faceted"' in html
    assert 'id="chart-facet"' in html


def test_aggregate_keeps_only_trials_matching_where(alice) -> None:
    sweep = _delay_sweep(alice)
    agg = aggregate(sweep, "T_ms", "delay", "protocol", where={"rate": 1e7, "protocol": "vnc"})
    (series,) = agg["series"]
    assert series["value"] == "vnc"
    assert [p["mean"] for p in series["points"]] == pytest.approx(
        [_t_ms("vnc", 1e7, d, 0) + 5.0 for d in (0.01, 0.05)]
    )
    assert aggregate(sweep, "T_ms", "delay", where={"rate": 5e6})["series"] == []
