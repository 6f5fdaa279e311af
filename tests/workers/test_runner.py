"""qoelab.runner.run_trial with tiny job types declared here, and a reporter that keeps what it is sent.

The reporter stands in for the HTTP client only; the end-to-end tests (tests/integration/) run the
same function behind a real Celery worker and the real backend.
"""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path
from typing import Any

import psutil
import pytest
from pydantic import BaseModel, ConfigDict

from qoelab import params, runner
from qoelab.errors import QoelabError
from qoelab.jobtype import JobType, TrialContext, TrialResult


class Recorder:
    """Keeps uploads (with their bytes: the work dir is gone afterwards) and finish calls."""

    def __init__(self, fail_uploads: bool = False) -> None:
        self.uploads: list[tuple[str, str, str, bytes]] = []
        self.finished: list[tuple[str, str, str, dict[str, Any]]] = []
        self.fail_uploads = fail_uploads

    def upload_artifact(self, trial_id: int | str, path: Path, kind: str) -> dict[str, Any]:
        if self.fail_uploads and kind != "log":
            raise QoelabError("the backend refused the upload (HTTP 413)")
        self.uploads.append((str(trial_id), Path(path).name, kind, Path(path).read_bytes()))
        return {}

    def finish(self, trial_id: int | str, status: str, error: str = "", result: dict | None = None) -> dict:
        self.finished.append((str(trial_id), status, error, result or {}))
        return {}

    @property
    def outcome(self) -> tuple[str, str, str, dict[str, Any]]:
        assert len(self.finished) == 1, self.finished
        return self.finished[0]

    def log_text(self) -> str:
        logs = [u for u in self.uploads if u[2] == "log"]
        assert len(logs) == 1, [u[:3] for u in self.uploads]
        return logs[0][3].decode()


class Echo(BaseModel):
    model_config = ConfigDict(extra="forbid")
    rate: params.Rate(hi=100e6)
    delay: params.Duration() = 0.0
    behaviour: str = "ok"


def _echo(p: Echo, ctx: TrialContext) -> TrialResult:
    ctx.log.info("echo starting in %s", ctx.workdir)
    if p.behaviour == "raise":
        return 1 / 0  # type: ignore[return-value]
    if p.behaviour == "qoelab-error":
        raise QoelabError("iperf3 could not connect to the server namespace")
    if p.behaviour == "sleep":
        time.sleep(60)
    if p.behaviour == "spawn":
        proc = subprocess.Popen(["sleep", "300"])
        (ctx.workdir / "child.pid").write_text(str(proc.pid))
        ctx.add_artifact(ctx.workdir / "child.pid", "json")
    if p.behaviour == "empty-log":
        (ctx.workdir / "helper.log").write_text("")
        ctx.add_artifact(ctx.workdir / "helper.log", "log")
    if p.behaviour == "netns":
        from pyroute2 import netns

        netns.create(f"{ctx.prefix}c")
        raise QoelabError("link verification failed")
    out = ctx.workdir / "echo.json"
    out.write_text(f'{{"rate": {p.rate}}}')
    ctx.add_artifact(out, "json")
    return TrialResult(
        summary={"rate_bps": p.rate, "delay_s": p.delay}, provenance={"versions": {"echo": "1.0"}}
    )


ECHO = JobType(
    name="echo_test",
    title="Echo (tests only)",
    description="Returns its parameters.",
    params=Echo,
    requires=frozenset(),
    run=_echo,
    timeout_s=30,
)
FACTS = {
    "name": "lab1",
    "hostname": "vm",
    "kernel": "Linux 6.1",
    "python": "3.11",
    "capabilities": {"netns": True},
    "versions": {"iperf3": "iperf 3.12", "code_revision": "abc123"},
    "code_revision": "abc123",
}


def _jobs(name: str) -> JobType:
    if name == ECHO.name:
        return ECHO
    raise KeyError(f"unknown job type {name!r} (known: {ECHO.name})")


def _claim(**params_: Any) -> dict[str, Any]:
    return {
        "id": 41,
        "job_type": "echo_test",
        "params": params_,
        "timeout_s": 30,
        "prefix": "qt41a",
        "attempt": 1,
    }


def _run(tmp_path: Path, claim: dict[str, Any], rec: Recorder | None = None, **kw: Any) -> Recorder:
    rec = rec or Recorder()
    kw.setdefault("cleanup", lambda prefix: None)
    runner.run_trial(claim, tmp_path, rec, host_facts=FACTS, get_job=_jobs, **kw)
    return rec


def test_it_reports_success_with_summary_artifacts_and_provenance(tmp_path: Path) -> None:
    rec = _run(tmp_path, _claim(rate="10mbit", delay="20ms"))
    trial, status, error, result = rec.outcome
    assert (trial, status, error) == ("41", "succeeded", "")
    assert result["summary"] == {"rate_bps": 10e6, "delay_s": 0.02}
    prov = result["provenance"]
    assert prov["params"] == {"rate": "10mbit", "delay": "20ms"}
    assert prov["resolved"]["rate"] == 10e6
    assert prov["code_revision"] == "abc123"
    assert prov["host"]["kernel"] == "Linux 6.1"
    # the runner's own versions are merged over the host's
    assert prov["versions"] == {"iperf3": "iperf 3.12", "code_revision": "abc123", "echo": "1.0"}
    assert [(u[1], u[2]) for u in rec.uploads] == [("echo.json", "json"), ("trial-41.log", "log")]
    assert list(tmp_path.iterdir()) == [], "the work dir must be removed"


