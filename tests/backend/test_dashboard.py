"""Dashboard pages through Django's test client against PostgreSQL: access, forms, CSV, charts."""

from __future__ import annotations

import csv
import dataclasses
import io
import math
from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.core.files.base import ContentFile
from django.test import Client
from django.utils import timezone
from pydantic import BaseModel, ConfigDict, Field

from experiments.models import Experiment, Sweep
from experiments.services import create_sweep
from qoelab import params
from qoelab.jobs import REGISTRY
from qoelab.jobtype import ChartSpec, JobType, Metric, TrialResult
from results.models import Artifact, Sample, SummaryValue

pytestmark = pytest.mark.django_db

# t(0.975, 2), the Student-t quantile for n = 3, from tables (not from the code under test).
T_975_DF2 = 4.302652729911275


class DemoParams(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_default=True)
    rate: params.Rate() = Field(description="bottleneck rate")
    delay: params.Duration(hi=1.0) = Field("0ms", description="one-way delay")


def _never_run(p: BaseModel, ctx: object) -> TrialResult:
    raise AssertionError("dashboard tests do not run trials")


DEMO = JobType(
    name="dash_demo",
    title="Dashboard demo",
    description="A job type for the dashboard tests.",
    params=DemoParams,
    requires=frozenset({"netns"}),
    run=_never_run,
    metrics=(Metric("goodput_bps", "Goodput", "bit/s"), Metric("rtt_s", "RTT", "s")),
    charts=(
        ChartSpec(
            key="goodput",
            title="Goodput vs rate",
            x="rate",
            y="goodput_bps",
            series="delay",
            x_scale=1e6,
            y_scale=1e6,
            identity=True,
        ),
    ),
)


@pytest.fixture
def demo_job(monkeypatch: pytest.MonkeyPatch) -> JobType:
    monkeypatch.setitem(REGISTRY, DEMO.name, DEMO)
    return DEMO


def _user(name: str, staff: bool = False) -> User:
    return User.objects.create_user(name, password=f"{name}-password-1", is_staff=staff)


def _sweep(user: User, grid: dict, repetitions: int = 1, fixed: dict | None = None) -> Sweep:
    spec = {
        "experiment": {"name": "links"},
        "job_type": DEMO.name,
        "grid": grid,
        "fixed": fixed or {},
        "repetitions": repetitions,
    }
    return create_sweep(spec, user)


def _finish(sweep: Sweep, goodput: dict[tuple[str, int], float], seconds: float = 2.0) -> None:
    """Mark trials succeeded with a goodput per (rate as written, repetition), as a worker would."""
    now = timezone.now()
    for t in sweep.trials.all():
        t.status = "succeeded"
        t.attempts = 1
        t.host_name = "labhost"
        t.started_at = now - timedelta(seconds=seconds)
        t.finished_at = now
        t.save()
        SummaryValue.objects.create(
            trial=t, name="goodput_bps", value=goodput[(t.params["rate"], t.repetition)]
        )


def test_it_sends_anonymous_visitors_to_the_login_page(client: Client) -> None:
    r = client.get("/")
    assert r.status_code == 302
    assert r["Location"].startswith("/accounts/login/?next=/")
    page = client.get(r["Location"])
    assert page.status_code == 200
    assert b'name="username"' in page.content and b'name="password"' in page.content


def test_a_researcher_logs_in_through_the_form_and_sees_the_experiment_list(
    client: Client, alice: User
) -> None:
    r = client.post("/accounts/login/", {"username": "alice", "password": "alice-password-1"}, follow=True)
    assert r.status_code == 200
    assert b"<h1>Experiments</h1>" in r.content


def test_it_refuses_a_logged_in_user_who_is_not_a_researcher(client_for, alice, charlie, demo_job) -> None:
    sweep = _sweep(alice, {"rate": ["1mbit"]})
    c = client_for(charlie)
    for url in ("/", f"/sweeps/{sweep.pk}/", "/sweeps/new/", f"/sweeps/{sweep.pk}/export/summaries.csv"):
        assert c.get(url).status_code == 403, url


