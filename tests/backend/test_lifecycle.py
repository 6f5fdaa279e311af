"""Lifecycle (issue 15): delete behind a confirmation that names what goes (rows and artifact files),
the refusals with their reasons, archive / unarchive in pages and API, clone a sweep into the form,
re-run a sweep's failed trials."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from django.core.files.base import ContentFile

from experiments import lifecycle
from experiments.choices import TrialStatus
from experiments.models import Experiment, IllegalTransition, Sweep, Trial
from ratings import campaigns, invitations
from ratings.choices import CampaignStatus
from ratings.models import Campaign, Condition, Evaluator, Rating
from results.models import Artifact, SummaryValue

pytestmark = pytest.mark.django_db


def add_file(trial: Trial, name: str, data: bytes, kind: str = "video") -> Artifact:
    """An artifact stored the way the upload API stores one (file under MEDIA_ROOT, row with its size)."""
    artifact = Artifact(trial=trial, attempt=1, kind=kind, name=name, size=len(data), sha256="0" * 64)
    artifact.file.save(name, ContentFile(data), save=False)
    artifact.save()
    return artifact


def on_disk(artifact: Artifact) -> Path:
    return Path(artifact.file.path)


def count(html: str, what: str) -> int:
    m = re.search(rf'data-count="{what}"[^>]*>(\d+)<', html)
    assert m, f"no count of {what} in the page"
    return int(m.group(1))


def fingerprint(html: str) -> str:
    m = re.search(r'name="expect" value="([^"]*)"', html)
    assert m, "the confirmation has no delete form"
    return m.group(1)


def fail(trial: Trial, host, error: str = "iperf3 exited 1") -> Trial:
    trial.mark_queued(host)
    trial.mark_running(host)
    trial.mark_failed(error, host_id=host.pk)
    return trial


@pytest.fixture
def lab(alice, sweep_of):
    """Alice's sweep (2 trials, 3 files of 10 + 20 + 30 bytes) and a second sweep with its own file."""
    sweep = sweep_of(name="first")
    t1, t2 = sweep.trials.order_by("index")
    files = [add_file(t1, "rec.webm", b"r" * 10), add_file(t1, "reference-rec.webm", b"f" * 20)]
    files.append(add_file(t2, "capture.pcap", b"p" * 30, kind="pcap"))
    other = sweep_of({"rate": ["5mbit"]}, name="second")
    other_file = add_file(other.trials.get(), "other.webm", b"o" * 7)
    return {"sweep": sweep, "files": files, "other": other, "other_file": other_file}


def campaign_showing(owner, recording: Artifact, reference: Artifact, name: str = "panel") -> Campaign:
    """A campaign by hand whose condition shows the given recordings (no sweep link)."""
    return campaigns.create_campaign(
        owner,
        name=name,
        conditions=[
            {
                "label": "a",
                "params": {"protocol": "vnc", "rate": "1mbit"},
                "recording": recording,
                "reference": reference,
            },
        ],  # fmt: skip
        seed=1,
    )


def rate(campaign: Campaign, n: int = 1) -> None:
    [(evaluator, _token)] = invitations.invite(campaign, count=1)
    cond = campaign.conditions.first()
    for i in range(n):
        Rating.objects.create(evaluator=evaluator, condition=cond, aspect=f"a{i}", score=3)


# --- delete: the confirmation --------------------------------------------------------------------


def test_the_sweep_confirmation_lists_trials_artifacts_bytes_and_the_campaigns_that_go(
    alice, lab, client_for
):
    sweep, (rec, ref, _pcap) = lab["sweep"], lab["files"]
    campaign = campaign_showing(alice, rec, ref, name="uses first")
    r = client_for(alice).get(f"/sweeps/{sweep.pk}/delete/")
    assert r.status_code == 200
    html = r.content.decode()
    assert count(html, "sweeps") == 1
    assert count(html, "trials") == 2
    assert count(html, "artifacts") == 3  # the other sweep's file is not this sweep's
    assert count(html, "bytes") == 60
    assert '(<span data-count="bytes">60</span> bytes) deleted from storage' in html
    assert count(html, "campaigns") == 1 and f'data-campaign="{campaign.pk}"' in html and "uses first" in html
    assert count(html, "ratings") == 0
    assert 'id="confirm-delete"' in html and 'id="delete-refusals"' not in html
    # Nothing went on GET.
    assert Trial.objects.filter(sweep=sweep).count() == 2 and all(on_disk(a).exists() for a in lab["files"])


