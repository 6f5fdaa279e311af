"""Lifecycle in Debian's Chromium (issue 15): delete behind the confirmation page, clone a sweep into
the form and re-run its failed trials, all as a researcher clicks through them (live server, no worker:
the trials' states are set through the model's own moves).

The pages run under the strict CSP, so any inline script or style would show up as a console error in
``page.qoelab_problems``; the confirmation is a server-rendered page that needs no script at all.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from django.core.files.base import ContentFile
from playwright.sync_api import expect

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


def log_in(page: Any, base: str, user: Any) -> None:
    page.goto(f"{base}/accounts/login/")
    page.get_by_label("Username").fill(user.username)
    page.get_by_label("Password").fill(f"{user.username}-password-1")
    page.get_by_role("button", name="Log in").click()
    page.get_by_role("heading", name="Experiments").wait_for()


def make_sweep(user: Any, **spec: Any) -> Any:
    from experiments.services import create_sweep

    body = {
        "experiment": {"name": spec.pop("experiment", "lifecycle e2e")},
        "job_type": "link_check",
        "grid": {"rate": ["5mbit", "10mbit"]},
        "fixed": {"delay": "5ms", "duration": "1s"},
        "repetitions": 2,
        **spec,
    }
    return create_sweep(body, user)


def add_file(trial: Any, name: str, data: bytes) -> Any:
    from results.models import Artifact

    artifact = Artifact(trial=trial, attempt=1, kind="video", name=name, size=len(data), sha256="0" * 64)
    artifact.file.save(name, ContentFile(data), save=False)
    artifact.save()
    return artifact


def fail(trial: Any, host: Any) -> None:
    trial.mark_queued(host)
    trial.mark_running(host)
    trial.mark_failed("iperf3: unable to connect", host_id=host.pk)


def test_delete_a_sweep_and_an_experiment_behind_their_confirmations(
    live_server: Any, chromium_page: Any, alice: Any, settings: Any, tmp_path: Path, save_screenshot: Any
) -> None:
    from experiments.models import Experiment, Sweep
    from ratings import campaigns, invitations
    from ratings.models import Campaign, Rating

    settings.MEDIA_ROOT = tmp_path / "media"
    sweep = make_sweep(alice, name="to delete")
    keep = make_sweep(alice, name="rated", grid={"rate": ["1mbit"]}, repetitions=1)
    t0 = sweep.trials.order_by("index").first()
    rec, ref = add_file(t0, "session.webm", b"s" * 1500), add_file(t0, "reference-session.webm", b"r" * 500)
    panel = campaigns.create_campaign(
        alice,
        name="unrated panel",
        conditions=[{"params": {"protocol": "vnc"}, "recording": rec, "reference": ref}],
    )
    kept_rec = add_file(keep.trials.get(), "kept.webm", b"k" * 100)
    rated = campaigns.create_campaign(
        alice, name="rated panel", conditions=[{"params": {"protocol": "vnc"}, "recording": kept_rec}]
    )
    [(evaluator, _)] = invitations.invite(rated, count=1)
    Rating.objects.create(evaluator=evaluator, condition=rated.conditions.first(), aspect="quality", score=4)
    files = [Path(a.file.path) for a in (rec, ref)]
    assert all(f.exists() for f in files)

    page = chromium_page
    log_in(page, live_server.url, alice)

    # The sweep: its confirmation names what goes, the POST removes rows and files.
    page.goto(f"{live_server.url}/sweeps/{sweep.pk}/")
    page.get_by_role("link", name="Delete sweep…").click()
    page.get_by_role("heading", name="Delete sweep “to delete”?").wait_for()
    goes = page.locator("#what-goes")
    expect(goes.locator('[data-item="trials"]')).to_contain_text("4 trials")
    expect(goes.locator('[data-item="artifacts"]')).to_contain_text("2 artifacts")
    expect(goes.locator('[data-item="artifacts"]')).to_contain_text("2000 bytes")
    expect(goes.locator('[data-item="campaigns"]')).to_contain_text("1 rating campaign that uses")
    expect(goes.locator('[data-item="campaigns"]')).to_contain_text("unrated panel")
    expect(goes.locator('[data-item="ratings"]')).to_contain_text("0 ratings")
    save_screenshot(page, "sweeps/lifecycle_confirm_delete")
    page.get_by_role("button", name="Delete sweep permanently").click()
    page.wait_for_url(f"{live_server.url}/experiments/{sweep.experiment_id}/")
    expect(page.get_by_role("status")).to_contain_text(
        "Deleted sweep 'to delete': 4 trials, 2 artifact files"
    )
    assert not Sweep.objects.filter(pk=sweep.pk).exists()
    assert not Campaign.objects.filter(pk=panel.pk).exists()
    assert not any(f.exists() for f in files), "artifact files are left on disk"

    # The experiment: refused while a rated campaign uses its recordings, named on the page.
    page.get_by_role("link", name="Delete experiment…").click()
    expect(page.locator("#delete-refusals")).to_contain_text("Rating campaign 'rated panel'")
    expect(page.locator("#delete-refusals")).to_contain_text("has 1 rating: delete that campaign first")
    expect(page.get_by_role("button", name=re.compile("Delete experiment"))).to_have_count(0)
    page.locator("#what-goes").get_by_role("link", name="rated panel").click()

    # Delete that campaign (its own confirmation lists the rating), then the experiment goes.
    page.get_by_role("link", name="Delete campaign…").click()
    expect(page.locator('[data-item="ratings"]')).to_contain_text("1 rating")
    page.get_by_role("button", name="Delete campaign permanently").click()
    page.wait_for_url(f"{live_server.url}/campaigns/")
    expect(page.get_by_role("status")).to_contain_text("Deleted rating campaign 'rated panel'")
    assert Path(kept_rec.file.path).exists()  # the recordings belong to the sweep, not the campaign

    page.goto(f"{live_server.url}/experiments/{keep.experiment_id}/delete/")
    expect(page.locator('[data-item="sweeps"]')).to_contain_text("1 sweep: rated")
    page.get_by_role("button", name="Delete experiment permanently").click()
    page.wait_for_url(f"{live_server.url}/")
    expect(page.get_by_role("status")).to_contain_text("Deleted experiment 'lifecycle e2e'")
    assert not Experiment.objects.exists()
    assert not Path(kept_rec.file.path).exists()
    assert page.qoelab_problems == []


def test_clone_a_sweep_into_the_form_and_rerun_its_failed_trials(
    live_server: Any, chromium_page: Any, alice: Any, make_host: Any, save_screenshot: Any
) -> None:
    from experiments.choices import TrialStatus
    from experiments.models import Sweep

    sweep = make_sweep(alice, name="original", order="random", seed=7)
    # Not live: a live host's kernel would have to offer the form's default TCP congestion control.
    host = make_host("lab-1", {"netns": True, "iperf3": True, "link": True}, concurrency=4, alive=False).host
    first, second, *_ = sweep.trials.order_by("index")
    fail(first, host)
    fail(second, host)
    page = chromium_page
    log_in(page, live_server.url, alice)

    # Clone: the form opens prefilled; nothing exists until it is submitted.
    page.goto(f"{live_server.url}/sweeps/{sweep.pk}/")
    page.get_by_role("link", name="Clone into a new sweep").click()
    page.wait_for_url(re.compile(rf"/sweeps/new/\?from={sweep.pk}$"))
    expect(page.locator("#clone-notice")).to_contain_text("Prefilled from sweep original")
    expect(page.locator("#clone-notice")).to_contain_text("enter 7 to repeat the original order")
    assert page.get_by_label("Job type").input_value() == "link_check"
    assert page.get_by_label("rate: values to sweep", exact=True).input_value() == "5mbit, 10mbit"
    assert page.get_by_label("delay: fixed value", exact=True).input_value() == "5ms"
    assert page.get_by_label("duration: fixed value", exact=True).input_value() == "1s"
    assert page.get_by_label("Repetitions", exact=True).input_value() == "2"
    assert page.get_by_label("Order", exact=True).input_value() == "random"
    assert page.get_by_label("Experiment", exact=True).input_value() == str(sweep.experiment_id)
    assert Sweep.objects.count() == 1
    save_screenshot(page, "sweeps/lifecycle_clone_form")
    page.get_by_label("Sweep name").fill("clone")
    page.get_by_label("rate: values to sweep", exact=True).fill("5mbit, 10mbit, 20mbit")
    page.get_by_role("button", name="Create sweep").click()
    page.get_by_role("heading", name="clone").wait_for()
    clone = Sweep.objects.get(name="clone")
    assert clone.grid == {"rate": ["5mbit", "10mbit", "20mbit"]}
    assert clone.fixed == {"delay": "5ms", "duration": "1s"}
    assert (clone.repetitions, clone.order, clone.trial_count) == (2, "random", 6)

    # Re-run: the original's two failed trials go back to pending, keeping their history.
    page.goto(f"{live_server.url}/sweeps/{sweep.pk}/")
    page.get_by_role("button", name="Re-run 2 failed trials").click()
    page.wait_for_url(f"{live_server.url}/sweeps/{sweep.pk}/")
    expect(page.get_by_role("status").first).to_contain_text("2 failed trials re-queued with fresh attempts")
    expect(page.get_by_role("button", name=re.compile("Re-run"))).to_have_count(0)
    first.refresh_from_db()
    assert first.status == TrialStatus.PENDING and first.max_attempts == 1 + 2
    assert [e.get("kind") for e in first.attempt_log][-1] == "rerun"
    assert sweep.trials.filter(status=TrialStatus.FAILED).count() == 0
    assert page.qoelab_problems == []


def succeed(trial: Any, host: Any) -> None:
    trial.mark_queued(host)
    trial.mark_running(host)
    trial.mark_succeeded(host_id=host.pk)


def test_a_rerun_right_after_the_page_loaded_leaves_the_page_live(
    live_server: Any, chromium_page: Any, alice: Any, make_host: Any, settings: Any
) -> None:
    """Issue 33: clicking Re-run within the progress cache's second of a page load left the new page
    at "finished", Cancel hidden and polling stopped, while the trials ran again. Here the cache keeps
    an answer for a minute, so only dropping it on the re-run can make the page right."""
    settings.QOELAB_PROGRESS_CACHE_S = 60
    sweep = make_sweep(alice, name="finished with failures")
    host = make_host("lab-1", {"netns": True, "iperf3": True, "link": True}, alive=False).host
    trials = list(sweep.trials.order_by("index"))
    for t in trials[:2]:
        fail(t, host)
    for t in trials[2:]:
        succeed(t, host)
    page = chromium_page
    log_in(page, live_server.url, alice)
    progress = re.compile(rf"/api/sweeps/{sweep.pk}/progress/")
    with page.expect_response(progress):  # the page's first poll: "finished" is now in the cache
        page.goto(f"{live_server.url}/sweeps/{sweep.pk}/")
    expect(page.locator("#progress")).to_have_attribute("data-state", "finished")
    expect(page.locator("#cancel-sweep")).to_have_count(0)  # a finished sweep offers no cancel

    page.get_by_role("button", name="Re-run 2 failed trials").click()
    page.wait_for_url(f"{live_server.url}/sweeps/{sweep.pk}/")
    for _ in range(2):  # two polls of the new page (a stale "finished" twice would stop the polling)
        with page.expect_response(progress):
            pass
    expect(page.locator("#progress")).not_to_have_attribute("data-state", "finished")
    expect(page.get_by_role("button", name="Cancel sweep")).to_be_visible()
    expect(page.locator('[data-field="eta"]')).not_to_have_text("finished")
    assert page.qoelab_problems == []


def test_failures_that_come_in_while_the_page_is_open_offer_their_rerun(
    live_server: Any, chromium_page: Any, alice: Any, make_host: Any
) -> None:
    """Issue 33: the Re-run button appeared only after a reload."""
    sweep = make_sweep(alice, name="running")
    host = make_host("lab-1", {"netns": True, "iperf3": True, "link": True}, alive=False).host
    page = chromium_page
    log_in(page, live_server.url, alice)
    page.goto(f"{live_server.url}/sweeps/{sweep.pk}/")
    expect(page.get_by_role("button", name=re.compile("Re-run"))).to_have_count(0)
    first, second, *_ = sweep.trials.order_by("index")
    fail(first, host)
    expect(page.get_by_role("button", name="Re-run 1 failed trial", exact=True)).to_be_visible(timeout=15_000)
    fail(second, host)
    expect(page.get_by_role("button", name="Re-run 2 failed trials")).to_be_visible(timeout=15_000)
    page.get_by_role("button", name="Re-run 2 failed trials").click()
    expect(page.get_by_role("status").first).to_contain_text("2 failed trials re-queued")
    assert page.qoelab_problems == []