def test_bob_cannot_see_anything_of_alices_sweep(
    client_for, alice, bob, demo_job, settings, tmp_path
) -> None:
    settings.MEDIA_ROOT = tmp_path
    sweep = _sweep(alice, {"rate": ["1mbit", "2mbit"]})
    trial = sweep.trials.first()
    art = Artifact(trial=trial, kind="log", name="run.log", size=5, sha256="0" * 64)
    art.file.save("run.log", ContentFile(b"hello"), save=True)
    urls = [
        f"/experiments/{sweep.experiment_id}/",
        f"/sweeps/{sweep.pk}/",
        f"/api/sweeps/{sweep.pk}/",  # what the page polls for progress
        f"/sweeps/{sweep.pk}/trials/",
        f"/sweeps/{sweep.pk}/chart.json?preset=goodput",
        f"/sweeps/{sweep.pk}/export/summaries.csv",
        f"/sweeps/{sweep.pk}/export/samples.csv",
        f"/trials/{trial.pk}/",
        f"/artifacts/{art.pk}/download/",
    ]
    as_bob = client_for(bob)
    for url in urls:
        assert as_bob.get(url).status_code == 404, url
    assert as_bob.post(f"/sweeps/{sweep.pk}/cancel/").status_code == 404
    assert b"links" not in as_bob.get("/").content
    assert f'href="/sweeps/{sweep.pk}/"' in client_for(alice).get("/").content.decode()  # recent sweeps
    # Alice herself reaches every one of them, and staff do too.
    as_alice = client_for(alice)
    for url in urls:
        assert as_alice.get(url).status_code == 200, url
    staff = client_for(_user("dash_staff", staff=True))
    assert staff.get(f"/sweeps/{sweep.pk}/").status_code == 200


def test_the_form_shows_each_parameter_with_unit_bounds_and_default(client_for, alice, demo_job) -> None:
    r = client_for(alice).get("/sweeps/new/?job_type=dash_demo")
    html = r.content.decode()
    assert r.status_code == 200
    assert "rate: values to sweep" in html and "delay: fixed value" in html
    assert "bit/s" in html and "8kbit/s … 10gbit/s" in html  # bounds of params.Rate()
    assert "0ms … 1s" in html  # Duration(hi=1.0)
    assert "bottleneck rate" in html


def _form(**extra: str) -> dict[str, str]:
    data = {
        "job_type": "dash_demo",
        "experiment": "",
        "new_experiment": "paths",
        "name": "first",
        "repetitions": "2",
        "order": "grid",
        "seed": "",
        "grid_rate": "1mbit, 10mbit",
        "fixed_rate": "",
        "grid_delay": "",
        "fixed_delay": "5ms",
    }
    data.update(extra)
    return data


def test_it_creates_a_sweep_from_the_form_with_the_same_service_as_the_api(
    client_for, alice, demo_job
) -> None:
    r = client_for(alice).post("/sweeps/new/", _form())
    sweep = Sweep.objects.get(experiment__owner=alice)
    assert r.status_code == 302 and r["Location"] == f"/sweeps/{sweep.pk}/"
    assert sweep.grid == {"rate": ["1mbit", "10mbit"]} and sweep.fixed == {"delay": "5ms"}
    assert sweep.trials.count() == 4
    assert sorted(t.resolved["rate"] for t in sweep.trials.all()) == [1e6, 1e6, 1e7, 1e7]


def test_an_out_of_bounds_value_is_shown_next_to_its_field_naming_the_bound_and_nothing_is_created(
    client_for, alice, demo_job
) -> None:
    r = client_for(alice).post("/sweeps/new/", _form(grid_rate="1mbit, 20gbit, fast", fixed_delay="3s"))
    html = r.content.decode()
    assert r.status_code == 400
    assert "Nothing was created" in html
    # The message sits in the error list tied to the rate input and names the value and the bound.
    assert 'id="id_grid_rate_errors"' in html
    rate_errors = html.split('id="id_grid_rate_errors"')[1].split("</ul>")[0]
    assert "value &#x27;20gbit&#x27;: must be at most 10gbit/s" in rate_errors
    assert "value &#x27;fast&#x27;: cannot read" in rate_errors
    delay_errors = html.split('id="id_fixed_delay_errors"')[1].split("</ul>")[0]
    assert "at most 1s" in delay_errors
    assert not Experiment.objects.exists() and not Sweep.objects.exists()