def test_the_experiment_confirmation_counts_every_sweep(alice, lab, client_for):
    r = client_for(alice).get(f"/experiments/{lab['sweep'].experiment_id}/delete/")
    html = r.content.decode()
    assert r.status_code == 200
    assert count(html, "sweeps") == 2 and "first" in html and "second" in html
    assert count(html, "trials") == 3
    assert count(html, "artifacts") == 4 and count(html, "bytes") == 67


def test_deleting_a_sweep_removes_its_rows_and_files_and_leaves_the_others(
    alice, lab, client_for, django_capture_on_commit_callbacks
):
    sweep, files = lab["sweep"], lab["files"]
    campaign = campaign_showing(alice, files[0], files[1])
    SummaryValue.objects.create(trial=sweep.trials.first(), name="tcp_down_bps", value=1.0)
    folder = on_disk(files[0]).parents[2]  # artifacts/sweep-N
    assert folder.name == f"sweep-{sweep.pk}" and folder.is_dir()
    c = client_for(alice)
    expect = fingerprint(c.get(f"/sweeps/{sweep.pk}/delete/").content.decode())
    with django_capture_on_commit_callbacks(execute=True):
        r = c.post(f"/sweeps/{sweep.pk}/delete/", {"expect": expect}, follow=True)
    assert r.redirect_chain[-1][0] == f"/experiments/{sweep.experiment_id}/"
    text = r.content.decode()
    assert "Deleted sweep &#x27;first&#x27;: 2 trials, 3 artifact files (60 bytes)" in text
    assert not Sweep.objects.filter(pk=sweep.pk).exists()
    assert not Trial.objects.filter(sweep_id=sweep.pk).exists()
    assert not Artifact.objects.filter(pk__in=[a.pk for a in files]).exists()
    assert not SummaryValue.objects.exists()
    assert not Campaign.objects.filter(pk=campaign.pk).exists()  # it showed the sweep's recordings
    assert not any(on_disk(a).exists() for a in files), "artifact files left on disk"
    assert not folder.exists(), "the sweep's emptied artifact folder is left"
    # The experiment and its other sweep, with its file, stay.
    assert Experiment.objects.filter(pk=sweep.experiment_id).exists()
    assert on_disk(lab["other_file"]).exists() and Trial.objects.filter(sweep=lab["other"]).count() == 1


def test_deleting_an_experiment_removes_all_its_sweeps_and_files(alice, lab, client_for):
    exp_id = lab["sweep"].experiment_id
    c = client_for(alice)
    expect = fingerprint(c.get(f"/experiments/{exp_id}/delete/").content.decode())
    r = c.post(f"/experiments/{exp_id}/delete/", {"expect": expect})
    assert r.status_code == 302 and r.url == "/"
    assert not Experiment.objects.filter(pk=exp_id).exists() and not Sweep.objects.exists()
    assert not Artifact.objects.exists()
    assert not any(on_disk(a).exists() for a in [*lab["files"], lab["other_file"]])


def test_a_post_after_what_goes_changed_deletes_nothing(alice, lab, client_for):
    sweep = lab["sweep"]
    c = client_for(alice)
    expect = fingerprint(c.get(f"/sweeps/{sweep.pk}/delete/").content.decode())
    late = add_file(sweep.trials.first(), "late.log", b"l" * 5, kind="log")  # arrives after the GET
    r = c.post(f"/sweeps/{sweep.pk}/delete/", {"expect": expect})
    assert r.status_code == 409
    html = r.content.decode()
    assert "Nothing was deleted" in html and "has changed since the confirmation was shown" in html
    assert count(html, "artifacts") == 4  # the page shows the list as it is now
    assert Sweep.objects.filter(pk=sweep.pk).exists() and on_disk(late).exists()


