"""Scale-out shown, not assumed: two real workers (two lab hosts) share one sweep.

Both workers are real ``qoelab worker`` processes on this machine with their own names, tokens,
work dirs, queues and trial-name prefixes (tests/fixtures/stack.py); the scheduler thread
dispatches to whichever host has a free slot. Nothing here measures time: the speed-up is the
benchmark's business (benchmarks/scale_out/, docs/scale-out.md).
"""

from __future__ import annotations

import logging
import re
import time
from collections import Counter
from typing import Any

import pytest

pytestmark = [pytest.mark.celery, pytest.mark.netns, pytest.mark.slow]

# Six cheap trials (5-10 s each): with one slot per host and both hosts alive when the sweep
# arrives, the first tick hands one trial to each, so both run some whatever the machine's load.
RATES = ["2mbit", "3mbit", "4mbit", "5mbit", "6mbit", "8mbit"]
# About 40 s on this 2-core VM; a loaded CI machine can be several times slower.
SWEEP_TIMEOUT_S = 600
CLAIMED = re.compile(r"trial (\d+) claimed by (\S+) \(attempt (\d+)\)")


def _spec() -> dict[str, Any]:
    return {
        "experiment": {"name": "two workers"},
        "job_type": "link_check",
        "name": "shared sweep",
        "grid": {"rate": RATES},
        "fixed": {"delay": "5ms", "duration": "1s"},
        "repetitions": 1,
    }


def _sweep_done(stack: Any, sweep_id: int) -> dict[str, Any] | None:
    sweep = stack.api().get(f"/api/sweeps/{sweep_id}/")
    prog = sweep["progress"]
    return sweep if prog["total"] and prog["done"] == prog["total"] else None


def _trials_named_in_log(text: str, outcome: str) -> set[int]:
    """Trial ids a worker's log reports as ended with ``outcome`` (the runner's last line per run)."""
    return {int(m) for m in re.findall(rf"trial (\d+) {outcome}\b", text)}


def test_two_workers_share_a_sweep_and_every_trial_runs_exactly_once(
    lab_stack: Any, start_lab_worker: Any, caplog: pytest.LogCaptureFixture
) -> None:
    from experiments.models import Trial

    # The backend logs every successful claim (one conditional UPDATE each) from the live server.
    caplog.set_level(logging.INFO, logger="qoelab.experiments")
    first = lab_stack.worker
    second = start_lab_worker()
    assert first.prefix_base != second.prefix_base
    assert not first.prefix_base.startswith(second.prefix_base)
    assert not second.prefix_base.startswith(first.prefix_base)
    # Both hosts alive when the sweep arrives: the first tick then gives each host one trial.
    lab_stack.wait_for_heartbeat(timeout=90)
    lab_stack.wait_for_heartbeat(timeout=90, worker=second)
    log_start = {w.name: len(w.log_path.read_text(errors="replace")) for w in (first, second)}

    sweep = lab_stack.api().post("/api/sweeps/", _spec(), "creating the sweep")
    assert sweep["trial_count"] == len(RATES)
    done = lab_stack.wait_for(
        f"the {len(RATES)}-trial sweep to finish on two workers",
        lambda: _sweep_done(lab_stack, sweep["id"]),
        timeout=SWEEP_TIMEOUT_S,
        every=1.0,
    )
    context = f"\nprogress: {done['progress']}\n{lab_stack.worker_logs(80)}"

    trials = list(Trial.objects.filter(sweep_id=sweep["id"]).order_by("index"))
    assert len(trials) == len(RATES)
    for t in trials:
        assert t.status == "succeeded", f"trial {t.pk} {t.status} on {t.host_name}: {t.error}{context}"
        assert t.attempts == 1, f"trial {t.pk} was claimed {t.attempts} times: {t.attempt_log}{context}"
        assert t.attempt_log == [], f"trial {t.pk} had an attempt taken back: {t.attempt_log}{context}"
        assert t.host_name in (first.name, second.name), t.host_name
        assert t.provenance["host"]["name"] == t.host_name
    ids = {t.pk for t in trials}

    # Backend side: exactly one successful claim per trial, by the host that then ran it.
    claims = [
        (int(m[1]), m[2], int(m[3]))
        for r in caplog.records
        if r.name == "qoelab.experiments" and (m := CLAIMED.fullmatch(r.getMessage()))
    ]
    claims = [c for c in claims if c[0] in ids]
    per_trial = Counter(trial_id for trial_id, _, _ in claims)
    assert per_trial == Counter({i: 1 for i in ids}), f"claims per trial: {dict(per_trial)}{context}"
    by_host = {trial_id: host for trial_id, host, _ in claims}
    assert by_host == {t.pk: t.host_name for t in trials}, context

    # Worker side: each worker's own log names the trials it ran; no trial in both, none refused.
    # The runner writes that line just after the backend has the result, so the sweep can be done
    # a moment before the last line is in a worker's log (seen on a loaded host): wait for it.
    def logs() -> dict[str, str]:
        return {w.name: w.log_path.read_text(errors="replace")[log_start[w.name] :] for w in (first, second)}

    def all_named() -> dict[str, str] | None:
        texts = logs()
        named = set().union(*(_trials_named_in_log(t, "succeeded") for t in texts.values()))
        return texts if ids <= named else None

    deadline = time.monotonic() + 30
    while (texts := all_named()) is None and time.monotonic() < deadline:
        time.sleep(0.2)
    texts = texts or logs()  # not all named within 30 s: the assertions below say which is missing
    ran: dict[str, set[int]] = {}
    for w in (first, second):
        text = texts[w.name]
        ran[w.name] = _trials_named_in_log(text, "succeeded") & ids
        assert not _trials_named_in_log(text, "failed") & ids, f"{w.name} reported a failure{context}"
        assert "no longer queued" not in text, f"{w.name} had a delivery refused{context}"
    assert not ran[first.name] & ran[second.name], f"trials run by both workers: {ran}{context}"
    assert ran[first.name] | ran[second.name] == ids, f"ran: {ran}, trials: {sorted(ids)}{context}"
    for w in (first, second):
        assert ran[w.name] == {t.pk for t in trials if t.host_name == w.name}, context
        assert ran[w.name], f"{w.name} ran no trial of the sweep: {ran}{context}"