def test_it_asks_for_an_experiment_when_none_is_chosen_or_named(client_for, alice, demo_job) -> None:
    r = client_for(alice).post("/sweeps/new/", _form(new_experiment=""))
    assert r.status_code == 400
    assert "Choose an experiment or name a new one." in r.content.decode()
    assert not Sweep.objects.exists()


def test_a_required_parameter_left_empty_is_reported_on_its_row(client_for, alice, demo_job) -> None:
    r = client_for(alice).post("/sweeps/new/", _form(grid_rate="", grid_delay="5ms, 10ms", fixed_delay=""))
    html = r.content.decode()
    assert r.status_code == 400
    assert "is required by job type" in html.split('id="id_grid_rate_errors"')[1].split("</ul>")[0]


def test_the_chart_shows_the_mean_and_the_student_t_interval_per_point(client_for, alice, demo_job) -> None:
    sweep = _sweep(alice, {"rate": ["1mbit", "10mbit"]}, repetitions=3, fixed={"delay": "5ms"})
    _finish(
        sweep,
        {
            ("1mbit", 0): 0.9e6,
            ("1mbit", 1): 1.0e6,
            ("1mbit", 2): 0.8e6,
            ("10mbit", 0): 9e6,
            ("10mbit", 1): 9e6,
        }
        | {("10mbit", 2): 9e6},
    )
    data = client_for(alice).get(f"/sweeps/{sweep.pk}/chart.json?preset=goodput").json()
    assert data["identity"] is True and data["x_scale"] == 1e6
    (series,) = data["series"]
    assert series["label"] == "delay = 5ms"
    low, high = series["points"]
    assert low["x"] == 1e6 and low["n"] == 3
    assert low["mean"] == pytest.approx(0.9e6)
    half = T_975_DF2 * 0.1e6 / math.sqrt(3)  # s = 0.1e6 for 0.9, 1.0, 0.8
    assert low["ci_low"] == pytest.approx(0.9e6 - half) and low["ci_high"] == pytest.approx(0.9e6 + half)
    assert high["mean"] == pytest.approx(9e6) and high["ci_low"] == pytest.approx(9e6)


def test_a_point_from_a_single_run_has_no_interval_and_failed_trials_do_not_count(
    client_for, alice, demo_job
) -> None:
    sweep = _sweep(alice, {"rate": ["1mbit"]}, repetitions=2)
    _finish(sweep, {("1mbit", 0): 1e6, ("1mbit", 1): 5e6})
    failed = sweep.trials.get(repetition=1)
    failed.status = "failed"
    failed.error = "iperf3 exited 1"
    failed.save()
    url = f"/sweeps/{sweep.pk}/chart.json?y=goodput_bps&x=rate&log_x=on"
    data = client_for(alice).get(url).json()
    (point,) = data["series"][0]["points"]
    assert point["n"] == 1 and point["mean"] == 1e6
    assert point["ci_low"] is None and point["ci_high"] is None
    assert data["log_x"] is True and data["log_y"] is False
    assert data["x_label"] == "Rate (Mbit/s)" and data["y_label"] == "Goodput (Mbit/s)"


def test_the_custom_chart_splits_series_by_another_swept_parameter(client_for, alice, demo_job) -> None:
    sweep = _sweep(alice, {"rate": ["1mbit", "2mbit"], "delay": ["10ms", "50ms"]})
    now = timezone.now()
    for t in sweep.trials.all():
        sweep.trials.filter(pk=t.pk).update(status="succeeded", started_at=now, finished_at=now)
        SummaryValue.objects.create(
            trial=t, name="goodput_bps", value=t.resolved["rate"] - t.resolved["delay"]
        )
    data = client_for(alice).get(f"/sweeps/{sweep.pk}/chart.json?y=goodput_bps&x=rate&series=delay").json()
    assert [s["label"] for s in data["series"]] == ["delay = 10ms", "delay = 50ms"]
    assert [p["x"] for p in data["series"][1]["points"]] == [1e6, 2e6]
    assert data["series"][1]["points"][0]["mean"] == pytest.approx(1e6 - 0.05)