# --- delete: refusals ------------------------------------------------------------------------------


def test_a_sweep_with_queued_or_running_trials_is_refused_with_the_reason(alice, lab, client_for, make_host):
    sweep = lab["sweep"]
    host = make_host("h1", {"netem": True}, concurrency=2).host
    t1, t2 = sweep.trials.order_by("index")
    t1.mark_queued(host)
    t2.mark_queued(host)
    t2.mark_running(host)
    c = client_for(alice)
    r = c.get(f"/sweeps/{sweep.pk}/delete/")
    assert r.status_code == 200
    html = r.content.decode()
    assert "2 trials of this sweep are queued or running: cancel the sweep first" in html
    assert 'id="confirm-delete"' not in html
    # A forged POST is refused too, and nothing goes.
    plan = lifecycle.plan_sweep_delete(sweep, alice)
    r = c.post(f"/sweeps/{sweep.pk}/delete/", {"expect": plan.fingerprint})
    assert r.status_code == 409 and "cancel the sweep first" in r.content.decode()
    assert Trial.objects.filter(sweep=sweep).count() == 2 and all(on_disk(a).exists() for a in lab["files"])
    # The experiment names the sweep in the way.
    r = c.get(f"/experiments/{sweep.experiment_id}/delete/")
    assert (
        r.status_code == 200
        and "Sweep &#x27;first&#x27; has 2 trials queued or running" in r.content.decode()
    )


def test_pending_trials_do_not_block_and_go_with_the_sweep(alice, lab):
    sweep = lab["sweep"]
    assert sweep.trials.filter(status=TrialStatus.PENDING).count() == 2
    report = lifecycle.delete(lifecycle.plan_sweep_delete(sweep, alice), alice)
    assert report.trials == 2 and not Trial.objects.filter(sweep_id=sweep.pk).exists()


def test_a_sweep_whose_recordings_a_rated_campaign_uses_is_refused_naming_it_until_that_goes(
    alice, lab, client_for
):
    sweep, (rec, ref, _) = lab["sweep"], lab["files"]
    campaign = campaign_showing(alice, rec, ref, name="tuesday panel")
    rate(campaign, n=3)
    c = client_for(alice)
    r = c.get(f"/sweeps/{sweep.pk}/delete/")
    assert r.status_code == 200
    html = r.content.decode()
    assert (
        f"Rating campaign &#x27;tuesday panel&#x27; (#{campaign.pk}) uses this sweep&#x27;s recordings and "
        "has 3 ratings: delete that campaign first" in html
    )
    assert count(html, "ratings") == 3 and 'id="confirm-delete"' not in html
    with pytest.raises(lifecycle.Refused, match="tuesday panel"):
        lifecycle.delete(lifecycle.plan_sweep_delete(sweep, alice), alice)
    assert Rating.objects.count() == 3 and on_disk(rec).exists()

    # Delete the campaign first (its own confirmation), then the sweep can go.
    page = c.get(f"/campaigns/{campaign.pk}/delete/").content.decode()
    assert count(page, "ratings") == 3
    c.post(f"/campaigns/{campaign.pk}/delete/", {"expect": fingerprint(page)})
    assert not Campaign.objects.exists() and on_disk(rec).exists()  # the recordings were the sweep's
    r = c.get(f"/sweeps/{sweep.pk}/delete/")
    assert r.status_code == 200 and count(r.content.decode(), "campaigns") == 0


def test_an_open_campaign_using_the_recordings_blocks_the_sweep(alice, lab):
    rec, ref, _ = lab["files"]
    campaign = campaign_showing(alice, rec, ref, name="live now")
    Campaign.objects.filter(pk=campaign.pk).update(status=CampaignStatus.OPEN)
    plan = lifecycle.plan_sweep_delete(lab["sweep"], alice)
    assert plan.refusals == [
        f"Rating campaign 'live now' (#{campaign.pk}) uses this sweep's recordings and is open: "
        "close or delete it first."
    ]


