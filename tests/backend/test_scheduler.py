"""The scheduler tick: reaping stale hosts, lost messages, and dispatch through real Redis."""

from __future__ import annotations

import base64
import json
import time
import uuid
from datetime import timedelta

import pytest
import redis
from django.conf import settings as dj_settings
from django.utils import timezone

from experiments import services
from experiments.choices import TrialStatus
from experiments.models import Trial
from experiments.scheduler import tick

pytestmark = pytest.mark.django_db


@pytest.fixture
def rds():
    client = redis.Redis.from_url(dj_settings.REDIS_URL)
    try:
        client.ping()
    except redis.ConnectionError as exc:
        pytest.fail(f"Redis at {dj_settings.REDIS_URL} is required for scheduler tests: {exc}")
    yield client
    client.close()


@pytest.fixture
def unique():
    """Throwaway host names so the queues these tests fill never meet a real worker; purged after."""
    names: list[str] = []

    def make(label: str) -> str:
        name = f"pytest-{label}-{uuid.uuid4().hex[:8]}"
        names.append(name)
        return name

    yield make
    client = redis.Redis.from_url(dj_settings.REDIS_URL)
    for name in names:
        client.delete(f"host.{name}", f"_kombu.binding.host.{name}")
    client.close()


def queued_messages(rds, host_name: str) -> list[dict]:
    """Messages waiting in the host's Celery queue, oldest first (kombu LPUSHes onto a list)."""
    out = []
    for raw in reversed(rds.lrange(f"host.{host_name}", 0, -1)):
        envelope = json.loads(raw)
        body = json.loads(base64.b64decode(envelope["body"]))
        out.append({"task": envelope["headers"]["task"], "args": body[0]})
    return out


def test_dispatch_respects_capabilities_and_concurrency(sweep_of, make_host, unique, rds):
    a = make_host(unique("netem"), {"netem": True}, concurrency=2)
    b = make_host(unique("kvm"), {"kvm": True, "netem": False}, concurrency=1)
    stale = make_host(unique("stale"), {"netem": True, "kvm": True}, concurrency=5, alive=False)
    off = make_host(unique("off"), {"netem": True, "kvm": True}, concurrency=5)
    off.host.enabled = False
    off.host.save()
    link = sweep_of({"rate": ["1mbit", "2mbit", "3mbit", "4mbit", "5mbit"]})
    vm = sweep_of({"vms": [1, 2]}, job_type="t_vm", experiment_name="vms")

    report = tick()
    assert not report.errors
    link_ids = list(link.trials.order_by("index").values_list("pk", flat=True))
    vm_ids = list(vm.trials.order_by("index").values_list("pk", flat=True))
    assert report.dispatched == {a.host.name: link_ids[:2], b.host.name: vm_ids[:1]}
    assert queued_messages(rds, a.host.name) == [
        {"task": "qoelab.run_trial", "args": [i]} for i in link_ids[:2]
    ]
    assert queued_messages(rds, b.host.name) == [{"task": "qoelab.run_trial", "args": [vm_ids[0]]}]
    assert queued_messages(rds, stale.host.name) == [] and queued_messages(rds, off.host.name) == []
    assert Trial.objects.get(pk=link_ids[0]).status == TrialStatus.QUEUED
    assert Trial.objects.get(pk=link_ids[0]).celery_task_id

    # Slots are full: nothing more goes out until a trial ends.
    assert tick().dispatched == {}
    first = Trial.objects.get(pk=link_ids[0])
    first.mark_running(a.host)
    first.mark_succeeded(host_id=a.host.pk)
    assert tick().dispatched == {a.host.name: [link_ids[2]]}


def test_a_trial_goes_only_to_hosts_with_the_capabilities_its_own_parameters_need(
    sweep_of, make_host, unique, test_job_types
):
    import dataclasses

    from qoelab.jobs import REGISTRY

    # t_link with a per-trial need: X2Go trials need "x2go" on top of the job type's "netem".
    REGISTRY["t_link"] = dataclasses.replace(
        test_job_types["t_link"],
        requires_for=lambda p: frozenset({"x2go"}) if p.protocol == "x2go" else frozenset(),
    )
    try:
        sweep = sweep_of({"protocol": ["vnc", "x2go"]}, fixed={"rate": "1mbit"})
        plain = make_host(unique("plain"), {"netem": True, "x2go": False}, concurrency=5)
        by_protocol = dict(sweep.trials.values_list("params__protocol", "requires"))
        assert by_protocol == {"vnc": ["netem"], "x2go": ["netem", "x2go"]}
        vnc, x2go = (sweep.trials.get(params__protocol=p).pk for p in ("vnc", "x2go"))
        assert tick().dispatched == {plain.host.name: [vnc]}
        assert services.progress(sweep)["blocked"].startswith("no live worker has capability x2go")
        full = make_host(unique("full"), {"netem": True, "x2go": True}, concurrency=5)
        assert tick().dispatched == {full.host.name: [x2go]}
    finally:
        REGISTRY["t_link"] = test_job_types["t_link"]


def test_trials_no_live_worker_can_run_stay_pending_and_the_sweep_says_why(sweep_of, make_host, unique):
    sweep = sweep_of()
    assert "no live worker" in services.progress(sweep)["blocked"]
    make_host(unique("kvm"), {"kvm": True})
    assert tick().dispatched == {}
    blocked = services.progress(sweep)["blocked"]
    assert blocked.startswith("no live worker has capability netem") and "lacks netem" in blocked
    assert set(sweep.trials.values_list("status", flat=True)) == {TrialStatus.PENDING}


