"""Uploaded link traces (issue 37): checked when they arrive (a bad line is refused naming it), named
in sweeps as ``upload:N`` only by their owner, and fetched only by the worker running a trial that
names them; the Link traces page lists them beside the library and uploads through a form."""

from __future__ import annotations

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from experiments.models import LinkTrace, Trial
from qoelab.emulation import traces

pytestmark = pytest.mark.django_db

GOOD = "".join(f"{ms}\n" for ms in (1, 1, 2, 5, 8, 10))  # 6 opportunities in 10 ms: 7.2 Mbit/s


def spec(trace: str, field: str = "link_trace") -> dict:
    return {
        "experiment": {"name": "over my trace"},
        "job_type": "link_check",
        "grid": {"delay": ["10ms"]},
        "fixed": {field: trace, "duration": "2s"},
    }


def test_an_upload_is_checked_and_described(alice, api_client_for) -> None:
    api = api_client_for(alice)
    resp = api.post("/api/link-traces/", {"name": "train.down", "text": GOOD}, format="json")
    assert resp.status_code == 201, resp.content
    body = resp.json()
    assert body["ref"] == f"upload:{body['id']}" and body["name"] == "train.down"
    assert body["lines"] == 6 and body["period_s"] == 0.01
    assert body["mean_bps"] == pytest.approx(6 * 1500 * 8 / 0.01)
    assert body["sha256"] == traces.parse(GOOD).sha256
    # The same text again is the same trace, not a second one.
    again = api.post("/api/link-traces/", {"name": "other-name", "text": GOOD}, format="json")
    assert again.status_code == 200 and again.json()["id"] == body["id"]
    assert [t["ref"] for t in api.get("/api/link-traces/").json()] == [body["ref"]]
    library = api.get("/api/link-traces/library/").json()
    assert "Verizon-LTE-short.down" in {t["ref"] for t in library}


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("", "empty"),
        ("1\n3\n2\n", "line 3: 2 comes after 3"),
        ("1\nfast\n", "line 2: 'fast' is not a whole number"),
        ("1\n-4\n", "line 2: '-4' is negative"),
        ("0\n0\n", "last line is 0 ms"),
    ],
)
def test_a_bad_trace_is_refused_naming_the_line_and_nothing_is_kept(
    alice, api_client_for, text, words
) -> None:
    resp = api_client_for(alice).post("/api/link-traces/", {"name": "bad.trace", "text": text}, format="json")
    assert resp.status_code == 400, resp.content
    errors = {e["field"]: e["message"] for e in resp.json()["errors"]}
    assert words in errors["text"] and errors["text"].startswith("bad.trace"), errors
    assert not LinkTrace.objects.exists()


def test_a_name_must_be_a_file_name(alice, api_client_for) -> None:
    resp = api_client_for(alice).post("/api/link-traces/", {"name": "../etc/x", "text": GOOD}, format="json")
    assert resp.status_code == 400
    assert "file name" in {e["field"]: e["message"] for e in resp.json()["errors"]}["name"]


def test_a_sweep_names_only_its_owners_uploads(alice, bob, api_client_for) -> None:
    theirs = api_client_for(bob).post("/api/link-traces/", {"name": "b.trace", "text": GOOD}, format="json")
    api = api_client_for(alice)
    for ref in (theirs.json()["ref"], "upload:999999"):
        resp = api.post("/api/sweeps/", spec(ref), format="json")
        assert resp.status_code == 400, resp.content
        errors = {e["field"]: e["message"] for e in resp.json()["errors"]}
        assert "no uploaded trace" in errors.get("fixed.link_trace", ""), errors
    resp = api.post("/api/sweeps/", spec("upload:0"), format="json")
    assert resp.status_code == 400 and "upload:N" in resp.content.decode()
    mine = api.post("/api/link-traces/", {"name": "a.trace", "text": GOOD}, format="json").json()
    resp = api.post("/api/sweeps/", spec(mine["ref"], "up_link_trace"), format="json")
    assert resp.status_code == 201, resp.content
    trial = Trial.objects.get(sweep_id=resp.json()["id"])
    assert trial.params["up_link_trace"] == mine["ref"]
    assert "userspace_link" in trial.requires


def test_only_the_running_trial_that_names_it_fetches_the_text(alice, api_client_for, make_host) -> None:
    api = api_client_for(alice)
    mine = api.post("/api/link-traces/", {"name": "a.trace", "text": GOOD}, format="json").json()
    other = api.post("/api/link-traces/", {"name": "b.trace", "text": GOOD + "12\n"}, format="json").json()
    trial = Trial.objects.get(
        sweep_id=api.post("/api/sweeps/", spec(mine["ref"]), format="json").json()["id"]
    )
    lab = make_host("h1", {"netns": True, "userspace_link": True, "link": True})
    url = f"/api/hosts/trials/{trial.pk}/link-traces/{mine['id']}/"
    assert lab.client.get(url).status_code == 409  # not running on this host yet
    trial.mark_queued(lab.host)
    assert lab.client.post(f"/api/hosts/trials/{trial.pk}/claim/", {}, format="json").status_code == 200
    got = lab.client.get(url)
    assert got.status_code == 200 and got.content.decode() == GOOD
    assert got["X-Trace-Name"] == "a.trace" and got["X-Trace-Sha256"] == mine["sha256"]
    refused = lab.client.get(f"/api/hosts/trials/{trial.pk}/link-traces/{other['id']}/")
    assert refused.status_code == 404 and "does not name" in refused.json()["detail"]


def test_the_page_uploads_and_lists(alice, client) -> None:
    client.force_login(alice)
    page = client.get("/traces/")
    assert page.status_code == 200 and b"Verizon-LTE-short.down" in page.content
    bad = client.post("/traces/", {"file": SimpleUploadedFile("slow.trace", b"5\n4\n")})
    assert bad.status_code == 400
    assert b"slow.trace: line 2: 4 comes after 5" in bad.content and not LinkTrace.objects.exists()
    ok = client.post("/traces/", {"file": SimpleUploadedFile("fast.trace", GOOD.encode())}, follow=True)
    kept = LinkTrace.objects.get()
    assert ok.status_code == 200 and kept.name == "fast.trace" and kept.owner == alice
    assert f"upload:{kept.pk}".encode() in ok.content