def test_a_campaign_built_from_the_sweep_goes_with_it(alice, tmp_path):
    from ratings import demo

    sweep = demo.demo_sweep(alice, [{"protocol": "vnc", "rate": "1mbit", "delay": "10ms"}])
    campaign = campaigns.create_campaign(alice, name="from sweep", sweep=sweep, seed=1)  # no recordings yet
    plan = lifecycle.plan_sweep_delete(sweep, alice)
    assert [c.id for c in plan.campaigns] == [campaign.pk] and plan.allowed
    lifecycle.delete(plan, alice)
    assert not Campaign.objects.filter(pk=campaign.pk).exists()


def test_deleting_is_owner_only_and_staff_may_act_on_all(alice, bob, lab, client_for):
    sweep = lab["sweep"]
    rec, ref, _ = lab["files"]
    campaign = campaign_showing(alice, rec, ref)
    c = client_for(bob)
    for url in (
        f"/sweeps/{sweep.pk}/delete/",
        f"/experiments/{sweep.experiment_id}/delete/",
        f"/campaigns/{campaign.pk}/delete/",
    ):
        assert c.get(url).status_code == 404, url
        assert c.post(url, {"expect": "x"}).status_code == 404, url
    assert Sweep.objects.filter(pk=sweep.pk).exists() and Campaign.objects.filter(pk=campaign.pk).exists()
    bob.is_staff = True
    bob.save()
    page = c.get(f"/sweeps/{sweep.pk}/delete/").content.decode()
    assert c.post(f"/sweeps/{sweep.pk}/delete/", {"expect": fingerprint(page)}).status_code == 302
    assert not Sweep.objects.filter(pk=sweep.pk).exists()


def test_a_campaign_of_someone_else_blocks_a_non_staff_owner(alice, bob, lab):
    rec, ref, _ = lab["files"]
    campaign_showing(bob, rec, ref, name="bob's")  # staff can attach anyone's recordings
    plan = lifecycle.plan_sweep_delete(lab["sweep"], alice)
    assert any(
        "of bob uses this sweep's recordings: only its owner can delete it" in r for r in plan.refusals
    )


# --- delete: campaigns -----------------------------------------------------------------------------


def test_the_campaign_confirmation_lists_what_goes_and_keeps_the_recordings(alice, lab, client_for):
    rec, ref, _ = lab["files"]
    campaign = campaign_showing(alice, rec, ref, name="panel")
    rate(campaign, n=2)
    n_conditions = campaign.conditions.count()
    c = client_for(alice)
    r = c.get(f"/campaigns/{campaign.pk}/delete/")
    assert r.status_code == 200
    html = r.content.decode()
    assert count(html, "conditions") == n_conditions and count(html, "evaluators") == 1
    assert count(html, "ratings") == 2
    assert "recordings it shows stay" in html
    r = c.post(f"/campaigns/{campaign.pk}/delete/", {"expect": fingerprint(html)}, follow=True)
    assert r.redirect_chain[-1][0] == "/campaigns/"
    assert "Deleted rating campaign &#x27;panel&#x27;" in r.content.decode()
    assert not Campaign.objects.exists() and not Condition.objects.exists() and not Evaluator.objects.exists()
    assert not Rating.objects.exists()
    assert Artifact.objects.filter(pk__in=[rec.pk, ref.pk]).count() == 2 and on_disk(rec).exists()