def test_every_trial_log_line_carries_the_trial_id(tmp_path: Path) -> None:
    text = _run(tmp_path, _claim(rate="1mbit")).log_text()
    lines = [ln for ln in text.splitlines() if ln.strip()]
    assert len(lines) >= 4
    assert all(" trial=41 " in ln for ln in lines), text
    assert "echo starting" in text


def test_it_fails_with_the_parameter_error_naming_the_field_and_bound(tmp_path: Path) -> None:
    rec = _run(tmp_path, _claim(rate="1gbit"))
    _, status, error, result = rec.outcome
    assert status == "failed"
    assert error == "rate: must be at most 100mbit/s, got '1gbit'", error
    assert result["provenance"]["params"] == {"rate": "1gbit"}
    assert result["provenance"]["resolved"] is None


def test_it_reports_a_qoelab_error_as_its_message(tmp_path: Path) -> None:
    _, status, error, _ = _run(tmp_path, _claim(rate="1mbit", behaviour="qoelab-error")).outcome
    assert (status, error) == ("failed", "iperf3 could not connect to the server namespace")


def test_it_reports_an_unexpected_exception_as_internal_error_with_the_traceback_in_the_log(
    tmp_path: Path,
) -> None:
    rec = _run(tmp_path, _claim(rate="1mbit", behaviour="raise"))
    _, status, error, _ = rec.outcome
    assert (status, error) == ("failed", "internal error: ZeroDivisionError: division by zero")
    text = rec.log_text()
    assert "Traceback (most recent call last)" in text and "1 / 0" in text


def test_it_stops_a_runner_that_overruns_its_time_limit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(runner, "DEADLINE_GRACE_S", 0.5)
    claim = {**_claim(rate="1mbit", behaviour="sleep"), "timeout_s": 1}
    t0 = time.monotonic()
    _, status, error, _ = _run(tmp_path, claim).outcome
    assert time.monotonic() - t0 < 10
    assert status == "failed"
    assert error == "the trial ran past its time limit of 1 s and was stopped"


# The leaked Popen object is collected without a wait(): that is the leak being simulated.
@pytest.mark.filterwarnings("ignore:subprocess .* is still running:ResourceWarning")
def test_it_kills_processes_the_runner_left_running(tmp_path: Path) -> None:
    rec = _run(tmp_path, _claim(rate="1mbit", behaviour="spawn"))
    assert rec.outcome[1] == "succeeded"
    pid = int(next(u[3] for u in rec.uploads if u[1] == "child.pid"))
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE


def test_it_rejects_an_unknown_job_type_by_name(tmp_path: Path) -> None:
    claim = {**_claim(rate="1mbit"), "job_type": "nope"}
    _, status, error, _ = _run(tmp_path, claim).outcome
    assert status == "failed"
    assert error == "this worker does not know the job type: unknown job type 'nope' (known: echo_test)"


@pytest.mark.parametrize("prefix", ["", "q", "../etc", "ql-with-dash", "QL1"])
def test_it_refuses_a_prefix_that_could_select_unrelated_objects(tmp_path: Path, prefix: str) -> None:
    cleaned: list[str] = []
    claim = {**_claim(rate="1mbit"), "prefix": prefix}
    _, status, error, _ = _run(tmp_path, claim, cleanup=cleaned.append).outcome
    assert status == "failed"
    assert "unusable name prefix" in error
    assert cleaned == [], "cleanup must never run for a malformed prefix"


def test_it_still_finishes_when_an_upload_fails_and_says_so_in_the_log(tmp_path: Path) -> None:
    rec = _run(tmp_path, _claim(rate="1mbit"), Recorder(fail_uploads=True))
    assert rec.outcome[1] == "succeeded"
    assert "upload of echo.json failed: the backend refused the upload (HTTP 413)" in rec.log_text()


def test_it_cleans_up_under_the_trial_prefix_even_when_the_trial_fails(tmp_path: Path) -> None:
    cleaned: list[str] = []
    _run(tmp_path, _claim(rate="1mbit", behaviour="qoelab-error"), cleanup=cleaned.append)
    assert cleaned == ["qt41a"]


@pytest.mark.netns
def test_it_removes_namespaces_a_failed_runner_left_behind(tmp_path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root to create network namespaces")
    from pyroute2 import netns

    rec = _run(tmp_path, _claim(rate="1mbit", behaviour="netns"), cleanup=runner.cleanup_prefix)
    assert rec.outcome[1:3] == ("failed", "link verification failed")
    assert not [n for n in netns.listnetns() if n.startswith("qt41a")]


def test_an_empty_artifact_is_not_uploaded_and_the_log_says_so(tmp_path: Path) -> None:
    rec = _run(tmp_path, _claim(rate="1mbit", behaviour="empty-log"))
    assert rec.outcome[1] == "succeeded"
    assert "helper.log" not in [u[1] for u in rec.uploads]
    assert "artifact helper.log (log) is empty; not uploaded" in rec.log_text()
