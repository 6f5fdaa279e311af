"""The thesis' findings on the sweep page and at /api/sweeps/<id>/findings/, against PostgreSQL."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from experiments.models import Sweep
from experiments.services import create_sweep
from results.models import SummaryValue

pytestmark = pytest.mark.django_db

# Mean T (ms) per protocol and rate as written: X2Go lowest at 1 and 2 Mbit/s, SPICE at 100 Mbit/s.
T_MS = {
    ("x2go", "1mbit"): 100.0,
    ("x2go", "2mbit"): 80.0,
    ("x2go", "100mbit"): 60.0,
    ("spice", "1mbit"): 500.0,
    ("spice", "2mbit"): 300.0,
    ("spice", "100mbit"): 20.0,
}
X_BYTES = {"x2go": 10e3, "spice": 60e3}


def rd_sweep(user: Any, repetitions: int = 3) -> Sweep:
    spec = {
        "experiment": {"name": "ch4"},
        "job_type": "rd_qoe",
        "name": "Fig. 4.6",
        "grid": {"protocol": ["x2go", "spice"], "rate": ["1mbit", "2mbit", "100mbit"]},
        "fixed": {"delay": "10ms"},
        "repetitions": repetitions,
    }
    return create_sweep(spec, user)


def finish(sweep: Sweep, t_ms: dict[tuple[str, str], float] = T_MS) -> None:
    """Mark every trial succeeded with the summaries a worker would report (± 1 ms per repetition)."""
    now = timezone.now()
    for t in sweep.trials.all():
        t.status = "succeeded"
        t.attempts = 1
        t.started_at, t.finished_at = now - timedelta(seconds=30), now
        t.save()
        proto, rate = t.params["protocol"], t.params["rate"]
        T = t_ms[(proto, rate)] + (t.repetition - 1)
        X = X_BYTES[proto] + 100 * t.repetition
        summary = {"T_ms": T, "bytes_down": X, "rate_bps": X * 8 / (T / 1e3), "link_tcp_down_bps": 0.95e6}
        SummaryValue.objects.bulk_create([SummaryValue(trial=t, name=k, value=v) for k, v in summary.items()])


def test_the_sweep_page_shows_each_applicable_finding_with_its_verdict_and_numbers(alice, client_for) -> None:
    sweep = rd_sweep(alice)
    finish(sweep)
    page = client_for(alice).get(f"/sweeps/{sweep.pk}/").content.decode()
    assert 'id="findings"' in page and "Thesis findings" in page
    assert 'data-finding="x2go_best_t_low_rate" data-verdict="holds"' in page
    assert 'data-finding="spice_best_t_high_rate" data-verdict="holds"' in page
    assert 'data-finding="x2go_smallest_x_and_rate" data-verdict="holds"' in page
    assert 'class="status verdict-holds"' in page
    assert "Fig. 4.6 (a)" in page and "X2Go is lower: X2Go 100 ms vs SPICE 500 ms at rate 1 Mbit/s" in page
    assert "<td>rate 1 Mbit/s</td><td>X2Go</td><td>T (ms)</td>" in page
    # A rate sweep feeds none of the delay and loss findings.
    assert "x2go_t_grows_most_with_delay" not in page and "best_t_by_loss" not in page


def test_the_sweep_page_shows_an_undecided_finding_before_there_are_repetitions(alice, client_for) -> None:
    sweep = rd_sweep(alice, repetitions=1)
    finish(sweep)
    page = client_for(alice).get(f"/sweeps/{sweep.pk}/").content.decode()
    assert 'data-finding="x2go_best_t_low_rate" data-verdict="inconclusive"' in page
    assert "n &lt; 2 for X2Go (n = 1)" in page


def test_a_sweep_of_another_job_type_shows_no_findings_section(alice, client_for, sweep_of) -> None:
    sweep = sweep_of({"rate": ["1mbit", "10mbit"], "protocol": ["x2go", "spice"]})
    page = client_for(alice).get(f"/sweeps/{sweep.pk}/").content.decode()
    assert sweep.job_type == "t_link"
    assert 'id="findings"' not in page and "Thesis findings" not in page


def test_the_findings_api_answers_with_verdicts_and_on_request_the_trials(alice, api_client_for) -> None:
    sweep = rd_sweep(alice)
    finish(sweep)
    api = api_client_for(alice)
    r = api.get(f"/api/sweeps/{sweep.pk}/findings/")
    assert r.status_code == 200, r.content
    body = r.json()
    assert (body["report"], body["job_type"], body["succeeded_trials"]) == ("ch4", "rd_qoe", 18)
    verdicts = {f["name"]: f["verdict"] for f in body["findings"]}
    assert verdicts["x2go_best_t_low_rate"] == "holds"
    assert verdicts["spice_best_t_high_rate"] == "holds"
    assert body["counts"]["holds"] == sum(v == "holds" for v in verdicts.values())
    low = next(f for f in body["findings"] if f["name"] == "x2go_best_t_low_rate")
    row = next(r for r in low["rows"] if r["condition"] == "rate 1 Mbit/s" and r["protocol"] == "X2Go")
    assert row["n"] == 3 and row["mean"] == pytest.approx(100.0)
    assert row["ci_low"] < 100.0 < row["ci_high"]
    assert low["figure"] == "Fig. 4.6 (a)" and low["reason"]
    assert "trials" not in body

    with_trials = api.get(f"/api/sweeps/{sweep.pk}/findings/?trials=1").json()
    assert len(with_trials["trials"]) == 18
    first = with_trials["trials"][0]
    assert first["params"]["rate"] in (1e6, 2e6, 100e6) and "T_ms" in first["summary"]


def test_the_findings_api_is_for_the_owner_and_says_when_a_job_type_has_no_findings(
    alice, bob, charlie, api_client_for, sweep_of
) -> None:
    sweep = rd_sweep(alice)
    assert api_client_for(bob).get(f"/api/sweeps/{sweep.pk}/findings/").status_code == 404
    assert api_client_for(charlie).get(f"/api/sweeps/{sweep.pk}/findings/").status_code == 403
    assert api_client_for(None).get(f"/api/sweeps/{sweep.pk}/findings/").status_code in (401, 403)
    other = sweep_of()
    body = api_client_for(alice).get(f"/api/sweeps/{other.pk}/findings/").json()
    assert (body["report"], body["findings"]) == (None, [])


def test_the_export_api_gives_the_owner_the_ended_trials_as_result_rows(
    alice, bob, charlie, api_client_for, django_assert_max_num_queries
) -> None:
    sweep = rd_sweep(alice, repetitions=2)
    finish(sweep)
    first = sweep.trials.order_by("index").first()
    first.provenance = {"host_cpu": {"model": "Xeon", "bogomips": "5199.99"}, "code_revision": "abc1234"}
    first.save()
    last = sweep.trials.order_by("index").last()
    sweep.trials.filter(pk=last.pk).update(status="running")
    api = api_client_for(alice)
    with django_assert_max_num_queries(12):  # a fixed number of queries, however many trials
        body = api.get(f"/api/sweeps/{sweep.pk}/export/").json()
    assert (body["finished"], body["open_trials"], len(body["rows"])) == (False, 1, sweep.trials.count() - 1)
    row = body["rows"][0]
    assert row["trial"] == first.pk and row["params"] == first.resolved and "T_ms" in row["summary"]
    assert row["host"]["cpu"] == "Xeon" and row["host"]["bogomips"] == "5199.99"
    assert row["provenance"]["code_revision"] == "abc1234" and "error" not in row
    assert api_client_for(bob).get(f"/api/sweeps/{sweep.pk}/export/").status_code == 404
    assert api_client_for(charlie).get(f"/api/sweeps/{sweep.pk}/export/").status_code == 403