def test_an_open_campaign_is_not_deleted(alice, lab, client_for, api_client_for):
    rec, ref, _ = lab["files"]
    campaign = campaign_showing(alice, rec, ref)
    Campaign.objects.filter(pk=campaign.pk).update(status=CampaignStatus.OPEN)
    r = client_for(alice).get(f"/campaigns/{campaign.pk}/delete/")
    assert r.status_code == 200 and "The campaign is open: close it first" in r.content.decode()
    assert 'id="confirm-delete"' not in r.content.decode()
    r = client_for(alice).post(f"/campaigns/{campaign.pk}/delete/", {"expect": "anything"})
    assert r.status_code == 409 and "Nothing was deleted" in r.content.decode()
    resp = api_client_for(alice).delete(f"/api/campaigns/{campaign.pk}/")
    assert resp.status_code == 409 and "close it first" in resp.json()["detail"]
    assert Campaign.objects.filter(pk=campaign.pk).exists()


# --- delete: the API -------------------------------------------------------------------------------


def test_the_api_deletes_a_sweep_with_its_files_and_refuses_with_the_reason(
    alice, lab, api_client_for, make_host
):
    c = api_client_for(alice)
    other = lab["other"]
    host = make_host("h1", {"netem": True}).host
    other.trials.get().mark_queued(host)
    resp = c.delete(f"/api/sweeps/{other.pk}/")
    assert resp.status_code == 409 and "1 trial of this sweep is queued or running" in resp.json()["detail"]
    assert on_disk(lab["other_file"]).exists()

    rec, ref, _ = lab["files"]
    campaign = campaign_showing(alice, rec, ref, name="rated")
    rate(campaign)
    resp = c.delete(f"/api/experiments/{lab['sweep'].experiment_id}/")
    assert resp.status_code == 409 and "'rated'" in resp.json()["detail"]

    sweep = lab["sweep"]
    campaign.delete()
    assert c.delete(f"/api/sweeps/{sweep.pk}/").status_code == 204
    assert not Sweep.objects.filter(pk=sweep.pk).exists()
    assert not any(on_disk(a).exists() for a in lab["files"])
    assert api_client_for(lab["other"].experiment.owner).delete(f"/api/sweeps/{sweep.pk}/").status_code == 404


# --- archive ---------------------------------------------------------------------------------------


def test_an_archived_experiment_and_its_sweeps_leave_the_list_but_stay_reachable(alice, sweep_of, client_for):
    kept = sweep_of(experiment_name="kept", name="kept sweep")
    old = sweep_of(experiment_name="old", name="old sweep")
    c = client_for(alice)
    r = c.post(f"/experiments/{old.experiment_id}/archive/", {"archived": "1"}, follow=True)
    assert "archived" in r.content.decode()
    assert Experiment.objects.get(pk=old.experiment_id).archived_at is not None

    home = c.get("/").content.decode()
    assert f"/experiments/{kept.experiment_id}/" in home and f"/sweeps/{kept.pk}/" in home
    assert f"/experiments/{old.experiment_id}/" not in home and f"/sweeps/{old.pk}/" not in home
    assert "Show archived (1)" in home

    shown = c.get("/?archived=1").content.decode()
    assert f"/experiments/{old.experiment_id}/" in shown and f"/sweeps/{old.pk}/" in shown
    assert f"/experiments/{kept.experiment_id}/" not in shown
    both = c.get("/?archived=all").content.decode()
    assert f"/experiments/{old.experiment_id}/" in both and f"/experiments/{kept.experiment_id}/" in both
    assert c.get("/?archived=maybe").status_code == 400

    assert c.get(f"/experiments/{old.experiment_id}/").status_code == 200  # reachable by URL
    assert c.get(f"/sweeps/{old.pk}/").status_code == 200
    assert "Unarchive" in c.get(f"/experiments/{old.experiment_id}/").content.decode()

    c.post(f"/experiments/{old.experiment_id}/archive/", {"archived": "0"})
    assert f"/experiments/{old.experiment_id}/" in c.get("/").content.decode()


def test_archiving_is_owner_only(alice, bob, sweep_of, client_for):
    sweep = sweep_of()
    assert client_for(bob).post(f"/experiments/{sweep.experiment_id}/archive/").status_code == 404
    assert Experiment.objects.get(pk=sweep.experiment_id).archived_at is None