def test_the_chart_rejects_an_unknown_metric_naming_the_choices(client_for, alice, demo_job) -> None:
    sweep = _sweep(alice, {"rate": ["1mbit"]})
    r = client_for(alice).get(f"/sweeps/{sweep.pk}/chart.json?y=nope&x=rate")
    assert r.status_code == 400
    assert "goodput_bps" in r.json()["errors"]["y"]


def test_the_summaries_csv_has_one_row_per_trial_with_parameters_and_metrics(
    client_for, alice, demo_job
) -> None:
    sweep = _sweep(alice, {"rate": ["1mbit", "10mbit"]}, fixed={"delay": "5ms"})
    _finish(sweep, {("1mbit", 0): 0.95e6, ("10mbit", 0): 9.4e6})
    t = sweep.trials.get(params__rate="10mbit")
    SummaryValue.objects.create(trial=t, name="rtt_s", value=0.0101)
    r = client_for(alice).get(f"/sweeps/{sweep.pk}/export/summaries.csv")
    assert r.status_code == 200 and r["Content-Type"].startswith("text/csv") and r.streaming
    rows = list(csv.DictReader(io.StringIO(b"".join(r.streaming_content).decode())))
    assert len(rows) == 2
    assert list(rows[0])[:5] == ["trial_id", "index", "rate", "delay", "repetition"]
    by_rate = {row["rate"]: row for row in rows}
    assert by_rate["10mbit"]["goodput_bps"] == "9400000.0" and by_rate["10mbit"]["rtt_s"] == "0.0101"
    assert by_rate["1mbit"]["rtt_s"] == "" and by_rate["1mbit"]["delay"] == "5ms"
    assert by_rate["1mbit"]["status"] == "succeeded"


def test_the_samples_csv_has_one_row_per_sample_with_every_value_key(client_for, alice, demo_job) -> None:
    sweep = _sweep(alice, {"rate": ["1mbit", "10mbit"]})
    t1, t2 = sweep.trials.order_by("index")
    Sample.objects.create(trial=t1, kind="update", index=0, values={"T": 0.5, "X": 1000})
    Sample.objects.create(trial=t1, kind="update", index=1, values={"T": 0.4, "X": 900})
    Sample.objects.create(trial=t2, kind="update", index=0, values={"T": 0.1, "rate": 8e4})
    r = client_for(alice).get(f"/sweeps/{sweep.pk}/export/samples.csv")
    rows = list(csv.reader(io.StringIO(b"".join(r.streaming_content).decode())))
    assert rows[0] == ["trial_id", "rate", "repetition", "kind", "index", "T", "X", "rate"]
    assert rows[1:] == [
        [str(t1.pk), "1mbit", "0", "update", "0", "0.5", "1000", ""],
        [str(t1.pk), "1mbit", "0", "update", "1", "0.4", "900", ""],
        [str(t2.pk), "10mbit", "0", "update", "0", "0.1", "", "80000.0"],
    ]


def test_the_sweep_page_shows_progress_and_polls_the_api_with_the_same_numbers(
    client_for, alice, demo_job
) -> None:
    sweep = _sweep(alice, {"rate": ["1mbit", "2mbit", "3mbit"]})
    c = client_for(alice)
    page = c.get(f"/sweeps/{sweep.pk}/").content.decode()
    assert 'data-field="done">0<' in page and 'data-field="total">3<' in page
    assert "no live worker" in page  # why nothing runs: no host has sent a heartbeat
    assert f'data-progress-url="/api/sweeps/{sweep.pk}/progress/"' in page
    first, second, _ = sweep.trials.order_by("index")
    _finish_one(first, "succeeded")
    _finish_one(second, "failed")
    page = c.get(f"/sweeps/{sweep.pk}/").content.decode()
    assert 'data-field="done">2<' in page and 'data-field="failed">1<' in page
    assert 'data-field="succeeded">1<' in page and 'data-field="waiting">1<' in page
    # The fields sweep.js reads from the API (session login, as in the browser).
    p = c.get(f"/api/sweeps/{sweep.pk}/progress/").json()
    assert (p["total"], p["done"], p["counts"]["failed"], p["counts"]["pending"]) == (3, 2, 1, 1)
    assert {"eta_s", "blocked", "cancelled"} <= set(p)
    assert p == c.get(f"/api/sweeps/{sweep.pk}/").json()["progress"]


