"""The worker's running markers: what the heartbeat reports and how a dead pool process is reaped.

No broker is needed: the markers are files, the processes are real, the client records calls.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import psutil
import pytest

from qoelab import celery_app


class Recorder:
    def __init__(self) -> None:
        self.finished: list[tuple[str, str, str, bool]] = []

    def finish(
        self, trial_id: Any, status: str, error: str = "", result: Any = None, retryable: bool = False
    ):
        self.finished.append((str(trial_id), status, error, retryable))
        return {}


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setattr(celery_app, "settings", celery_app.WorkerSettings(name="lab1", workdir=tmp_path))
    return tmp_path


def _dead_pid() -> tuple[int, float]:
    proc = subprocess.Popen(["true"])
    create_time = psutil.Process(proc.pid).create_time()
    proc.wait()
    return proc.pid, create_time


def _marker(
    workdir: Path, trial: str, pid: int, create_time: float, prefix: str = "", attempt: int = 1
) -> Path:
    d = workdir / "running"
    d.mkdir(exist_ok=True)
    path = d / f"{trial}.{pid}.json"
    info = {"trial": trial, "pid": pid, "create_time": create_time, "prefix": prefix, "attempt": attempt}
    path.write_text(json.dumps(info))
    return path


def test_a_live_marker_is_reported_as_running(workdir: Path) -> None:
    me = psutil.Process()
    _marker(workdir, "7", me.pid, me.create_time(), "q7a")
    running, dead, _ = celery_app.scan_markers()
    assert (running, dead) == (["7"], [])


def test_a_reused_pid_does_not_count_as_the_trial_still_running(workdir: Path) -> None:
    me = psutil.Process()
    _marker(workdir, "7", me.pid, me.create_time() - 100, "q7a")  # same pid, another process
    running, dead, _ = celery_app.scan_markers()
    assert running == [] and len(dead) == 1


def test_the_heartbeat_keeps_listing_a_lost_run_until_it_is_reaped(workdir: Path, monkeypatch: Any) -> None:
    pid, created = _dead_pid()
    _marker(workdir, "9", pid, created, "q9a")
    sent: list[dict[str, Any]] = []

    class Client:
        def heartbeat(self, body: dict[str, Any]) -> dict[str, Any]:
            sent.append(body)
            return {}

    monkeypatch.setattr(celery_app, "backend_client", lambda: Client())
    monkeypatch.setattr(celery_app, "host_facts", lambda: {"kernel": "k", "capabilities": {}, "versions": {}})
    celery_app.send_heartbeat()
    assert sent[0]["running"] == [9]
    assert sent[0]["queues"] == ["host.lab1"]


@pytest.mark.netns
def test_a_dead_pool_process_is_cleaned_up_and_reported_as_a_retryable_loss(workdir: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root to create network namespaces")
    from pyroute2 import netns

    pid, created = _dead_pid()
    marker = _marker(workdir, "9", pid, created, "qmk9a")
    (workdir / "trial-9-1").mkdir()
    netns.create("qmk9ac")
    client = Recorder()
    try:
        assert celery_app.reap_dead_markers(client, "the worker process running this trial died") == ["9"]
    finally:
        if "qmk9ac" in netns.listnetns():
            netns.remove("qmk9ac")
            pytest.fail("the lost run's namespace was not removed")
    reason = f"the worker process running this trial died (worker process {pid})"
    assert client.finished == [("9", "failed", reason, True)]
    assert not marker.exists() and not (workdir / "trial-9-1").exists()


def test_a_dead_marker_waits_while_a_redelivery_is_still_claiming(workdir: Path) -> None:
    pid, created = _dead_pid()
    dead = _marker(workdir, "9", pid, created, "qmk9a")
    me = psutil.Process()
    _marker(workdir, "9", me.pid, me.create_time(), "")  # the redelivered task, before its claim answer
    client = Recorder()
    assert celery_app.reap_dead_markers(client, "died") == []
    assert dead.exists() and client.finished == []


def test_a_dead_run_is_not_reported_over_a_newer_claimed_attempt(workdir: Path, monkeypatch: Any) -> None:
    cleaned: list[str] = []
    monkeypatch.setattr(celery_app, "cleanup_isolated", cleaned.append)
    pid, created = _dead_pid()
    _marker(workdir, "9", pid, created, "qmk9a", attempt=1)
    me = psutil.Process()
    _marker(workdir, "9", me.pid, me.create_time(), "qmk9b", attempt=2)
    (workdir / "trial-9-1").mkdir()
    (workdir / "trial-9-2").mkdir()
    client = Recorder()
    assert celery_app.reap_dead_markers(client, "died") == ["9"]
    assert cleaned == ["qmk9a"] and client.finished == [], "a finish now would end attempt 2"
    assert not (workdir / "trial-9-1").exists() and (workdir / "trial-9-2").exists()


def test_a_run_that_died_before_its_claim_is_dropped_without_a_report(
    workdir: Path, monkeypatch: Any
) -> None:
    cleaned: list[str] = []
    monkeypatch.setattr(celery_app, "cleanup_isolated", cleaned.append)
    pid, created = _dead_pid()
    marker = _marker(workdir, "9", pid, created, "")
    client = Recorder()
    celery_app.reap_dead_markers(client, "died")
    assert (cleaned, client.finished) == ([], [])
    assert not marker.exists()