def test_an_archived_campaign_leaves_the_campaign_list(alice, client_for):
    campaigns.create_campaign(alice, name="kept campaign", conditions=[{"params": {"protocol": "vnc"}}])
    old = campaigns.create_campaign(alice, name="old campaign", conditions=[{"params": {"protocol": "vnc"}}])
    c = client_for(alice)
    r = c.post(f"/campaigns/{old.pk}/archive/", {"archived": "1"}, follow=True)
    assert "Campaign &#x27;old campaign&#x27; archived" in r.content.decode()
    page = c.get("/campaigns/").content.decode()
    assert "kept campaign" in page and "old campaign" not in page and "Show archived (1)" in page
    page = c.get("/campaigns/?archived=1").content.decode()
    assert "old campaign" in page and "kept campaign" not in page
    assert c.get(f"/campaigns/{old.pk}/").status_code == 200
    assert c.get("/campaigns/?archived=yes-please").status_code == 400
    c.post(f"/campaigns/{old.pk}/archive/", {"archived": "0"})
    assert "old campaign" in c.get("/campaigns/").content.decode()


def test_the_api_lists_hide_archived_rows_unless_asked(alice, sweep_of, api_client_for):
    kept = sweep_of(experiment_name="kept")
    old = sweep_of(experiment_name="old")
    cmp_kept = campaigns.create_campaign(alice, name="k", conditions=[{"params": {"protocol": "vnc"}}])
    cmp_old = campaigns.create_campaign(alice, name="o", conditions=[{"params": {"protocol": "vnc"}}])
    c = api_client_for(alice)
    resp = c.post(f"/api/experiments/{old.experiment_id}/archive/")
    assert resp.status_code == 200 and resp.json()["archived_at"]
    resp = c.post(f"/api/campaigns/{cmp_old.pk}/archive/")
    assert resp.status_code == 200 and resp.json()["archived_at"]

    def ids(url: str) -> set[int]:
        resp = c.get(url)
        assert resp.status_code == 200, resp.content
        return {row["id"] for row in resp.json()["results"]}

    assert ids("/api/experiments/") == {kept.experiment_id}
    assert ids("/api/experiments/?archived=true") == {old.experiment_id}
    assert ids("/api/experiments/?archived=all") == {kept.experiment_id, old.experiment_id}
    assert ids("/api/sweeps/") == {kept.pk}
    assert ids("/api/sweeps/?archived=true") == {old.pk}
    assert ids("/api/campaigns/") == {cmp_kept.pk}
    assert ids("/api/campaigns/?archived=true") == {cmp_old.pk}
    for url in ("/api/experiments/", "/api/sweeps/", "/api/campaigns/"):
        resp = c.get(url, {"archived": "sometimes"})
        assert resp.status_code == 400 and resp.json()["errors"][0]["field"] == "archived", url
    # Reachable by id.
    assert c.get(f"/api/experiments/{old.experiment_id}/").status_code == 200
    assert c.get(f"/api/sweeps/{old.pk}/").status_code == 200
    assert c.get(f"/api/campaigns/{cmp_old.pk}/").status_code == 200
    assert c.post(f"/api/experiments/{old.experiment_id}/unarchive/").json()["archived_at"] is None
    assert ids("/api/experiments/") == {kept.experiment_id, old.experiment_id}


# --- clone a sweep into the form -------------------------------------------------------------------


