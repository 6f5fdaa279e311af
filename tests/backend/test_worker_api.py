"""The worker protocol of docs/architecture.md: heartbeat, claim, artifacts, finish."""

from __future__ import annotations

import hashlib
import pathlib
import threading

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import connection

from experiments.choices import TrialStatus
from experiments.models import Trial
from hosts.models import WorkerHost
from results.models import Artifact, Sample, SeriesPoint, SummaryValue

pytestmark = pytest.mark.django_db

RESULT = {
    "summary": {"tcp_down_bps": 9.4e6, "rtt_ms": 101.5},
    "samples": [
        {"kind": "update", "index": i, "values": {"T": 0.1 * i, "X": 1000 + i, "rate": 8e6}} for i in range(3)
    ],
    "series": [{"name": "goodput", "t": float(t), "value": 1e6 * t} for t in range(4)],
    "provenance": {"tools": {"iperf3": "3.12"}, "code_revision": "abc123"},
    "link": {"ok": True, "configured": {"rate_bps": 1e7}},
}


@pytest.fixture
def queued(sweep_of, make_host):
    """A sweep of two trials, the first queued for host h1 (and h2 exists too)."""
    h1 = make_host("h1", {"netem": True})
    h2 = make_host("h2", {"netem": True})
    trial = sweep_of().trials.order_by("index").first()
    trial.mark_queued(h1.host)
    return trial, h1, h2


def claim(lab, trial):
    return lab.client.post(f"/api/hosts/trials/{trial.pk}/claim/", {}, format="json")


def finish(lab, trial, **body):
    body.setdefault("status", "succeeded")
    return lab.client.post(f"/api/hosts/trials/{trial.pk}/finish/", body, format="json")


def test_heartbeat_stores_the_hosts_facts_and_names_its_queue(make_host):
    lab = make_host("lab-1", alive=False)
    resp = lab.heartbeat(
        capabilities={"netem": False, "userspace_link": True}, concurrency=3, kernel="6.1.0-27"
    )
    assert resp.status_code == 200 and resp.json() == {"name": "lab-1", "queue": "host.lab-1"}
    host = WorkerHost.objects.get(name="lab-1")
    assert host.is_alive() and host.kernel == "6.1.0-27" and host.concurrency == 3
    assert host.capability_set() == {"userspace_link"}


def test_heartbeat_refuses_another_hosts_name(make_host):
    lab = make_host("lab-1")
    make_host("lab-2")
    resp = lab.heartbeat(name="lab-2")
    assert resp.status_code == 403 and "lab-1" in resp.json()["detail"]


def test_heartbeat_names_the_bad_field(make_host):
    resp = make_host("lab-1").heartbeat(concurrency=0, capabilities={"netem": "maybe"})
    assert resp.status_code == 400
    fields = {e["field"] for e in resp.json()["errors"]}
    assert {"concurrency", "capabilities.netem"} <= fields


def test_worker_calls_need_a_valid_host_token(make_host, alice, api_client_for):
    from rest_framework.test import APIClient

    make_host("lab-1")
    bad = APIClient()
    bad.credentials(HTTP_AUTHORIZATION="Host not-a-token")
    assert bad.post("/api/hosts/heartbeat/", {}, format="json").status_code == 401
    # A researcher's token is not a host token.
    assert api_client_for(alice).post("/api/hosts/heartbeat/", {}, format="json").status_code == 401


def test_claim_starts_the_trial_and_answers_what_to_run(queued):
    trial, h1, _ = queued
    resp = claim(h1, trial)
    assert resp.status_code == 200, resp.content
    body = resp.json()
    assert body["id"] == trial.pk and body["job_type"] == "t_link" and body["attempt"] == 1
    assert body["params"] == trial.params and body["timeout_s"] == 120
    assert "prefix" not in body  # names on a lab host are the worker's business
    trial.refresh_from_db()
    assert trial.status == TrialStatus.RUNNING
    assert trial.provenance["host"]["name"] == "h1" and trial.provenance["backend_revision"]


def test_a_second_claim_of_the_same_trial_is_refused(queued):
    trial, h1, h2 = queued
    assert claim(h1, trial).status_code == 200
    again = claim(h1, trial)
    assert again.status_code == 409 and "running" in again.json()["detail"]
    assert claim(h2, trial).status_code == 409
    assert Trial.objects.get(pk=trial.pk).attempts == 1


def test_claiming_a_trial_queued_for_another_host_is_refused(queued):
    trial, _, h2 = queued
    assert claim(h2, trial).status_code == 409


