"""vose on the backend: bad parameters are a 400 naming the field and the bound, speedup applies to
vose points only, and Fig. 3.11's chart carries software and hardware as series without x (the
page draws them as reference lines). Summaries are stored as the worker stores them."""

from __future__ import annotations

import pytest

from experiments.models import Sweep, Trial
from results.services import ingest_result

pytestmark = pytest.mark.django_db


def spec(**over):
    body = {
        "experiment": {"name": "vose"},
        "job_type": "vose",
        "name": "checksum speedup",
        "grid": {"mode": ["software", "hardware", "vose"], "speedup": [2, "inf"]},
        "fixed": {"path": "kernel_csum", "duration": "2s"},
        "repetitions": 2,
    }
    body.update(over)
    return body


@pytest.mark.parametrize(
    ("over", "field", "words"),
    [
        ({"grid": {"speedup": [2, 0.5]}, "fixed": {"mode": "vose"}}, "grid.speedup[1]", ("1 to 1000", "0.5")),
        ({"fixed": {"cpu_quota": 1.5}, "grid": {"mode": ["software"]}}, "fixed.cpu_quota", ("1",)),
        ({"fixed": {"record": 100}, "grid": {"mode": ["software"]}}, "fixed.record", ("256",)),
        ({"fixed": {"mode": "hardware", "device": "checksum"}, "grid": {"path": ["app"]}}, "fixed.device",
         ("kernel_csum",)),
    ],
)  # fmt: skip
def test_a_bad_vose_parameter_is_a_400_naming_it_and_nothing_is_created(
    alice, api_client_for, over, field, words
):
    resp = api_client_for(alice).post("/api/sweeps/", spec(**over), format="json")
    assert resp.status_code == 400, resp.content
    body = resp.json()
    errors = {e["field"]: e["message"] for e in body["errors"]}
    assert field in errors, body
    for w in words:
        assert w in errors[field], (errors[field], w)
    assert not Sweep.objects.exists() and not Trial.objects.exists()


def test_software_and_hardware_run_once_and_fig_311_draws_them_without_x(alice, api_client_for, client_for):
    resp = api_client_for(alice).post("/api/sweeps/", spec(), format="json")
    assert resp.status_code == 201, resp.content
    sweep = Sweep.objects.get(pk=resp.json()["id"])
    assert sweep.trial_count == 8  # (software, hardware, vose at 2 and inf) x 2 runs
    assert {"speedup" in t.resolved for t in sweep.trials.filter(resolved__mode="software")} == {False}
    throughput = {"software": 5e9, "hardware": 6e9, 2: 5.5e9, "inf": 6e9}
    for t in sweep.trials.all():
        key = t.resolved.get("speedup", t.resolved["mode"])
        value = throughput[key] + 1e8 * t.repetition
        ingest_result(t, {"summary": {"throughput_bps": value, "cpu_sender": 0.5, "cpu_receiver": 0.9}})
        Trial.objects.filter(pk=t.pk).update(status="succeeded")
    data = client_for(alice).get(f"/sweeps/{sweep.pk}/chart.json?preset=fig311").json()
    series = {s["label"]: s["points"] for s in data["series"]}
    assert set(series) == {"mode = software", "mode = hardware", "mode = vose"}
    assert [p["x"] for p in series["mode = vose"]] == [2.0, "inf"]
    for ref in ("mode = software", "mode = hardware"):
        (point,) = series[ref]
        assert point["x"] is None and point["n"] == 2  # no speedup: a reference line on the page
    # Fig. 3.12's series is the device, which the kernel path does not have: it says so.
    fig312 = client_for(alice).get(f"/sweeps/{sweep.pk}/chart.json?preset=fig312").json()
    assert all(s["label"].startswith("no device") for s in fig312["series"]), fig312["series"]