def test_clone_prefills_the_form_and_creates_nothing_until_submitted(alice, sweep_of, client_for):
    sweep = sweep_of(
        {"rate": ["1mbit", "10mbit"], "delay": ["0ms", "50ms"]},
        name="original",
        fixed={"loss": "0.5%", "protocol": "spice"},
        repetitions=3,
        order="random",
        seed=42,
    )
    before = Sweep.objects.count()
    c = client_for(alice)
    r = c.get(f"/sweeps/new/?from={sweep.pk}")
    assert r.status_code == 200
    form = r.context["form"]
    assert form["job_type"].value() == "t_link"
    assert form["experiment"].value() == sweep.experiment_id
    assert form["grid_rate"].value() == "1mbit, 10mbit"
    assert form["grid_delay"].value() == "0ms, 50ms"
    assert form["fixed_loss"].value() == "0.5%" and form["fixed_protocol"].value() == "spice"
    assert form["repetitions"].value() == 3 and form["order"].value() == "random"
    html = r.content.decode()
    assert 'value="1mbit, 10mbit"' in html and 'id="clone-notice"' in html
    assert "enter 42 to repeat the original order" in html
    assert Sweep.objects.count() == before  # nothing is created by opening the form

    # Submitting the (edited) form makes a new sweep like the original.
    data = {k: form[k].value() for k in form.fields if form[k].value() not in (None, "")}
    data.update(name="clone", grid_rate="1mbit, 10mbit, 20mbit")
    r = c.post(f"/sweeps/new/?from={sweep.pk}", data)
    assert r.status_code == 302, r.content.decode()[:2000]
    new = Sweep.objects.get(name="clone")
    assert new.pk != sweep.pk and new.experiment_id == sweep.experiment_id
    assert new.grid == {"rate": ["1mbit", "10mbit", "20mbit"], "delay": ["0ms", "50ms"]}
    assert new.fixed == {"loss": "0.5%", "protocol": "spice"}
    assert (new.repetitions, new.order, new.trial_count) == (3, "random", 18)


def test_clone_of_a_sweep_made_with_typed_values_writes_them_as_text(alice, sweep_of, client_for):
    sweep = sweep_of({"rate": [1e6, 2.5e6]}, fixed={"delay": 0.01})
    form = client_for(alice).get(f"/sweeps/new/?from={sweep.pk}").context["form"]
    assert form["grid_rate"].value() == "1000000.0, 2500000.0" and form["fixed_delay"].value() == "0.01"


def test_clone_is_owner_only_and_checks_its_argument(alice, bob, sweep_of, client_for):
    sweep = sweep_of()
    assert client_for(bob).get(f"/sweeps/new/?from={sweep.pk}").status_code == 404
    assert client_for(alice).get("/sweeps/new/?from=abc").status_code == 400
    assert client_for(alice).get("/sweeps/new/?from=999999").status_code == 404


def test_the_sweep_page_offers_clone_rerun_and_delete(alice, sweep_of, client_for, make_host):
    sweep = sweep_of()
    c = client_for(alice)
    html = c.get(f"/sweeps/{sweep.pk}/").content.decode()
    assert f'href="/sweeps/new/?from={sweep.pk}"' in html and f'href="/sweeps/{sweep.pk}/delete/"' in html
    # Nothing failed: the form is there for sweep.js to show when a trial fails, but hidden.
    assert re.search(r'<form id="rerun-failed"[^>]* hidden>', html)
    fail(sweep.trials.first(), make_host("h1", {"netem": True}).host)
    html = c.get(f"/sweeps/{sweep.pk}/").content.decode()
    assert re.search(r'<form id="rerun-failed"[^>]*"\s*>', html)  # shown
    text = re.sub(r"<[^>]+>", "", html.split('id="rerun-failed"', 1)[1].split("</form>", 1)[0])
    assert "Re-run 1 failed trial\n" in text + "\n"


# --- re-run failed trials --------------------------------------------------------------------------


