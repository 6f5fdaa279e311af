"""The researcher API: who sees what, experiments, sweeps, trials, results, job types, hosts."""

from __future__ import annotations

import hashlib

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from experiments.choices import TrialStatus
from experiments.models import Experiment
from results.services import ingest_result, store_artifact

pytestmark = pytest.mark.django_db


def finished(trial, host, summary, status="succeeded"):
    trial.mark_queued(host)
    trial.mark_running(host)
    ingest_result(trial, {"summary": summary, "samples": [], "series": []})
    if status == "succeeded":
        trial.mark_succeeded(host_id=host.pk)
    else:
        trial.mark_failed("boom", host_id=host.pk)
    return trial


def test_anonymous_callers_get_nothing(api_client_for, sweep_of):
    sweep = sweep_of()
    c = api_client_for(None)
    for url in (
        "/api/experiments/",
        "/api/sweeps/",
        f"/api/sweeps/{sweep.pk}/",
        "/api/trials/",
        "/api/job-types/",
    ):
        assert c.get(url).status_code in (401, 403), url


def test_an_outsider_without_researcher_permission_gets_403_everywhere(charlie, api_client_for, sweep_of):
    sweep = sweep_of()
    c = api_client_for(charlie)
    for url in (
        "/api/experiments/",
        "/api/sweeps/",
        f"/api/sweeps/{sweep.pk}/",
        "/api/trials/",
        "/api/hosts/",
    ):
        resp = c.get(url)
        assert resp.status_code == 403 and "researcher" in resp.json()["detail"], url
    body = {"experiment": {"name": "x"}, "job_type": "t_link", "grid": {"rate": [1e6]}}
    resp = c.post("/api/sweeps/", body, format="json")
    assert resp.status_code == 403


def test_a_researcher_sees_only_their_own_experiments_sweeps_and_trials(alice, bob, api_client_for, sweep_of):
    sweep = sweep_of()
    trial = sweep.trials.first()
    c = api_client_for(bob)
    assert c.get("/api/experiments/").json()["results"] == []
    assert c.get("/api/sweeps/").json()["results"] == []
    assert c.get("/api/trials/").json()["results"] == []
    for url in (
        f"/api/experiments/{sweep.experiment_id}/",
        f"/api/sweeps/{sweep.pk}/",
        f"/api/trials/{trial.pk}/",
        f"/api/sweeps/{sweep.pk}/aggregate/?metric=m&x=rate",
    ):
        assert c.get(url).status_code == 404, url
    assert c.post(f"/api/sweeps/{sweep.pk}/cancel/").status_code == 404
    assert c.delete(f"/api/experiments/{sweep.experiment_id}/").status_code == 404
    assert c.patch(f"/api/experiments/{sweep.experiment_id}/", {"name": "mine"}).status_code == 404
    assert api_client_for(alice).get("/api/sweeps/").json()["count"] == 1


def test_staff_see_every_experiment(alice, bob, api_client_for, sweep_of):
    sweep_of()
    bob.is_staff = True
    bob.save()
    assert api_client_for(bob).get("/api/sweeps/").json()["count"] == 1


def test_experiments_crud(alice, api_client_for):
    c = api_client_for(alice)
    resp = c.post(
        "/api/experiments/", {"name": "links", "description": "d", "job_type": "t_link"}, format="json"
    )
    assert resp.status_code == 201 and resp.json()["owner"] == "alice"
    exp_id = resp.json()["id"]
    dup = c.post("/api/experiments/", {"name": "links", "job_type": "t_link"}, format="json")
    assert dup.status_code == 400 and dup.json()["errors"][0]["field"] == "name"
    bad = c.post("/api/experiments/", {"name": "x", "job_type": "warp"}, format="json")
    assert bad.status_code == 400 and bad.json()["errors"] == [
        {"field": "job_type", "message": bad.json()["errors"][0]["message"]}
    ]
    assert "unknown job type 'warp'" in bad.json()["detail"]
    assert (
        c.patch(f"/api/experiments/{exp_id}/", {"description": "new"}, format="json").json()["description"]
        == "new"
    )
    assert c.delete(f"/api/experiments/{exp_id}/").status_code == 204
    assert not Experiment.objects.exists()