def test_the_polled_progress_is_shared_for_the_configured_seconds_and_the_detail_is_exact(
    client_for, alice, bob, demo_job, settings
) -> None:
    settings.QOELAB_PROGRESS_CACHE_S = 300
    sweep = _sweep(alice, {"rate": ["1mbit", "2mbit"]})
    c = client_for(alice)
    assert c.get(f"/api/sweeps/{sweep.pk}/progress/").json()["done"] == 0
    _finish_one(sweep.trials.order_by("index").first(), "succeeded")
    assert c.get(f"/api/sweeps/{sweep.pk}/progress/").json()["done"] == 0  # the shared answer
    assert c.get(f"/api/sweeps/{sweep.pk}/").json()["progress"]["done"] == 1
    # The access check is never shared: another researcher's poll is refused, cached or not.
    assert client_for(bob).get(f"/api/sweeps/{sweep.pk}/progress/").status_code == 404
    settings.QOELAB_PROGRESS_CACHE_S = 0
    assert c.get(f"/api/sweeps/{sweep.pk}/progress/").json()["done"] == 1


def _finish_one(trial, status: str) -> None:
    now = timezone.now()
    type(trial).objects.filter(pk=trial.pk).update(
        status=status,
        started_at=now - timedelta(seconds=3),
        finished_at=now,
        error="boom" if status == "failed" else "",
    )


def test_cancel_stops_waiting_trials_and_the_sweep_reads_cancelled(client_for, alice, demo_job) -> None:
    sweep = _sweep(alice, {"rate": ["1mbit", "2mbit"]})
    c = client_for(alice)
    page = c.get(f"/sweeps/{sweep.pk}/").content.decode()
    assert 'id="cancel-sweep"' in page
    r = c.post(f"/sweeps/{sweep.pk}/cancel/", follow=True)
    page = r.content.decode()
    assert "2 waiting trials stopped" in page
    assert 'data-field="cancelled">2<' in page and 'data-state="cancelled"' in page
    assert 'id="cancel-sweep"' not in page
    assert set(sweep.trials.values_list("status", flat=True)) == {"cancelled"}


def test_the_trial_page_shows_summary_error_and_artifact_download(
    client_for, alice, demo_job, settings, tmp_path
) -> None:
    settings.MEDIA_ROOT = tmp_path
    sweep = _sweep(alice, {"rate": ["1mbit"]})
    trial = sweep.trials.get()
    _finish_one(trial, "failed")
    SummaryValue.objects.create(trial=trial, name="goodput_bps", value=123456.0)
    art = Artifact(trial=trial, kind="pcap", name="link.pcap", size=4, sha256="ab" * 32)
    art.file.save("link.pcap", ContentFile(b"\xd4\xc3\xb2\xa1"), save=True)
    c = client_for(alice)
    html = c.get(f"/trials/{trial.pk}/").content.decode()
    assert "boom" in html and "Goodput" in html and "123,456" in html
    assert f'href="/artifacts/{art.pk}/download/"' in html
    r = c.get(f"/artifacts/{art.pk}/download/")
    assert r.status_code == 200 and b"".join(r.streaming_content) == b"\xd4\xc3\xb2\xa1"
    assert 'attachment; filename="link.pcap"' in r["Content-Disposition"]


