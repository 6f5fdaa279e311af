"""qoelab.client.BackendClient against the real backend (live_server): the worker protocol calls."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import pytest

from qoelab import capabilities
from qoelab.client import BackendClient, BackendError

SPEC = {
    "experiment": {"name": "protocol"},
    "job_type": "link_check",
    "grid": {"rate": ["10mbit"]},
    "fixed": {"duration": "1s"},
}


@pytest.fixture
def host(make_host: Any) -> Any:
    return make_host("proto1", {"netns": True, "link": True, "iperf3": True, "tcp_cc.cubic": True})


@pytest.fixture
def worker(live_server: Any, host: Any) -> BackendClient:
    return BackendClient(live_server.url, host.token, retries=1)


@pytest.fixture
def queued_trial(alice: Any, host: Any) -> Any:
    from experiments import services

    sweep = services.create_sweep(SPEC, alice)
    trial = sweep.trials.get()
    trial.mark_queued(host.host)
    return trial


def test_a_heartbeat_stores_what_detect_found(worker: BackendClient, host: Any) -> None:
    facts = capabilities.detect(probe_kvm=False)
    answer = worker.heartbeat(
        {
            "name": "proto1",
            "kernel": facts["kernel"],
            "capabilities": facts["capabilities"],
            "queues": ["host.proto1"],
            "concurrency": 2,
            "versions": facts["versions"],
            "running": [],
        }
    )
    assert answer == {"name": "proto1", "queue": "host.proto1"}
    host.host.refresh_from_db()
    assert host.host.capabilities == facts["capabilities"]
    assert host.host.versions["code_revision"] == facts["code_revision"]
    assert host.host.concurrency == 2


def test_a_wrong_host_token_is_refused_in_one_sentence(live_server: Any, host: Any) -> None:
    client = BackendClient(live_server.url, "not-the-token", retries=0)
    with pytest.raises(BackendError) as exc:
        client.heartbeat({"name": "proto1"})
    assert exc.value.status in (401, 403)
    assert str(exc.value).startswith("the backend refused the credentials for the heartbeat")
    assert "manage.py add_host" in str(exc.value)


def test_claim_is_none_when_the_trial_is_not_queued_for_this_host(worker: BackendClient, alice: Any) -> None:
    from experiments import services

    trial = services.create_sweep(SPEC, alice).trials.get()  # pending, no host
    assert worker.claim(trial.pk) is None


def test_claim_upload_and_finish_record_the_trial(
    worker: BackendClient, queued_trial: Any, tmp_path: Path
) -> None:
    claim = worker.claim(queued_trial.pk)
    assert claim is not None
    assert claim["id"] == queued_trial.pk and claim["job_type"] == "link_check"
    assert claim["params"] == {"rate": "10mbit", "duration": "1s"}
    assert claim["attempt"] == 1 and claim["timeout_s"] == 300
    assert worker.claim(queued_trial.pk) is None, "a second delivery of the same task must not run it"

    pcap = tmp_path / "capture.pcap"
    pcap.write_bytes(b"\xd4\xc3\xb2\xa1" + bytes(range(256)) * 4000)
    stored = worker.upload_artifact(queued_trial.pk, pcap, "pcap")
    assert stored["sha256"] == hashlib.sha256(pcap.read_bytes()).hexdigest()
    assert stored["size"] == pcap.stat().st_size

    result = {"summary": {"tcp_down_bps": 9.5e6}, "provenance": {"code_revision": "abc"}, "link": {}}
    first = worker.finish(queued_trial.pk, "succeeded", "", result)
    assert first["status"] == "succeeded" and first["changed"] is True
    again = worker.finish(queued_trial.pk, "succeeded", "", result)
    assert again["changed"] is False, "repeating the same finish is a no-op"
    with pytest.raises(BackendError) as exc:
        worker.finish(queued_trial.pk, "failed", "late failure", {})
    assert exc.value.status == 409

    queued_trial.refresh_from_db()
    assert queued_trial.status == "succeeded"
    assert queued_trial.provenance["code_revision"] == "abc"
    assert queued_trial.summary.get(name="tcp_down_bps").value == 9.5e6


def test_a_lost_run_reported_as_retryable_goes_back_to_pending(
    worker: BackendClient, queued_trial: Any
) -> None:
    assert worker.claim(queued_trial.pk) is not None
    worker.finish(queued_trial.pk, "failed", "the worker process running this trial died", {}, retryable=True)
    queued_trial.refresh_from_db()
    assert queued_trial.status == "pending"
    assert "the worker process running this trial died" in queued_trial.attempt_log[-1]["reason"]
