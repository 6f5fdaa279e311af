"""A real worker runs a small Fig. 14 sweep of thinclient_tcp; the dashboard draws Figs. 6, 14 and 8.

Two WAN delays, three pairs for three seconds each: the path from the API through Celery, the
namespaces and the userspace router to the charts, not the paper's numbers (benchmarks/thinclient/).
"""

from __future__ import annotations

from typing import Any

import pytest

pytestmark = [pytest.mark.celery, pytest.mark.netns, pytest.mark.slow]


def _done(stack: Any, sweep_id: int) -> dict[str, Any] | None:
    sweep = stack.api().get(f"/api/sweeps/{sweep_id}/")
    prog = sweep["progress"]
    return sweep if prog["total"] and prog["done"] == prog["total"] else None


def test_an_e8_sweep_runs_and_its_charts_have_points(lab_stack: Any, alice: Any) -> None:
    from django.test import Client

    api = lab_stack.api()
    sweep = api.post(
        "/api/sweeps/",
        {
            "experiment": {"name": "paper 002 fig 14"},
            "job_type": "thinclient_tcp",
            "name": "E8 small",
            "grid": {"delay": ["7ms", "50ms"]},
            "fixed": {
                "pairs": 3,
                "duration": "3s",
                "limit": "25000b",
                "queue": "prio",
                "tcp_sack": True,
                "experiment": "e8",
            },
            "repetitions": 1,
        },  # fmt: skip
        "creating the sweep",
    )
    done = lab_stack.wait_for("the sweep to finish", lambda: _done(lab_stack, sweep["id"]), timeout=240)
    assert done["progress"]["counts"]["succeeded"] == 2, done["progress"]
    trials = api.get_all("/api/trials/", sweep=sweep["id"])
    with_interval = set()  # T_I150 exists only where some interactive write passed 130 ms
    for t in trials:
        detail = api.get(f"/api/trials/{t['id']}/")
        assert detail["summary"]["writes_I"] > 0
        assert detail["link"]["tcp"]["server"]["cc"] == "reno"
        if "T_I150_s" in detail["summary"]:
            with_interval.add(t["resolved"]["delay"])
    web = Client()
    web.force_login(alice)
    fig6 = web.get(f"/sweeps/{sweep['id']}/chart.json?preset=fig6").json()
    labels = {s["label"] for s in fig6["series"]}
    assert any("interactive total" in label for label in labels), labels
    points = [p for s in fig6["series"] for p in s["points"]]
    assert points and all(0 <= p["mean"] <= 1 for p in points)
    fig14 = web.get(f"/sweeps/{sweep['id']}/chart.json?preset=fig14_150").json()
    panels = fig14.get("panels", [fig14])
    xs = {p["x"] for panel in panels for s in panel["series"] for p in s["points"]}
    assert xs == with_interval, fig14
    fig8 = web.get(f"/sweeps/{sweep['id']}/chart.json?preset=fig8").json()
    assert [p for s in fig8["series"] for p in s["points"]]


def test_a_trial_replays_another_trials_capture_fetched_by_the_worker(lab_stack: Any, alice: Any,
                                                                      tmp_path: Any) -> None:  # fmt: skip
    """``trace: trial:N``: the worker fetches N's capture from the backend and replays its timeline."""
    import hashlib

    from django.core.files.uploadedfile import SimpleUploadedFile

    from experiments.models import Trial
    from qoelab.thinclient import trace
    from qoelab.thinclient.model import TwoStateModel, generate
    from results.services import store_artifact

    api = lab_stack.api()
    body = {"experiment": {"name": "replay a session"}, "job_type": "thinclient_tcp",
            "grid": {"limit": ["25000b"]}, "fixed": {"pairs": 2, "duration": "2s"}}  # fmt: skip
    first = api.post("/api/sweeps/", body, "the sweep whose trial gets a capture")
    lab_stack.wait_for("the first sweep", lambda: _done(lab_stack, first["id"]), timeout=120)
    source = Trial.objects.get(sweep_id=first["id"])
    pcap = trace.write_pcap(tmp_path / "session.pcap", generate(TwoStateModel(), 20, seed=5)).read_bytes()
    store_artifact(source, SimpleUploadedFile("capture.pcap", pcap), "pcap", hashlib.sha256(pcap).hexdigest())

    body["fixed"] = {**body["fixed"], "trace": f"trial:{source.pk}"}
    second = api.post("/api/sweeps/", body, "the replaying sweep")
    done = lab_stack.wait_for("the replay", lambda: _done(lab_stack, second["id"]), timeout=120)
    assert done["progress"]["counts"]["succeeded"] == 1, done["progress"]
    (replay,) = api.get_all("/api/trials/", sweep=second["id"])
    detail = api.get(f"/api/trials/{replay['id']}/")
    assert detail["provenance"]["source"] == "trace"
    assert detail["provenance"]["trace"] == {"ref": f"trial:{source.pk}", "bytes": len(pcap)}
    assert detail["summary"]["writes_I"] > 0
