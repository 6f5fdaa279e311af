"""Compare sweeps (dashboard.compare): one metric of several sweeps of a job type in one chart."""

from __future__ import annotations

from typing import Any

import pytest

from experiments.services import create_sweep

pytestmark = pytest.mark.django_db


def _query(*sweeps: Any, **extra: str) -> str:
    parts = [f"sweeps={s.pk}" for s in sweeps] + [f"{k}={v}" for k, v in extra.items()]
    return "&".join(parts)


def test_each_sweep_brings_its_own_series_with_the_numbers_of_its_own_page(
    client_for, alice, measured_sweep
) -> None:
    ns, vm = measured_sweep(alice, "namespace", 0.0), measured_sweep(alice, "vm", 50.0)
    c = client_for(alice)
    data = c.get(f"/compare/chart.json?job_type=rd_qoe&{_query(ns, vm, y='T_ms', x='rate')}").json()
    assert [s["label"] for s in data["series"]] == [f"#{ns.pk} namespace", f"#{vm.pk} vm"]
    own = c.get(f"/sweeps/{vm.pk}/chart.json?y=T_ms&x=rate").json()
    assert data["series"][1]["points"] == own["series"][0]["points"]
    assert [p["mean"] for p in data["series"][0]["points"]] == [10.5, 1.5]  # per rate, sorted by x
    page = c.get(f"/compare/?job_type=rd_qoe&{_query(ns, vm, y='T_ms', x='rate')}").content.decode()
    assert 'id="compare-figure"' in page and "/compare/chart.json?" in page


def test_a_choice_that_cannot_be_drawn_names_the_field(client_for, alice, bob, measured_sweep) -> None:
    ns = measured_sweep(alice, "namespace", 0.0)
    links = create_sweep(
        {"experiment": {"name": "l"}, "job_type": "t_link", "grid": {"rate": ["1mbit"]}}, alice
    )
    theirs = measured_sweep(bob, "bob's", 0.0)
    c = client_for(alice)

    def errors(query: str) -> dict[str, str]:
        r = c.get(f"/compare/chart.json?{query}")
        assert r.status_code == 400, r.content
        return r.json()["errors"]

    assert "2 to 8" in errors(f"job_type=rd_qoe&{_query(ns, y='T_ms', x='rate')}")["sweeps"]
    assert (
        "all must be rd_qoe" in errors(f"job_type=rd_qoe&{_query(ns, links, y='T_ms', x='rate')}")["sweeps"]
    )
    assert str(theirs.pk) in errors(f"job_type=rd_qoe&{_query(ns, theirs, y='T_ms', x='rate')}")["sweeps"]
    bad = errors(f"job_type=rd_qoe&{_query(ns, ns, y='nope', x='rate', series='rate')}")
    assert set(bad) >= {"y", "series"}
    assert "registered job type" in errors("job_type=nope")["job_type"]
    page = c.get(f"/compare/?job_type=rd_qoe&{_query(ns, y='T_ms', x='rate')}").content.decode()
    assert "sweeps: pick from 2 to 8 sweeps" in page and "compare-figure" not in page


def test_sweeps_of_several_protocols_keep_each_protocols_label(client_for, alice) -> None:
    """Issue 33: two rd_qoe sweeps of two protocols each showed twice each under one label."""
    from django.utils import timezone

    from results.models import SummaryValue

    def sweep(name: str) -> Any:
        s = create_sweep({"experiment": {"name": f"cmp {name}"}, "name": name, "job_type": "rd_qoe",
                          "grid": {"protocol": ["vnc", "spice"], "rate": ["1mbit", "10mbit"]},
                          "fixed": {"delay": "10ms"}}, alice)  # fmt: skip
        now = timezone.now()
        s.trials.update(status="succeeded", started_at=now, finished_at=now)
        for t in s.trials.all():
            SummaryValue.objects.create(trial=t, name="T_ms", value=1e7 / t.resolved["rate"])
        return s

    a, b = sweep("a"), sweep("b")
    data = (
        client_for(alice)
        .get(f"/compare/chart.json?job_type=rd_qoe&{_query(a, b, y='T_ms', x='rate')}")
        .json()
    )
    labels = [s["label"] for s in data["series"]]
    assert len(labels) == 4 and len(set(labels)) == 4, labels
    assert all(" · " in label for label in labels), labels