def test_an_experiment_with_running_trials_cannot_be_deleted(alice, api_client_for, sweep_of, make_host):
    sweep = sweep_of()
    lab = make_host("h1", {"netem": True})
    t = sweep.trials.first()
    t.mark_queued(lab.host)
    resp = api_client_for(alice).delete(f"/api/experiments/{sweep.experiment_id}/")
    assert resp.status_code == 409 and "cancel" in resp.json()["detail"]


def test_sweep_detail_carries_progress_and_cancel_stops_it(alice, api_client_for, sweep_of):
    sweep = sweep_of()
    c = api_client_for(alice)
    body = c.get(f"/api/sweeps/{sweep.pk}/").json()
    assert body["progress"]["total"] == 2 and body["progress"]["counts"]["pending"] == 2
    assert "no live worker" in body["progress"]["blocked"]
    resp = c.post(f"/api/sweeps/{sweep.pk}/cancel/")
    assert resp.status_code == 200 and resp.json()["cancelled_trials"] == 2
    assert resp.json()["sweep"]["progress"]["counts"]["cancelled"] == 2
    assert resp.json()["sweep"]["cancelled_at"]


def test_trials_filter_by_sweep_and_status(alice, api_client_for, sweep_of, make_host):
    s1 = sweep_of({"rate": ["1mbit", "2mbit", "3mbit"]})
    s2 = sweep_of({"rate": ["1mbit"]}, experiment_name="other")
    lab = make_host("h1", {"netem": True})
    finished(s1.trials.get(index=0), lab.host, {"x": 1})
    c = api_client_for(alice)
    assert c.get("/api/trials/").json()["count"] == 4
    assert c.get(f"/api/trials/?sweep={s2.pk}").json()["count"] == 1
    rows = c.get(f"/api/trials/?sweep={s1.pk}&status=succeeded").json()["results"]
    assert [r["index"] for r in rows] == [0] and rows[0]["host_name"] == "h1"
    bad = c.get("/api/trials/?status=done")
    assert bad.status_code == 400 and bad.json()["errors"][0]["field"] == "status"
    assert c.get("/api/trials/?sweep=abc").json()["errors"][0]["field"] == "sweep"


def test_trial_detail_has_summary_samples_series_and_downloadable_artifacts(
    alice, bob, api_client_for, sweep_of, make_host
):
    lab = make_host("h1", {"netem": True})
    trial = sweep_of().trials.first()
    trial.mark_queued(lab.host)
    trial.mark_running(lab.host)
    ingest_result(
        trial,
        {
            "summary": {"tcp_down_bps": 9e6},
            "samples": [{"kind": "update", "index": 0, "values": {"T": 0.5}}],
            "series": [{"name": "cpu", "t": 0.0, "value": 12.0}, {"name": "cpu", "t": 1.0, "value": 14.0}],
        },
    )
    data = b"\xd4\xc3\xb2\xa1" + b"pcap bytes " * 100
    art = store_artifact(trial, SimpleUploadedFile("c.pcap", data), "pcap", hashlib.sha256(data).hexdigest())
    trial.mark_succeeded(host_id=lab.host.pk)
    c = api_client_for(alice)
    body = c.get(f"/api/trials/{trial.pk}/").json()
    assert body["summary"] == {"tcp_down_bps": 9e6}
    assert body["samples"] == [{"kind": "update", "index": 0, "values": {"T": 0.5}}]
    assert body["series"] == [{"name": "cpu", "t": [0.0, 1.0], "value": [12.0, 14.0]}]
    assert body["artifacts"][0]["sha256"] == hashlib.sha256(data).hexdigest()
    url = body["artifacts"][0]["download_url"]
    assert url == f"/api/artifacts/{art.pk}/download/"
    resp = c.get(url)
    assert resp.status_code == 200 and b"".join(resp.streaming_content) == data
    assert 'filename="c.pcap"' in resp["Content-Disposition"]
    assert api_client_for(bob).get(url).status_code == 404