def test_the_trial_page_says_where_the_server_ran_and_under_which_accelerator(
    client_for, alice, demo_job
) -> None:
    sweep = _sweep(alice, {"rate": ["1mbit", "2mbit"]})
    vm_trial, ns_trial = sweep.trials.order_by("index")
    _finish_one(vm_trial, "succeeded")
    _finish_one(ns_trial, "succeeded")
    reason = "KVM unusable (KVM guest printed nothing within 8 s); falling back to TCG"
    type(vm_trial).objects.filter(pk=vm_trial.pk).update(
        provenance={
            "server": "vm",
            "vm": {"server": "vm", "accel": "tcg", "accel_reason": reason, "start": "snapshot",
                   "restore_s": 3.01, "boot_to_ready_s": 9.23, "snapshot_error": None},
        }
    )  # fmt: skip
    type(ns_trial).objects.filter(pk=ns_trial.pk).update(provenance={"server": "namespace"})
    c = client_for(alice)
    vm_page = c.get(f"/trials/{vm_trial.pk}/").content.decode()
    line = vm_page.split('data-field="server-side">', 1)[1].split("</dd>", 1)[0]
    assert line.startswith(f"QEMU guest under TCG ({reason})"), line
    assert "saved snapshot (restore 3.01 s)" in line and "first page on screen after 9.23 s" in line
    ns_page = c.get(f"/trials/{ns_trial.pk}/").content.decode()
    assert 'data-field="server-side">namespace desktop' in ns_page
    _finish_one(sweep.trials.create(index=9, params={"rate": "3mbit"}, resolved={}), "succeeded")
    plain = c.get(f"/trials/{sweep.trials.get(index=9).pk}/").content.decode()
    assert 'data-field="server-side"' not in plain  # job types without a server say nothing


def test_the_trial_page_says_which_tcp_both_namespaces_ran(client_for, alice, demo_job) -> None:
    sweep = _sweep(alice, {"rate": ["1mbit", "2mbit"]})
    new, old = sweep.trials.order_by("index")
    _finish_one(new, "succeeded")
    _finish_one(old, "succeeded")
    read = {"cc": "cubic", "sack": True, "rmem_max": 6291456, "wmem_max": 4194304, "rto_min_ms": 200,
            "rto_min_source": "kernel default"}  # fmt: skip
    tcp = {"requested": {"cc": "cubic"}, "client": read, "server": read, **read}
    type(new).objects.filter(pk=new.pk).update(link={"link": {"tcp": tcp}, "ok": True})
    type(old).objects.filter(pk=old.pk).update(link={"link": {"backend": "userspace"}, "ok": True})
    c = client_for(alice)
    page = c.get(f"/trials/{new.pk}/").content.decode()
    line = page.split('data-field="tcp">', 1)[1].split("</dd>", 1)[0]
    assert line.startswith("cubic, SACK on, buffer ceilings rmem 6,144 KiB / wmem 4,096 KiB"), line
    assert "rto_min 200 ms (kernel default)" in line
    assert "not recorded" in c.get(f"/trials/{old.pk}/").content.decode()


def test_the_trial_page_says_whether_the_link_was_verified_in_full(client_for, alice, demo_job) -> None:
    sweep = _sweep(alice, {"rate": ["1mbit", "2mbit"]})
    full, short = sweep.trials.order_by("index")
    _finish_one(full, "succeeded")
    _finish_one(short, "succeeded")
    type(full).objects.filter(pk=full.pk).update(
        link={"mode": "full", "ok": True, "measured": {"rtt_ms": 20.1, "tcp_down_bps": 9.5e6}}
    )
    reused = {"host": "lab-1", "age_s": 600.0, "measured": {"tcp_down_bps": 9.5e6}}
    type(short).objects.filter(pk=short.pk).update(
        link={"mode": "short", "ok": True, "measured": {"rtt_ms": 20.4}, "method": {"ping_count": 10},
              "reused": reused}
    )  # fmt: skip
    c = client_for(alice)
    page = c.get(f"/trials/{full.pk}/").content.decode()
    assert "in full on this trial (TCP each way, pings, UDP loss probes): within tolerance" in page
    page = c.get(f"/trials/{short.pk}/").content.decode()
    line = page.split('<p class="verification">', 1)[1].split("</p>", 1)[0]
    assert line == (
        "short check on this trial (10 pings, RTT 20.4 ms): within tolerance; rates and loss from the "
        "full verification of this condition on lab-1, 10 min earlier"
    ), line


