"""thinclient_tcp on the backend: bad parameters are a 400 naming the field, and the per-trial
curves (Fig. 6's CCDF, Fig. 4's gap histogram) are averaged point by point over repetitions."""

from __future__ import annotations

import pytest

from experiments.models import Sweep, Trial
from results.services import ingest_result

pytestmark = pytest.mark.django_db


def spec(**over):
    body = {
        "experiment": {"name": "paper 002"},
        "job_type": "thinclient_tcp",
        "name": "E2 small",
        "grid": {"limit": ["25000b"]},
        "fixed": {"queue": "prio", "tcp_sack": True, "pairs": 20, "duration": "30s"},
        "repetitions": 2,
    }
    body.update(over)
    return body


@pytest.mark.parametrize(
    ("fixed", "field", "words"),
    [
        ({"pairs": 0}, "fixed.pairs", ("1",)),
        ({"queue": "red"}, "fixed.queue", ("fifo", "prio")),
        ({"tcp_recovery": 8}, "fixed.tcp_recovery", ("7",)),
        ({"duration": "1200s"}, "fixed.duration", ("900s",)),
    ],
)
def test_a_bad_parameter_is_a_400_naming_it(alice, api_client_for, fixed, field, words) -> None:
    resp = api_client_for(alice).post("/api/sweeps/", spec(fixed=fixed), format="json")
    assert resp.status_code == 400, resp.content
    errors = {e["field"]: e["message"] for e in resp.json()["errors"]}
    assert field in errors, errors
    for w in words:
        assert w in errors[field], (errors[field], w)
    assert not Sweep.objects.exists() and not Trial.objects.exists()


def test_curves_average_point_by_point_with_the_series_from_the_samples(alice, api_client_for, client_for):
    resp = api_client_for(alice).post("/api/sweeps/", spec(), format="json")
    assert resp.status_code == 201, resp.content
    sweep = Sweep.objects.get(pk=resp.json()["id"])
    for t in sweep.trials.all():
        r = t.repetition  # repetition 0: shares 0.5 and 0.1; repetition 1: 0.3 and 0.0
        points = [("interactive total", 100.0, 0.5 - 0.2 * r), ("interactive total", 1000.0, 0.1 - 0.1 * r),
                  ("bulk router", 100.0, 0.25)]  # fmt: skip
        samples = [
            {"kind": "ccdf", "index": i, "values": {"curve": curve, "x_ms": x, "ccdf": share}}
            for i, (curve, x, share) in enumerate(points)
        ]
        ingest_result(t, {"summary": {"r_I150": 0.01}, "samples": samples})
        Trial.objects.filter(pk=t.pk).update(status="succeeded")
    data = client_for(alice).get(f"/sweeps/{sweep.pk}/chart.json?preset=fig6").json()
    series = {s["label"]: s["points"] for s in data["series"]}
    assert set(series) == {"curve = interactive total", "curve = bulk router"}
    total = {p["x"]: (p["mean"], p["n"]) for p in series["curve = interactive total"]}
    assert total[100.0] == (pytest.approx(0.4), 2)
    assert total[1000.0] == (pytest.approx(0.05), 2)
    assert [(p["x"], p["mean"]) for p in series["curve = bulk router"]] == [(100.0, 0.25)]
