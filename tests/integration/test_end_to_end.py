"""A real Celery worker runs real link_check trials against the live backend, end to end.

The stack (tests/fixtures/stack.py) is live_server + a scheduler thread + Redis DB 14 + a
``qoelab worker`` subprocess; nothing here is mocked, so these tests need root, Redis and
PostgreSQL, and take tens of seconds.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

pytestmark = [pytest.mark.celery, pytest.mark.netns, pytest.mark.slow]

QOELAB_BIN = Path(sys.executable).with_name("qoelab")
RATE = "8mbit"


def _spec(name: str, duration: str = "2s", **grid: list[Any]) -> dict[str, Any]:
    return {
        "experiment": {"name": "e2e link check"},
        "job_type": "link_check",
        "name": name,
        "grid": grid or {"rate": [RATE]},
        "fixed": {"delay": "5ms", "duration": duration},
        "repetitions": 1,
    }


def _trials(stack: Any, sweep_id: int) -> list[dict[str, Any]]:
    return stack.api().get_all("/api/trials/", sweep=sweep_id)


def _sweep_done(stack: Any, sweep_id: int) -> dict[str, Any] | None:
    sweep = stack.api().get(f"/api/sweeps/{sweep_id}/")
    prog = sweep["progress"]
    return sweep if prog["total"] and prog["done"] == prog["total"] else None


def test_a_real_worker_runs_a_link_check_and_the_result_appears_in_the_api(lab_stack: Any) -> None:
    api = lab_stack.api()
    sweep = api.post("/api/sweeps/", _spec("one point"), "creating the sweep")
    assert sweep["trial_count"] == 1
    done = lab_stack.wait_for("the sweep to finish", lambda: _sweep_done(lab_stack, sweep["id"]), timeout=150)
    assert done["progress"]["counts"]["succeeded"] == 1, done["progress"]

    (trial,) = _trials(lab_stack, sweep["id"])
    assert trial["status"] == "succeeded", trial["error"]
    assert trial["host_name"] == lab_stack.host_name
    assert trial["attempts"] == 1
    detail = api.get(f"/api/trials/{trial['id']}/")
    summary = detail["summary"]
    # The emulated link limits TCP to the configured rate: the goodput is just under it.
    assert 0.75 * 8e6 <= summary["tcp_down_bps"] <= 1.05 * 8e6, summary
    assert summary["configured_rate_bps"] == 8e6

    prov = detail["provenance"]
    assert prov["resolved"]["rate"] == 8e6
    assert prov["code_revision"]
    assert "iperf3" in prov["versions"]
    assert prov["host"]["kernel"].startswith("Linux")
    kinds = {a["kind"] for a in detail["artifacts"]}
    assert {"json", "log"} <= kinds, detail["artifacts"]
    log = next(a for a in detail["artifacts"] if a["name"] == f"trial-{trial['id']}.log")
    text = api._http.get(log["download_url"]).text
    assert f"trial={trial['id']}" in text and "succeeded" in text


def test_a_trace_uploaded_to_the_backend_is_fetched_by_the_worker_and_replayed(lab_stack: Any) -> None:
    """``upload:N``: the worker fetches the researcher's trace over the worker protocol and the trial
    records its name and checksum (issue 37)."""
    api = lab_stack.api()
    text = "".join(f"{ms}\n" for ms in range(1, 1001))  # one opportunity per ms for 1 s: 12 Mbit/s
    trace = api.post("/api/link-traces/", {"name": "steady-12mbit.trace", "text": text}, "uploading a trace")
    spec = _spec("uploaded trace")
    spec["grid"] = {"link_trace": [trace["ref"]]}
    sweep = api.post("/api/sweeps/", spec, "creating the sweep")
    done = lab_stack.wait_for("the sweep to finish", lambda: _sweep_done(lab_stack, sweep["id"]), timeout=150)
    (trial,) = _trials(lab_stack, sweep["id"])
    assert done["progress"]["counts"]["succeeded"] == 1, (trial["error"], lab_stack.worker.log_tail())
    detail = api.get(f"/api/trials/{trial['id']}/")
    configured = detail["link"]["configured"]
    assert configured["trace"] == "steady-12mbit.trace" and configured["trace_sha256"] == trace["sha256"]
    assert detail["link"]["link"]["traces"]["down"]["sha256"] == trace["sha256"]
    assert 0.6 * 12e6 <= detail["summary"]["tcp_down_bps"] <= 1.02 * 12e6, detail["summary"]
    assert "link_log.json" in {a["name"] for a in detail["artifacts"]}


def test_a_link_check_with_link_offload_runs_on_the_offload_emulator(lab_stack: Any) -> None:
    """``link_offload``: the sweep parameter reaches linkemu, the trial's link description says
    so, and the link still holds TCP to its rate (issue 37, item 4)."""
    api = lab_stack.api()
    spec = _spec("offload")
    spec["fixed"] |= {"link_offload": True, "backend": "userspace"}
    sweep = api.post("/api/sweeps/", spec, "creating the sweep")
    done = lab_stack.wait_for("the sweep to finish", lambda: _sweep_done(lab_stack, sweep["id"]), timeout=150)
    (trial,) = _trials(lab_stack, sweep["id"])
    assert done["progress"]["counts"]["succeeded"] == 1, (trial["error"], lab_stack.worker.log_tail())
    detail = api.get(f"/api/trials/{trial['id']}/")
    assert detail["link"]["link"]["backend"] == "userspace"
    assert detail["link"]["link"]["offload"] is True
    assert 0.75 * 8e6 <= detail["summary"]["tcp_down_bps"] <= 1.05 * 8e6, detail["summary"]


def test_sweep_run_wait_shows_progress_and_exits_zero_when_every_trial_succeeded(
    lab_stack: Any, tmp_path: Path
) -> None:
    spec = tmp_path / "two.yaml"
    spec.write_text(
        "experiment: e2e cli\n"
        "job_type: link_check\n"
        "name: two rates\n"
        "grid: {rate: [4mbit, 8mbit]}\n"
        "fixed: {delay: 5ms, duration: 1s}\n"
    )
    env = {**os.environ, "QOELAB_API_URL": lab_stack.url, "QOELAB_API_TOKEN": lab_stack.api_token}
    out = subprocess.run(
        [str(QOELAB_BIN), "sweep", "run", str(spec), "--wait", "--timeout", "240"],
        capture_output=True, text=True, env=env, timeout=300,
    )  # fmt: skip
    assert out.returncode == 0, f"{out.stdout}\n{out.stderr}\n{lab_stack.worker.log_tail()}"
    lines = out.stdout.splitlines()
    assert lines[0].startswith("sweep ") and lines[0].endswith("submitted: 2 trials")
    assert lines[1].startswith(f"{lab_stack.url}/sweeps/")
    assert "2 succeeded, 0 failed, 0 cancelled of 2" in lines[-1]
    # Not a terminal: one progress line per change, ending with all done.
    assert "2/2 done, 0 running, 0 failed" in out.stderr


def test_a_worker_killed_mid_trial_is_noticed_and_the_trial_runs_again_after_a_restart(
    lab_stack: Any,
) -> None:
    from experiments.models import Trial
    from fixtures.stack import HEARTBEAT_TIMEOUT_S, namespaces

    api = lab_stack.api()
    sweep = api.post("/api/sweeps/", _spec("killed", duration="6s"), "creating the sweep")
    trial = lab_stack.wait_for(
        "the trial to start running",
        lambda: Trial.objects.filter(sweep_id=sweep["id"], status="running").first(),
        timeout=60,
    )
    (first_prefix,) = lab_stack.wait_for(
        "the trial's namespaces", lab_stack.worker.trial_prefixes, timeout=30
    )

    lab_stack.worker.kill()  # the whole host goes: main process, pool, heartbeat
    killed_at = time.monotonic()
    assert namespaces(first_prefix), "a SIGKILL leaves the trial's namespaces behind"

    # The scheduler notices the stale heartbeat and gives the trial back (an attempt remains).
    requeued = lab_stack.wait_for(
        "the trial to be re-queued after the heartbeat timeout",
        lambda: Trial.objects.filter(pk=trial.pk, status="pending").first(),
        timeout=HEARTBEAT_TIMEOUT_S + 30,
    )
    assert time.monotonic() - killed_at >= HEARTBEAT_TIMEOUT_S - 2
    (entry,) = requeued.attempt_log
    assert lab_stack.host_name in entry["reason"] and "heartbeat" in entry["reason"], entry

    # The restarted worker removes what its predecessor left, then runs the trial again.
    lab_stack.worker.start()
    lab_stack.wait_for("the leftovers to be cleaned", lambda: not namespaces(first_prefix), timeout=60)
    done = lab_stack.wait_for("the sweep to finish", lambda: _sweep_done(lab_stack, sweep["id"]), timeout=150)
    (row,) = _trials(lab_stack, done["id"])
    assert row["status"] == "succeeded", row["error"]
    assert row["attempts"] == 2
    assert "cleanup" in lab_stack.worker.log_tail(200)


def test_a_trial_that_exhausts_its_attempts_fails_with_the_reason(lab_stack: Any) -> None:
    from experiments.models import Trial

    api = lab_stack.api()
    sweep = api.post("/api/sweeps/", _spec("killed twice", duration="6s"), "creating the sweep")
    Trial.objects.filter(sweep_id=sweep["id"]).update(max_attempts=1)
    lab_stack.wait_for(
        "the trial to start running",
        lambda: Trial.objects.filter(sweep_id=sweep["id"], status="running").exists(),
        timeout=60,
    )
    lab_stack.worker.kill()
    failed = lab_stack.wait_for(
        "the trial to fail",
        lambda: Trial.objects.filter(sweep_id=sweep["id"], status="failed").first(),
        timeout=60,
    )
    assert "heartbeat" in failed.error and lab_stack.host_name in failed.error, failed.error
    lab_stack.worker.start()
    lab_stack.wait_for_heartbeat(after=time.time())


def test_a_pool_process_killed_mid_trial_is_reported_and_its_leftovers_removed(lab_stack: Any) -> None:
    import json
    import signal

    from experiments.models import Trial
    from fixtures.stack import namespaces

    api = lab_stack.api()
    sweep = api.post("/api/sweeps/", _spec("pool child killed", duration="6s"), "creating the sweep")
    trial = lab_stack.wait_for(
        "the trial to start running",
        lambda: Trial.objects.filter(sweep_id=sweep["id"], status="running").first(),
        timeout=60,
    )
    (first_prefix,) = lab_stack.wait_for(
        "the trial's namespaces", lab_stack.worker.trial_prefixes, timeout=30
    )
    markers = list((lab_stack.worker.workdir / "running").glob(f"{trial.pk}.*.json"))
    assert len(markers) == 1, markers
    pid = json.loads(markers[0].read_text())["pid"]
    assert pid != lab_stack.worker.proc.pid, "the trial must run in a pool process, not the main one"

    os.kill(pid, signal.SIGKILL)  # as the hard time limit or the OOM killer would

    # The main process notices at its next heartbeat, cleans the prefix and reports a lost run,
    # which the backend retries; the worker itself stays up and runs attempt 2.
    lab_stack.wait_for("the leftovers to be cleaned", lambda: not namespaces(first_prefix), timeout=30)
    done = lab_stack.wait_for("the sweep to finish", lambda: _sweep_done(lab_stack, sweep["id"]), timeout=150)
    (row,) = _trials(lab_stack, done["id"])
    assert row["status"] == "succeeded", row["error"]
    assert row["attempts"] == 2
    detail = api.get(f"/api/trials/{row['id']}/")
    assert "the worker process running this trial died" in detail["attempt_log"][0]["reason"]
    assert lab_stack.worker.alive()


def test_the_worker_answers_the_celery_ping_the_container_healthcheck_sends(lab_stack: Any) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("QOELAB_", "DJANGO_"))}
    env["QOELAB_BROKER_URL"] = lab_stack.worker.broker_url
    out = subprocess.run(
        [str(QOELAB_BIN.with_name("celery")), "-A", "qoelab.celery_app", "inspect", "ping",
         "-d", f"celery@{lab_stack.host_name}", "--timeout", "10"],
        capture_output=True, text=True, env=env, timeout=60,
    )  # fmt: skip
    assert out.returncode == 0, out.stdout + out.stderr
    assert f"celery@{lab_stack.host_name}: OK" in out.stdout


def test_sweep_run_wait_exits_one_when_a_trial_fails_and_the_api_says_why(
    lab_stack: Any, tmp_path: Path
) -> None:
    # This kernel has no sch_netem: asking for that backend must fail the trial with the reason.
    spec = tmp_path / "netem.yaml"
    spec.write_text(
        "experiment: e2e netem\njob_type: link_check\nname: netem only\n"
        "grid: {rate: [4mbit]}\nfixed: {duration: 1s, backend: netem}\n"
    )
    env = {**os.environ, "QOELAB_API_URL": lab_stack.url, "QOELAB_API_TOKEN": lab_stack.api_token}
    out = subprocess.run(
        [str(QOELAB_BIN), "sweep", "run", str(spec), "--wait", "--timeout", "120"],
        capture_output=True, text=True, env=env, timeout=180,
    )  # fmt: skip
    assert out.returncode == 1, f"{out.stdout}\n{out.stderr}"
    assert out.stdout.splitlines()[-1].endswith("0 succeeded, 1 failed, 0 cancelled of 1")
    sweep_id = int(out.stdout.split()[1])
    (trial,) = _trials(lab_stack, sweep_id)
    assert trial["status"] == "failed" and trial["attempts"] == 1
    assert "netem" in trial["error"] and not trial["error"].startswith("internal error"), trial["error"]