def test_aggregate_gives_mean_and_student_t_interval_per_x_and_series(
    alice, api_client_for, sweep_of, make_host
):
    lab = make_host("h1", {"netem": True})
    sweep = sweep_of({"rate": ["1mbit", "2mbit"], "delay": ["0ms", "50ms"]}, repetitions=3)
    values = {  # (rate, delay) -> per-repetition metric values
        (1e6, 0.0): [1.0, 2.0, 3.0],
        (1e6, 0.05): [10.0, 10.0, 10.0],
        (2e6, 0.0): [4.0, 6.0, 8.0],
        (2e6, 0.05): [5.0],
    }
    used: dict = {}
    for t in sweep.trials.order_by("index"):
        key = (t.resolved["rate"], t.resolved["delay"])
        i = used.get(key, 0)
        used[key] = i + 1
        if i < len(values[key]):
            finished(t, lab.host, {"tcp_down_bps": values[key][i]})
        else:
            finished(t, lab.host, {"tcp_down_bps": 1e9}, status="failed")  # failed trials are left out
    resp = api_client_for(alice).get(
        f"/api/sweeps/{sweep.pk}/aggregate/?metric=tcp_down_bps&x=rate&series=delay"
    )
    assert resp.status_code == 200, resp.content
    body = resp.json()
    assert [s["value"] for s in body["series"]] == [0.0, 0.05]
    p00, p10 = body["series"][0]["points"]
    assert (p00["x"], p00["mean"], p00["n"]) == (1e6, 2.0, 3)
    # t(0.975, 2) = 4.302653; sd = 1; half width = 4.302653 / sqrt(3)
    assert p00["ci_low"] == pytest.approx(2 - 2.4841377, abs=1e-6)
    assert p00["ci_high"] == pytest.approx(2 + 2.4841377, abs=1e-6)
    assert (p10["x"], p10["mean"]) == (2e6, 6.0)
    p01, p11 = body["series"][1]["points"]
    assert p01["ci_low"] == p01["ci_high"] == 10.0
    assert (p11["n"], p11["ci_low"]) == (1, None)


def test_aggregate_names_a_bad_query_field(alice, api_client_for, sweep_of):
    sweep = sweep_of()
    c = api_client_for(alice)
    resp = c.get(f"/api/sweeps/{sweep.pk}/aggregate/?metric=tcp_down_bps&x=speed")
    assert resp.status_code == 400 and resp.json()["errors"][0]["field"] == "x"
    resp = c.get(f"/api/sweeps/{sweep.pk}/aggregate/?x=rate")
    assert resp.status_code == 400 and resp.json()["errors"][0]["field"] == "metric"


def test_job_types_list_parameter_schemas_with_units_metrics_and_charts(alice, api_client_for):
    c = api_client_for(alice)
    jobs = {j["name"]: j for j in c.get("/api/job-types/").json()}
    link = jobs["t_link"]
    assert link["requires"] == ["netem"]
    assert link["params_schema"]["properties"]["rate"]["x-unit"] == "bit/s"
    assert link["metrics"][0]["name"] == "tcp_down_bps" and link["charts"][0]["x"] == "rate"
    assert "link_check" in jobs  # the real registry is there too
    assert c.get("/api/job-types/t_vm/").json()["requires"] == ["kvm"]
    assert c.get("/api/job-types/nope/").status_code == 404


def test_hosts_are_listed_for_researchers_and_only_staff_may_disable_one(alice, api_client_for, make_host):
    make_host("lab-1", {"netem": True, "kvm": False})
    c = api_client_for(alice)
    rows = c.get("/api/hosts/").json()
    assert rows[0]["name"] == "lab-1" and rows[0]["alive"] is True and rows[0]["queue"] == "host.lab-1"
    assert c.patch("/api/hosts/lab-1/", {"enabled": False}, format="json").status_code == 403
    alice.is_staff = True
    alice.save()
    assert c.patch("/api/hosts/lab-1/", {"enabled": False}, format="json").json()["enabled"] is False


def test_a_token_is_issued_for_a_username_and_password(alice, api_client_for):
    c = api_client_for(None)
    resp = c.post("/api/auth/token/", {"username": "alice", "password": "alice-password-1"}, format="json")
    assert resp.status_code == 200
    c.credentials(HTTP_AUTHORIZATION=f"Token {resp.json()['token']}")
    assert c.get("/api/experiments/").status_code == 200
    bad = api_client_for(None).post("/api/auth/token/", {"username": "alice", "password": "x"}, format="json")
    assert bad.status_code == 400 and bad.json()["errors"]


def test_session_login_works_for_the_browser(alice, client):
    assert client.login(username="alice", password="alice-password-1")
    assert client.get("/api/sweeps/").status_code == 200


def test_trial_status_values_are_the_documented_set():
    assert TrialStatus.values == ["pending", "queued", "running", "succeeded", "failed", "cancelled"]