def test_trials_of_a_cancelled_sweep_are_not_dispatched(sweep_of, make_host, unique, rds):
    lab = make_host(unique("netem"), {"netem": True}, concurrency=4)
    sweep = sweep_of({"rate": ["1mbit", "2mbit", "3mbit"]})
    services.cancel_sweep(sweep)
    assert tick().dispatched == {} and queued_messages(rds, lab.host.name) == []
    assert set(sweep.trials.values_list("status", flat=True)) == {TrialStatus.CANCELLED}


def test_cancelling_stops_queued_trials_but_lets_running_ones_finish(sweep_of, make_host, unique):
    lab = make_host(unique("netem"), {"netem": True}, concurrency=2)
    sweep = sweep_of({"rate": ["1mbit", "2mbit", "3mbit"]})
    tick()
    running, queued = sweep.trials.order_by("index")[:2]
    running.mark_running(lab.host)
    assert services.cancel_sweep(sweep) == 2
    statuses = dict(sweep.trials.values_list("index", "status"))
    assert statuses == {0: TrialStatus.RUNNING, 1: TrialStatus.CANCELLED, 2: TrialStatus.CANCELLED}
    assert services.progress(sweep)["cancelled"] is True


def test_it_requeues_or_fails_trials_of_a_host_that_stopped_heartbeating(
    sweep_of, make_host, unique, settings
):
    lab = make_host(unique("dying"), {"netem": True}, concurrency=3)
    sweep = sweep_of({"rate": ["1mbit", "2mbit", "3mbit"]})
    tick()
    t_queued, t_retry, t_last = sweep.trials.order_by("index")
    t_retry.mark_running(lab.host)
    t_last.mark_running(lab.host)
    Trial.objects.filter(pk=t_last.pk).update(attempts=2)  # its last attempt

    lab.host.last_heartbeat = timezone.now() - timedelta(seconds=settings.QOELAB_HEARTBEAT_TIMEOUT + 5)
    lab.host.save()
    report = tick()
    assert sorted(report.requeued) == sorted([t_queued.pk, t_retry.pk]) and report.failed == [t_last.pk]
    t_queued.refresh_from_db()
    t_retry.refresh_from_db()
    t_last.refresh_from_db()
    assert t_queued.status == t_retry.status == TrialStatus.PENDING
    assert "stopped heartbeating" in t_retry.attempt_log[-1]["reason"] and t_retry.attempts == 1
    assert t_last.status == TrialStatus.FAILED
    assert t_last.error.startswith(f"worker {lab.host.name} stopped heartbeating")
    assert "attempt 2 of 2" in t_last.error
    # a dead host gets nothing new
    assert report.dispatched == {}


def test_a_trial_queued_too_long_without_a_claim_goes_back_to_pending(sweep_of, make_host, unique, settings):
    lab = make_host(unique("slow"), {"netem": True})
    sweep = sweep_of({"rate": ["1mbit"]})
    tick()
    trial = sweep.trials.get()
    assert trial.status == TrialStatus.QUEUED
    Trial.objects.filter(pk=trial.pk).update(
        queued_at=timezone.now() - timedelta(seconds=settings.QOELAB_QUEUED_TIMEOUT + 1)
    )
    report = tick()
    assert report.lost_messages == [trial.pk]
    trial.refresh_from_db()
    assert "without being claimed" in trial.attempt_log[-1]["reason"]
    # and it was sent again in the same tick
    assert report.dispatched == {lab.host.name: [trial.pk]} and trial.attempts == 0


def test_a_dead_broker_leaves_trials_pending_and_says_so(sweep_of, make_host, unique, settings):
    settings.CELERY_BROKER_URL = "redis://127.0.0.1:1/0"  # nothing listens on port 1
    make_host(unique("nobroker"), {"netem": True}, concurrency=2)
    sweep = sweep_of()
    started = time.monotonic()
    report = tick()
    assert time.monotonic() - started < 15
    assert report.errors and "cannot send trial" in report.errors[0]
    assert set(sweep.trials.values_list("status", flat=True)) == {TrialStatus.PENDING}
    assert "not sent" in sweep.trials.first().attempt_log[-1]["reason"]


def test_progress_counts_and_eta_come_from_finished_trials(sweep_of, make_host, unique):
    lab = make_host(unique("eta"), {"netem": True}, concurrency=2)
    sweep = sweep_of({"rate": ["1mbit", "2mbit", "3mbit", "4mbit", "5mbit"]})
    tick()
    t0 = sweep.trials.get(index=0)
    t0.mark_running(lab.host)
    t0.mark_succeeded(host_id=lab.host.pk)
    Trial.objects.filter(pk=t0.pk).update(started_at=t0.finished_at - timedelta(seconds=30))
    p = services.progress(sweep)
    assert (p["total"], p["done"], p["counts"]["queued"], p["counts"]["pending"]) == (5, 1, 1, 3)
    assert p["mean_trial_s"] == pytest.approx(30)
    assert p["eta_s"] == pytest.approx(30 * 2)  # 4 left on 2 slots
    assert p["fraction"] == pytest.approx(0.2) and p["blocked"] is None


def test_the_scheduler_command_runs_one_tick(sweep_of, make_host, unique, rds):
    from io import StringIO

    from django.core.management import call_command

    lab = make_host(unique("cmd"), {"netem": True})
    sweep_of({"rate": ["1mbit"]})
    out = StringIO()
    call_command("scheduler", "--once", stdout=out)
    assert "dispatched 1" in out.getvalue()
    assert len(queued_messages(rds, lab.host.name)) == 1
