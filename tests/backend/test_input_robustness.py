"""No input crashes a request (issue 14, finding 3): each of these answered 500 and must answer 400
naming the field. The rule lives in qoelab_web.parsers / middleware / pagination (docs/security.md).
"""

from __future__ import annotations

import json

import pytest

from experiments.choices import TrialStatus
from experiments.models import Experiment, Sweep

pytestmark = pytest.mark.django_db

LISTS = ["/api/experiments/", "/api/sweeps/", "/api/trials/", "/api/campaigns/"]
BEYOND_BIGINT = str(2**63 + 1)


def fields(resp) -> set[str]:
    return {e["field"] for e in resp.json()["errors"]}


def post_raw(client, url: str, text: str):
    """POST a JSON text as written (escapes such as \\ud800 reach the parser unchanged)."""
    return client.post(url, data=text.encode(), content_type="application/json")


@pytest.fixture
def researcher(alice):
    from rest_framework.test import APIClient

    client = APIClient()
    client.force_authenticate(alice)
    return client


@pytest.mark.parametrize("url", LISTS)
@pytest.mark.parametrize("param", ["limit", "offset"])
def test_a_page_size_or_offset_beyond_bigint_is_refused_naming_it(researcher, url, param):
    resp = researcher.get(url, {param: BEYOND_BIGINT})
    assert resp.status_code == 400, resp.content
    assert fields(resp) == {param}


@pytest.mark.parametrize("url", LISTS)
def test_a_list_page_is_capped_at_max_limit(researcher, url):
    assert researcher.get(url, {"limit": "1000"}).status_code == 200
    resp = researcher.get(url, {"limit": "1001"})
    assert resp.status_code == 400 and "1000" in resp.json()["detail"]


@pytest.mark.parametrize("value", ["abc", "0", "-1", "1.5"])
def test_a_malformed_limit_is_refused_rather_than_ignored(researcher, value):
    resp = researcher.get("/api/experiments/", {"limit": value})
    assert resp.status_code == 400 and fields(resp) == {"limit"}


@pytest.mark.parametrize(
    "url,param", [("/api/experiments/", "job_type"), ("/api/trials/", "status"), ("/api/sweeps/", "x")]
)
def test_a_nul_in_a_query_filter_is_refused_naming_it(researcher, url, param):
    resp = researcher.get(url, {param: "vnc\x00"})
    assert resp.status_code == 400, resp.content
    assert fields(resp) == {param}


@pytest.mark.parametrize("field", ["name", "description"])
def test_a_nul_in_an_experiment_name_or_description_is_refused(researcher, field):
    body = {"name": "exp", "description": "", "job_type": "t_link", field: "a\x00b"}
    resp = researcher.post("/api/experiments/", body, format="json")
    assert resp.status_code == 400 and fields(resp) == {field}
    assert not Experiment.objects.exists()


def test_a_nul_in_a_form_encoded_experiment_is_refused(researcher):
    resp = researcher.post("/api/experiments/", {"name": "a\x00b", "job_type": "t_link"})
    assert resp.status_code == 400 and fields(resp) == {"name"}


SWEEP = {"experiment": {"name": "e", "description": ""}, "job_type": "t_link", "grid": {"rate": ["1mbit"]}}


@pytest.mark.parametrize(
    "override,field",
    [
        ({"name": "s\x00"}, "name"),
        ({"experiment": {"name": "e\x00", "description": ""}}, "experiment.name"),
        ({"experiment": {"name": "e", "description": "\x00"}}, "experiment.description"),
        ({"grid": {"rate": ["1mbit\x00"]}}, "grid.rate[0]"),
        ({"fixed": {"protocol": "vnc\x00"}}, "fixed.protocol"),
    ],
)
def test_a_nul_anywhere_in_a_sweep_spec_is_refused_naming_the_path(researcher, override, field):
    resp = researcher.post("/api/sweeps/", {**SWEEP, **override}, format="json")
    assert resp.status_code == 400, resp.content
    assert fields(resp) == {field}
    assert not Sweep.objects.exists()


def test_a_lone_surrogate_in_a_sweep_name_is_refused(researcher):
    text = json.dumps(SWEEP)[:-1] + ', "name": "x\\ud800y"}'
    resp = post_raw(researcher, "/api/sweeps/", text)
    assert resp.status_code == 400, resp.content
    assert fields(resp) == {"name"} and "surrogate" in resp.json()["detail"]


def test_a_number_that_parses_as_infinity_is_refused(researcher):
    text = json.dumps(SWEEP)[:-1] + ', "seed": 1e400}'
    resp = post_raw(researcher, "/api/sweeps/", text)
    assert resp.status_code == 400 and fields(resp) == {"seed"}


def test_a_nul_in_a_campaign_conditions_params_is_refused(researcher):
    body = {"name": "c", "conditions": [{"label": "a", "params": {"protocol": "vnc\x00"}}]}
    resp = researcher.post("/api/campaigns/", body, format="json")
    assert resp.status_code == 400, resp.content
    assert fields(resp) == {"conditions[0].params.protocol"}


def test_a_nul_in_a_heartbeat_capability_key_is_refused(make_host):
    resp = make_host("lab-1").heartbeat(capabilities={"netem\x00": True})
    assert resp.status_code == 400, resp.content
    assert fields(resp) == {"capabilities.netem\\u0000"}


