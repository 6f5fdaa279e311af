"""thinclient_tcp's ``trace: trial:N``: the sweep is refused unless trial N is the researcher's and has
a capture, and only the worker running a trial that names N may fetch N's capture."""

from __future__ import annotations

import hashlib

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from experiments.models import Trial
from results.services import store_artifact

pytestmark = pytest.mark.django_db

PCAP = bytes.fromhex("d4c3b2a1020004000000000000000000ffff000001000000") + b"\x00" * 40


def _with_capture(trial: Trial) -> None:
    store_artifact(trial, SimpleUploadedFile("capture.pcap", PCAP), "pcap", hashlib.sha256(PCAP).hexdigest())


def spec(trace: str) -> dict:
    return {
        "experiment": {"name": "replay a session"},
        "job_type": "thinclient_tcp",
        "grid": {"limit": ["25000b"]},
        "fixed": {"pairs": 4, "duration": "10s", "trace": trace},
    }


def test_a_named_trial_must_be_yours_and_have_a_capture(alice, bob, sweep_of, api_client_for) -> None:
    mine, theirs = sweep_of().trials.first(), sweep_of(user=bob).trials.first()
    api = api_client_for(alice)
    cases = [
        (f"trial:{mine.pk}", "has no packet capture"),
        (f"trial:{theirs.pk}", f"no trial {theirs.pk} of yours"),
        ("trial:999999", "no trial 999999 of yours"),
        ("/tmp/capture.pcap", "only for a local run"),
        ("trial:abc", "trial:N"),
    ]
    for trace, words in cases:
        resp = api.post("/api/sweeps/", spec(trace), format="json")
        assert resp.status_code == 400, resp.content
        errors = {e["field"]: e["message"] for e in resp.json()["errors"]}
        assert words in errors.get("fixed.trace", ""), errors
    _with_capture(mine)
    resp = api.post("/api/sweeps/", spec(f"trial:{mine.pk}"), format="json")
    assert resp.status_code == 201, resp.content


def test_only_the_running_trial_that_names_it_fetches_the_capture(alice, sweep_of, api_client_for,
                                                                  make_host) -> None:  # fmt: skip
    source, other = sweep_of().trials.order_by("index")[:2]
    _with_capture(source)
    _with_capture(other)
    resp = api_client_for(alice).post("/api/sweeps/", spec(f"trial:{source.pk}"), format="json")
    replay = Trial.objects.get(sweep_id=resp.json()["id"])
    lab = make_host("h1", {"netns": True, "userspace_link": True, "thinclient": True})
    url = f"/api/hosts/trials/{replay.pk}/captures/{source.pk}/"
    assert lab.client.get(url).status_code == 409  # not running on this host yet
    replay.mark_queued(lab.host)
    assert lab.client.post(f"/api/hosts/trials/{replay.pk}/claim/", {}, format="json").status_code == 200
    got = lab.client.get(url)
    assert got.status_code == 200 and b"".join(got.streaming_content) == PCAP
    refused = lab.client.get(f"/api/hosts/trials/{replay.pk}/captures/{other.pk}/")
    assert refused.status_code == 404 and "does not name" in refused.json()["detail"]
    stranger = make_host("h2", {"netns": True})
    assert stranger.client.get(url).status_code == 409