def test_rerun_moves_only_failed_trials_back_to_pending_with_fresh_attempts(alice, sweep_of, make_host):
    from experiments.services import tick

    sweep = sweep_of({"rate": ["1mbit", "2mbit", "3mbit", "4mbit"]})
    host = make_host("h1", {"netem": True}, concurrency=4).host
    t0, t1, t2, t3 = sweep.trials.order_by("index")
    fail(t0, host, "iperf3 exited 1")
    fail(t1, host, "link check failed")
    t2.mark_queued(host)
    t2.mark_running(host)
    t2.mark_succeeded(host_id=host.pk)
    # t3 stays pending.

    assert lifecycle.rerun_failed(sweep, alice) == 2
    t0.refresh_from_db()
    assert t0.status == TrialStatus.PENDING and t0.error == "" and t0.host_id is None
    assert t0.attempts == 1 and t0.max_attempts == 1 + 2  # t_link's max_attempts is 2
    assert [e["reason"] for e in t0.attempt_log] == ["iperf3 exited 1", "re-run requested by alice"]
    assert t0.attempt_log[-1]["kind"] == "rerun" and t0.attempt_log[-1]["error"] == "iperf3 exited 1"
    statuses = dict(sweep.trials.values_list("index", "status"))
    assert statuses == {0: "pending", 1: "pending", 2: "succeeded", 3: "pending"}

    # The scheduler dispatches them again; a new run counts as attempt 2.
    sent = []
    tick(send=lambda trial_id, host_name: sent.append(trial_id) or f"task-{trial_id}")
    assert {t0.pk, t1.pk} <= set(sent)
    t0.refresh_from_db()
    t0.mark_running(host)
    assert t0.attempts == 2
    assert lifecycle.rerun_failed(sweep, alice) == 0  # nothing failed now


def test_rerun_is_refused_for_a_cancelled_sweep(alice, sweep_of, make_host):
    from experiments.services import cancel_sweep

    sweep = sweep_of()
    trial = fail(sweep.trials.first(), make_host("h1", {"netem": True}).host)
    cancel_sweep(sweep)
    with pytest.raises(
        lifecycle.Refused, match="The sweep was cancelled .*: its failed trials are not run again"
    ):
        lifecycle.rerun_failed(sweep, alice)
    trial.refresh_from_db()
    assert trial.status == TrialStatus.FAILED


def test_rerun_from_the_page_and_the_api(alice, bob, sweep_of, client_for, api_client_for, make_host):
    from experiments.services import cancel_sweep

    sweep = sweep_of()
    host = make_host("h1", {"netem": True}, concurrency=2).host
    for t in sweep.trials.all():
        fail(t, host)
    r = client_for(alice).post(f"/sweeps/{sweep.pk}/rerun-failed/", follow=True)
    assert "2 failed trials re-queued with fresh attempts" in r.content.decode()
    assert sweep.trials.filter(status=TrialStatus.PENDING).count() == 2

    for t in sweep.trials.all():
        t.mark_queued(host)
        t.mark_running(host)
        t.mark_failed("again", host_id=host.pk)
    c = api_client_for(alice)
    assert api_client_for(bob).post(f"/api/sweeps/{sweep.pk}/rerun_failed/").status_code == 404
    resp = c.post(f"/api/sweeps/{sweep.pk}/rerun_failed/")
    assert resp.status_code == 200 and resp.json()["requeued"] == 2
    assert resp.json()["sweep"]["progress"]["counts"]["pending"] == 2
    assert c.post(f"/api/sweeps/{sweep.pk}/rerun_failed/").json()["requeued"] == 0

    cancel_sweep(sweep)
    resp = c.post(f"/api/sweeps/{sweep.pk}/rerun_failed/")
    assert resp.status_code == 409 and "cancelled" in resp.json()["detail"]
    r = client_for(alice).post(f"/sweeps/{sweep.pk}/rerun-failed/", follow=True)
    assert "its failed trials are not run again" in r.content.decode()


def test_trial_rerun_leaves_every_other_state_and_a_stale_instance_alone(sweep_of, make_host):
    host = make_host("h1", {"netem": True}).host
    trial = sweep_of().trials.first()
    with pytest.raises(IllegalTransition):
        trial.rerun("again", 2)  # pending
    fail(trial, host)
    stale = Trial.objects.get(pk=trial.pk)
    trial.rerun("first re-run", 2)
    trial.mark_queued(host)
    trial.mark_running(host)
    trial.mark_failed("second failure", host_id=host.pk)
    with pytest.raises(IllegalTransition):
        stale.rerun("from an old page", 2)  # it failed again since the instance was read
    trial.refresh_from_db()
    assert trial.status == TrialStatus.FAILED and trial.error == "second failure"