DEEP = "[" * 100_000 + "]" * 100_000


def test_json_nested_100000_deep_is_refused_before_parsing(researcher):
    resp = post_raw(researcher, "/api/sweeps/", DEEP)
    assert resp.status_code == 400 and "nested" in resp.json()["detail"]


def test_json_nested_100000_deep_is_refused_by_the_unauthenticated_token_endpoint(client):
    resp = client.post("/api/auth/token/", data=DEEP, content_type="application/json")
    assert resp.status_code == 400 and "nested" in resp.json()["detail"]


def test_a_nul_in_a_login_name_is_refused_by_the_token_endpoint(client):
    resp = client.post(
        "/api/auth/token/", {"username": "a\x00", "password": "x"}, content_type="application/json"
    )
    assert resp.status_code == 400 and fields(resp) == {"username"}


def test_brackets_inside_strings_do_not_count_as_nesting():
    from qoelab_web.parsers import MAX_DEPTH, json_depth_exceeds

    assert not json_depth_exceeds(json.dumps({"a": "[" * 1000, "b": ['\\"[{' * 100]}).encode())
    assert json_depth_exceeds(("[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1)).encode())
    assert not json_depth_exceeds(("[" * MAX_DEPTH + "]" * MAX_DEPTH).encode())


@pytest.fixture
def running(sweep_of, make_host):
    lab = make_host("h1", {"netem": True})
    trial = sweep_of().trials.order_by("index").first()
    trial.mark_queued(lab.host)
    assert lab.client.post(f"/api/hosts/trials/{trial.pk}/claim/", {}, format="json").status_code == 200
    return trial, lab


def test_a_finish_whose_result_cannot_be_stored_fails_the_trial_with_the_reason(running):
    trial, lab = running
    sample = {"kind": "u", "index": 0, "values": {"k": "\x00"}}
    body = {"status": "succeeded", "result": {"samples": [sample]}}
    resp = lab.client.post(f"/api/hosts/trials/{trial.pk}/finish/", body, format="json")
    assert resp.status_code == 400 and fields(resp) == {"result.samples[0].values.k"}
    trial.refresh_from_db()
    assert trial.status == TrialStatus.FAILED
    assert "could not be stored" in trial.error and "result.samples[0].values.k" in trial.error


def test_an_invalid_finish_body_also_fails_the_trial_rather_than_leaving_it_running(running):
    trial, lab = running
    body = {"status": "succeeded", "result": {"summary": {"not a name": 1.0}}}
    resp = lab.client.post(f"/api/hosts/trials/{trial.pk}/finish/", body, format="json")
    assert resp.status_code == 400
    trial.refresh_from_db()
    assert trial.status == TrialStatus.FAILED and "result.summary" in trial.error


def test_a_bad_finish_for_another_hosts_trial_changes_nothing(running, make_host):
    trial, _ = running
    other = make_host("h2", {"netem": True})
    resp = other.client.post(f"/api/hosts/trials/{trial.pk}/finish/", {"status": "x"}, format="json")
    assert resp.status_code == 400
    trial.refresh_from_db()
    assert trial.status == TrialStatus.RUNNING


@pytest.mark.parametrize(
    "url", ["/api/no-such-thing/", "/api/hosts/trials/-1/claim/", "/api/experiments/1/nope/"]
)
def test_every_api_404_is_json(researcher, url):
    resp = researcher.get(url)
    assert resp.status_code == 404
    assert resp["Content-Type"].startswith("application/json") and resp.json()["detail"]


def test_a_researchers_json_body_over_a_mebibyte_is_refused_and_nothing_stored(researcher):
    """Issue 33: JSON bodies up to 64 MiB were accepted; a 50 MB sweep description was stored."""
    body = {"experiment": {"name": "big", "description": "x" * (2 * 1024**2)}, "job_type": "t_link",
            "grid": {"rate": ["1mbit"]}}  # fmt: skip
    resp = researcher.post("/api/sweeps/", body, format="json")
    assert resp.status_code == 413, resp.content
    assert "at most 1048576" in resp.json()["detail"]
    assert not Experiment.objects.exists() and not Sweep.objects.exists()


def test_a_workers_report_may_be_larger_than_a_researchers_json(running):
    """The worker protocol keeps its own limit: a long trial's samples pass 1 MiB."""
    trial, lab = running
    samples = [{"kind": "update", "index": i, "values": {"T_ms": 1.0, "pad": "x" * 200}} for i in range(8000)]
    body = {"status": "succeeded", "result": {"samples": samples}}
    assert len(json.dumps(body)) > 1024**2
    resp = lab.client.post(f"/api/hosts/trials/{trial.pk}/finish/", body, format="json")
    assert resp.status_code != 413, resp.content


def test_a_form_body_past_the_limit_is_answered_as_json_not_html(alice, client_for, settings):
    """Issue 33: forms under /api/ answered some errors with Django's HTML page."""
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1000
    for resp in (
        client_for(alice).post("/api/experiments/", {"name": "x" * 5000}),
        client_for(alice).post("/api/auth/token/", {"username": "a" * 5000, "password": "b"}),
    ):
        assert resp.status_code == 400 and resp["Content-Type"] == "application/json", resp.content[:200]
        assert "could not be read" in resp.json()["detail"]