def test_claiming_a_cancelled_trial_is_refused(queued):
    from experiments.services import cancel_sweep

    trial, h1, _ = queued
    cancel_sweep(trial.sweep)
    resp = claim(h1, trial)
    assert resp.status_code == 409 and "cancelled" in resp.json()["detail"]


def test_a_disabled_host_cannot_claim_but_may_finish_what_it_runs(sweep_of, make_host):
    lab = make_host("h1", {"netem": True})
    running, queued_trial = sweep_of().trials.order_by("index")
    running.mark_queued(lab.host)
    running.mark_running(lab.host)
    queued_trial.mark_queued(lab.host)
    WorkerHost.objects.filter(pk=lab.host.pk).update(enabled=False)
    resp = claim(lab, queued_trial)
    assert resp.status_code == 409 and "disabled" in resp.json()["detail"]
    queued_trial.refresh_from_db()
    assert queued_trial.status == TrialStatus.PENDING and queued_trial.host is None
    assert lab.heartbeat().status_code == 200
    assert finish(lab, running, result=RESULT).json()["status"] == "succeeded"


def test_claiming_an_unknown_trial_is_404(make_host):
    assert make_host("h1").client.post("/api/hosts/trials/999999/claim/").status_code == 404


@pytest.mark.django_db(transaction=True)
def test_two_concurrent_claims_one_wins(sweep_of, make_host):
    """Two workers' redelivered tasks claim at once on separate connections: exactly one wins."""
    lab = make_host("h1", {"netem": True})
    trial = sweep_of().trials.first()
    trial.mark_queued(lab.host)
    barrier = threading.Barrier(8)
    codes: list[int] = []

    def go() -> None:
        try:
            barrier.wait()
            codes.append(claim(lab, trial).status_code)
        finally:
            connection.close()

    threads = [threading.Thread(target=go) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(codes) == [200] + [409] * 7
    trial.refresh_from_db()
    assert trial.attempts == 1 and trial.status == TrialStatus.RUNNING


def test_finish_stores_summary_samples_series_provenance_and_link(queued):
    trial, h1, _ = queued
    claim(h1, trial)
    resp = finish(h1, trial, result=RESULT)
    assert resp.status_code == 200 and resp.json() == {"id": trial.pk, "status": "succeeded", "changed": True}
    trial.refresh_from_db()
    assert trial.status == TrialStatus.SUCCEEDED and trial.finished_at
    assert dict(SummaryValue.objects.filter(trial=trial).values_list("name", "value")) == RESULT["summary"]
    assert Sample.objects.filter(trial=trial).count() == 3
    assert Sample.objects.get(trial=trial, index=2).values == {"T": 0.2, "X": 1002, "rate": 8e6}
    assert list(SeriesPoint.objects.filter(trial=trial).values_list("value", flat=True)) == [0, 1e6, 2e6, 3e6]
    assert trial.provenance["tools"] == {"iperf3": "3.12"} and trial.provenance["host"]["name"] == "h1"
    assert trial.link == RESULT["link"]


def test_repeating_the_same_finish_is_a_no_op(queued):
    trial, h1, _ = queued
    claim(h1, trial)
    assert finish(h1, trial, result=RESULT).json()["changed"] is True
    again = finish(h1, trial, result=RESULT)
    assert again.status_code == 200 and again.json()["changed"] is False
    assert SummaryValue.objects.filter(trial=trial).count() == 2


def test_a_recorded_failure_is_not_overwritten_by_a_late_success(queued):
    trial, h1, _ = queued
    claim(h1, trial)
    assert finish(h1, trial, status="failed", error="tc: no such qdisc").status_code == 200
    late = finish(h1, trial, result=RESULT)
    assert late.status_code == 409
    trial.refresh_from_db()
    assert trial.status == TrialStatus.FAILED and trial.error == "tc: no such qdisc"
    assert not SummaryValue.objects.filter(trial=trial).exists()


def test_a_transient_failure_goes_back_to_pending_while_attempts_remain(queued):
    trial, h1, _ = queued
    claim(h1, trial)
    resp = finish(h1, trial, status="failed", error="upload timed out", retryable=True)
    assert resp.status_code == 200 and resp.json()["status"] == "pending"
    trial.refresh_from_db()
    assert trial.status == TrialStatus.PENDING and trial.host is None and trial.attempts == 1
    assert "upload timed out" in trial.attempt_log[-1]["reason"]
    # the same finish, repeated (the answer was lost): still a no-op
    assert finish(h1, trial, status="failed", error="upload timed out", retryable=True).status_code == 200
    # second and last attempt: a retryable failure now fails the trial for good
    trial.mark_queued(h1.host)
    claim(h1, trial)
    resp = finish(h1, trial, status="failed", error="upload timed out again", retryable=True)
    assert resp.json()["status"] == "failed"
    trial.refresh_from_db()
    assert trial.error == "upload timed out again" and trial.attempts == 2 and len(trial.attempt_log) == 2


def test_finish_of_a_trial_not_running_here_is_refused(queued):
    trial, h1, h2 = queued
    assert finish(h1, trial).status_code == 409  # queued, never claimed
    claim(h1, trial)
    assert finish(h2, trial).status_code == 409


def test_finish_rejects_a_malformed_result_naming_the_field(queued):
    trial, h1, _ = queued
    claim(h1, trial)
    bad = {**RESULT, "summary": {"tcp_down_bps": "fast"}}
    resp = finish(h1, trial, result=bad)
    assert resp.status_code == 400 and resp.json()["errors"][0]["field"] == "result.summary.tcp_down_bps"
    dup = {**RESULT, "samples": [RESULT["samples"][0], RESULT["samples"][0]]}
    assert "duplicate" in finish(h1, trial, result=dup).json()["detail"]
    assert finish(h1, trial, status="done").json()["errors"][0]["field"] == "status"
    # The worker will not send its result again: the first bad finish failed the trial, naming why
    # (issue 14; it stayed running with its result lost). Later bad finishes change nothing.
    trial.refresh_from_db()
    assert trial.status == TrialStatus.FAILED and "result.summary.tcp_down_bps" in trial.error


def upload(lab, trial, data: bytes, sha: str | None = None, kind: str = "pcap"):
    f = SimpleUploadedFile("capture.pcap", data, content_type="application/octet-stream")
    body = {"file": f, "kind": kind, "sha256": sha or hashlib.sha256(data).hexdigest()}
    return lab.client.post(f"/api/hosts/trials/{trial.pk}/artifacts/", body, format="multipart")


def test_an_artifact_upload_is_stored_with_size_and_sha256(queued, media_root):
    trial, h1, _ = queued
    claim(h1, trial)
    data = b"\xd4\xc3\xb2\xa1" + b"x" * 5000
    resp = upload(h1, trial, data)
    assert resp.status_code == 201, resp.content
    art = Artifact.objects.get(pk=resp.json()["id"])
    assert (art.size, art.sha256, art.kind, art.attempt) == (
        len(data),
        hashlib.sha256(data).hexdigest(),
        "pcap",
        1,
    )
    assert art.file.path.startswith(str(media_root)) and pathlib.Path(art.file.path).read_bytes() == data


def test_an_artifact_with_a_wrong_sha256_is_rejected_and_not_kept(queued, media_root):
    trial, h1, _ = queued
    claim(h1, trial)
    resp = upload(h1, trial, b"hello", sha="0" * 64)
    assert resp.status_code == 400 and resp.json()["errors"][0]["field"] == "sha256"
    assert not Artifact.objects.exists()
    assert not any(p.is_file() for p in media_root.rglob("*")) if media_root.exists() else True


def test_an_artifact_over_the_size_limit_is_rejected(queued, settings):
    trial, h1, _ = queued
    claim(h1, trial)
    settings.QOELAB_MAX_ARTIFACT_BYTES = 100
    resp = upload(h1, trial, b"y" * 101)
    assert resp.status_code == 413 and "100 bytes" in resp.json()["errors"][0]["message"]


def test_artifacts_are_accepted_only_for_running_trials_of_this_host(queued):
    trial, h1, h2 = queued
    assert upload(h1, trial, b"a").status_code == 409
    claim(h1, trial)
    assert upload(h2, trial, b"a").status_code == 409
    assert upload(h1, trial, b"a", kind="Bad Kind").status_code == 400


def test_heartbeat_requeues_a_running_trial_the_worker_no_longer_reports(queued, settings):
    from datetime import timedelta

    trial, h1, _ = queued
    claim(h1, trial)
    trial.refresh_from_db()
    Trial.objects.filter(pk=trial.pk).update(started_at=trial.started_at - timedelta(seconds=120))
    assert h1.heartbeat(running=[trial.pk]).status_code == 200
    assert Trial.objects.get(pk=trial.pk).status == TrialStatus.RUNNING
    h1.heartbeat(running=[])
    trial.refresh_from_db()
    assert trial.status == TrialStatus.PENDING and "no longer reports" in trial.attempt_log[-1]["reason"]
