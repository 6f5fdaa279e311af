"""Trial status moves only through model methods that refuse illegal moves."""

from __future__ import annotations

import pytest

from experiments.choices import TrialStatus
from experiments.models import IllegalTransition

pytestmark = pytest.mark.django_db


def test_a_trial_goes_pending_queued_running_succeeded(sweep_of, make_host):
    lab = make_host("h1", {"netem": True})
    trial = sweep_of().trials.first()
    assert trial.status == TrialStatus.PENDING
    trial.mark_queued(lab.host)
    assert (trial.status, trial.host_name) == (TrialStatus.QUEUED, "h1")
    trial.mark_running(lab.host)
    assert trial.status == TrialStatus.RUNNING and trial.attempts == 1 and trial.started_at
    trial.mark_succeeded(host_id=lab.host.pk)
    assert trial.status == TrialStatus.SUCCEEDED and trial.finished_at >= trial.started_at


def test_it_refuses_to_overwrite_a_recorded_failure(sweep_of, make_host):
    lab = make_host("h1", {"netem": True})
    trial = sweep_of().trials.first()
    trial.mark_queued(lab.host)
    trial.mark_running(lab.host)
    trial.mark_failed("iperf3 exited 1")
    for move in (
        lambda: trial.mark_succeeded(),
        lambda: trial.back_to_pending("again", expect={TrialStatus.FAILED}),
        lambda: trial.mark_cancelled(),
    ):
        with pytest.raises(IllegalTransition):
            move()
    trial.refresh_from_db()
    assert trial.status == TrialStatus.FAILED and trial.error == "iperf3 exited 1"
    assert trial.attempt_log[-1]["reason"] == "iperf3 exited 1"


def test_it_refuses_to_run_a_trial_that_was_never_queued(sweep_of, make_host):
    lab = make_host("h1", {"netem": True})
    trial = sweep_of().trials.first()
    with pytest.raises(IllegalTransition, match="from pending to running"):
        trial.mark_running(lab.host)


def test_it_refuses_to_run_a_trial_queued_for_another_host(sweep_of, make_host):
    h1, h2 = make_host("h1", {"netem": True}), make_host("h2", {"netem": True})
    trial = sweep_of().trials.first()
    trial.mark_queued(h1.host)
    with pytest.raises(IllegalTransition):
        trial.mark_running(h2.host)
    trial.mark_running(h1.host)
    assert trial.host_name == "h1"


def test_a_stale_instance_cannot_move_a_trial_that_moved_meanwhile(sweep_of, make_host):
    from experiments.models import Trial

    lab = make_host("h1", {"netem": True})
    trial = sweep_of().trials.first()
    other = Trial.objects.get(pk=trial.pk)
    trial.mark_cancelled()
    with pytest.raises(IllegalTransition, match="from cancelled to queued"):
        other.mark_queued(lab.host)


def test_back_to_pending_keeps_the_reason_of_each_attempt(sweep_of, make_host):
    lab = make_host("h1", {"netem": True})
    trial = sweep_of().trials.first()
    for i in range(2):
        trial.mark_queued(lab.host)
        trial.mark_running(lab.host)
        trial.back_to_pending(f"lost {i}")
    assert [e["reason"] for e in trial.attempt_log] == ["lost 0", "lost 1"]
    assert [e["attempt"] for e in trial.attempt_log] == [1, 2]
    assert trial.host is None and trial.status == TrialStatus.PENDING