def test_the_sweep_page_warns_when_guests_ran_under_tcg(client_for, alice, demo_job) -> None:
    sweep = _sweep(alice, {"rate": ["1mbit", "2mbit", "3mbit"]})
    c = client_for(alice)
    assert 'data-field="tcg-caveat"' not in c.get(f"/sweeps/{sweep.pk}/").content.decode()
    first, second, third = sweep.trials.order_by("index")
    type(first).objects.filter(pk=first.pk).update(provenance={"server": "vm", "vm": {"accel": "tcg"}})
    type(second).objects.filter(pk=second.pk).update(provenance={"server": "vm", "vm": {"accel": "kvm"}})
    type(third).objects.filter(pk=third.pk).update(provenance={"server": "namespace"})
    page = c.get(f"/sweeps/{sweep.pk}/").content.decode()
    assert 'data-field="tcg-caveat">1 of this sweep&#x27;s 2 VM-mode trials ran their guest under TCG' in page


def test_a_chart_never_pools_trials_that_differ_in_a_parameter_it_does_not_show(
    client_for, alice, demo_job
) -> None:
    # The custom chart shows rate only; delay is swept too, so each delay keeps its own series
    # (as server: namespace vs vm does in an rd_qoe sweep of both modes).
    sweep = _sweep(alice, {"rate": ["1mbit"], "delay": ["10ms", "50ms"]})
    now = timezone.now()
    for t in sweep.trials.all():
        sweep.trials.filter(pk=t.pk).update(status="succeeded", started_at=now, finished_at=now)
        SummaryValue.objects.create(
            trial=t, name="goodput_bps", value=1e6 if t.params["delay"] == "10ms" else 5e5
        )
    data = client_for(alice).get(f"/sweeps/{sweep.pk}/chart.json?y=goodput_bps&x=rate").json()
    assert [s["label"] for s in data["series"]] == ["delay = 10ms", "delay = 50ms"]
    assert [s["points"][0]["mean"] for s in data["series"]] == [1e6, 5e5]
    assert all(s["points"][0]["n"] == 1 for s in data["series"])


def test_the_custom_chart_offers_a_numeric_parameter_as_x_first(client_for, alice, demo_job, monkeypatch):
    # A grid written protocol-first: x must still default to the rate (a category cannot be an axis).
    from pydantic import create_model

    params = create_model("P", __base__=DemoParams, kind=(str, "a"))
    monkeypatch.setitem(REGISTRY, DEMO.name, dataclasses.replace(DEMO, params=params))
    sweep = _sweep(alice, {"kind": ["a", "b"], "rate": ["1mbit", "2mbit"]})
    page = client_for(alice).get(f"/sweeps/{sweep.pk}/").content.decode()
    x_select = page[page.index('<select id="chart-x"') :]
    x_select = x_select[: x_select.index("</select>")]
    assert x_select.index('value="rate"') < x_select.index('value="kind"')
    series = page[page.index('name="series"') :]
    assert '<option value="kind" selected>' in series[: series.index("</select>")]


def test_recent_sweeps_are_the_newest_first_with_cancelled_trials_counted_as_such(
    demo_job, alice, client_for
):
    """Issue 33: the home page listed the 10 oldest sweeps, oldest first, and called a sweep whose
    trials were cancelled "finished"."""
    sweeps = [_sweep(alice, {"rate": ["1mbit", "2mbit", "3mbit"]}) for _ in range(12)]
    newest = sweeps[-1]
    newest.trials.filter(index__gte=1).update(status="cancelled")
    newest.trials.filter(index=0).update(status="succeeded")
    page = client_for(alice).get("/").content.decode()
    table = page.split('aria-label="Recent sweeps"', 1)[1].split("</table>", 1)[0]
    shown = [int(chunk.split("/", 1)[0]) for chunk in table.split('href="/sweeps/')[1:]]
    assert shown == [s.pk for s in reversed(sweeps)][:10]
    first_row = table.split("<tbody>", 1)[1].split("</tr>", 1)[0]
    assert "3 / 3 ended" in first_row and "2 cancelled" in first_row and "finished" not in first_row
