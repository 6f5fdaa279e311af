"""storage_apt on the dashboard: real synthetic trials, stored as the worker would, drawn as the
paper's Figs. 2.8/2.9 (time series, mean over repetitions per second) and Fig. 2.11 (per trial)."""

from __future__ import annotations

import pytest
from django.utils import timezone

from experiments.services import create_sweep
from qoelab import jobs
from qoelab.jobtype import TrialContext
from qoelab.params import validate_params
from results.services import ingest_result

pytestmark = pytest.mark.django_db


def _run_sweep(user, tmp_path):
    spec = {
        "experiment": {"name": "APT beside fixed N"},
        "job_type": "storage_apt",
        # sessions applies to fixed mode only: APT runs once per delay, not once per sessions value.
        "grid": {"mode": ["apt", "fixed"], "sessions": [8, 16], "delay": ["20ms", "60ms"]},
        "fixed": {"transport": "synthetic", "delta": "2s", "steady": "6s", "noise": "0%"},
        "repetitions": 2,
    }
    sweep = create_sweep(spec, user)
    job = jobs.get("storage_apt")
    now = timezone.now()
    for t in sweep.trials.all():
        params = validate_params(job.params, t.params)
        result = job.run(params, TrialContext(str(t.pk), tmp_path, "qltest0002"))
        ingest_result(t, result.to_json())
        sweep.trials.filter(pk=t.pk).update(status="succeeded", started_at=now, finished_at=now)
    return sweep


def test_fig_2_9_shows_apt_searching_and_fixed_n_flat(client_for, alice, tmp_path) -> None:
    sweep = _run_sweep(alice, tmp_path)
    assert sweep.trials.count() == (2 + 2 * 2) * 2  # (apt per delay + fixed per sessions, delay) x reps
    apt_trial = sweep.trials.filter(resolved__mode="apt").first()
    assert "sessions" not in apt_trial.params and "sessions" not in apt_trial.resolved
    c = client_for(alice)
    data = c.get(f"/sweeps/{sweep.pk}/chart.json?preset=fig29").json()
    assert data["x_label"] == "time (s)"
    # sessions and delay are swept but not drawn: their values split the series, never pooled; the
    # APT series has no sessions value to name.
    labels = [s["label"] for s in data["series"]]
    assert "mode = apt, delay = 20ms" in labels and "mode = fixed, sessions = 16, delay = 60ms" in labels
    assert len(labels) == 6, labels
    by_label = {s["label"]: s["points"] for s in data["series"]}
    fixed = by_label["mode = fixed, sessions = 16, delay = 20ms"]
    assert {p["mean"] for p in fixed} == {16.0} and all(p["n"] == 2 for p in fixed)
    apt = by_label["mode = apt, delay = 60ms"]
    assert apt[0]["x"] == 1 and apt[0]["mean"] == 4.0  # N starts at n0 = 4 in the first second
    assert len({p["mean"] for p in apt}) > 2  # and moves while APT searches
    goodput = c.get(f"/sweeps/{sweep.pk}/chart.json?preset=fig28").json()
    assert all(p["mean"] > 0 for s in goodput["series"] for p in s["points"])


def test_the_api_aggregates_a_series_over_time_and_fig_2_11_per_trial(alice, api_client_for, tmp_path):
    sweep = _run_sweep(alice, tmp_path)
    c = api_client_for(alice)
    url = f"/api/sweeps/{sweep.pk}/aggregate/"
    body = c.get(url + "?metric=active_n&x=t&series=mode&source=series").json()
    assert [s["value"] for s in body["series"]] == ["apt", "fixed"]
    assert c.get(url + "?metric=active_n&x=t").status_code == 400  # x = t only with source=series
    per_trial = c.get(url + "?metric=goodput_steady_bps&x=delay&series=mode").json()
    apt = next(s for s in per_trial["series"] if s["value"] == "apt")
    assert [p["x"] for p in apt["points"]] == [0.02, 0.06] and all(p["n"] == 2 for p in apt["points"])


def test_the_sweep_page_judges_the_chapter_2_findings_per_delay(client_for, alice, tmp_path) -> None:
    sweep = _run_sweep(alice, tmp_path)
    page = client_for(alice).get(f"/sweeps/{sweep.pk}/").content.decode()
    assert 'id="findings"' in page and "BDL-APT" in page
    # The synthetic model with 2 repetitions: every check has numbers, one verdict per delay.
    for name in ("apt_converges", "apt_near_best_fixed", "apt_fills_link"):
        assert page.count(f'data-finding="{name}"') == 2, name
    assert "delay = 20 ms" in page and "delay = 60 ms" in page
    # Figs. 2.8/2.9 are time series: shown although no sweep swaps "t".
    for key in ("fig28", "fig29", "fig211", "fig212", "fig214"):
        assert f'data-chart-key="{key}"' in page, key
    assert 'data-chart-key="fig210"' not in page  # one rate: goodput vs bandwidth would be one point
    body = client_for(alice).get(f"/api/sweeps/{sweep.pk}/findings/").json()
    assert body["report"] == "ch2" and body["succeeded_trials"] == sweep.trials.count()


def test_the_new_sweep_form_creates_apt_beside_fixed_n_running_apt_once_per_delay(client_for, alice) -> None:
    from experiments.models import Sweep

    form = {
        "job_type": "storage_apt", "experiment": "", "new_experiment": "S1", "name": "", "repetitions": "2",
        "order": "grid", "seed": "", "grid_mode": "apt, vanilla, fixed", "grid_sessions": "4, 16, 64",
        "grid_delay": "10ms, 20ms, 40ms", "fixed_transport": "nbd", "fixed_steady": "20s",
    }  # fmt: skip
    r = client_for(alice).post("/sweeps/new/", form)
    sweep = Sweep.objects.get(experiment__owner=alice)
    assert r.status_code == 302 and r["Location"] == f"/sweeps/{sweep.pk}/"
    assert sweep.trials.count() == 3 * (1 + 1 + 3) * 2  # delays x (APT, vanilla, N = 4/16/64) x runs
    assert {t.resolved["steady"] for t in sweep.trials.all()} == {20.0}
