"""The OpenAPI schema tells the truth (issue 14, finding 8): real answers of the cast's calls,
errors included, conform to it in status code, content type and body.
"""

from __future__ import annotations

from typing import Any

import pytest
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

pytestmark = pytest.mark.django_db

CHECKS = [status_code_conformance, content_type_conformance, response_schema_conformance]


@pytest.fixture
def call(api_cast, openapi, wsgi_app):
    """``call(method, path_template, who, expect, **case)``: make the call, check it conforms."""

    def run(method: str, path: str, who: str | None, expect: int, **case: Any) -> Any:
        operation = openapi[path][method]
        c = operation.Case(**case)
        response = c.call(app=wsgi_app, headers=api_cast.headers[who] if who else {})
        assert response.status_code == expect, response.text
        c.validate_response(response, checks=CHECKS)
        return response

    return run


def test_condition_recording_and_reference_are_nullable_and_null_until_attached(openapi, call, api_cast):
    condition = openapi.raw_schema["components"]["schemas"]["Condition"]["properties"]
    assert condition["recording"].get("nullable") and condition["reference"].get("nullable")
    resp = call(
        "GET", "/api/campaigns/{id}/", "researcher", 200, path_parameters={"id": api_cast.campaign.pk}
    )
    assert resp.json()["conditions"][0]["recording"] is None


def test_invite_is_documented_and_answered_as_a_plain_list(openapi, call, api_cast):
    schema = openapi.raw_schema["paths"]["/api/campaigns/{id}/invite/"]["post"]["responses"]["201"]
    assert schema["content"]["application/json"]["schema"]["type"] == "array"
    resp = call(
        "POST",
        "/api/campaigns/{id}/invite/",
        "researcher",
        201,
        path_parameters={"id": api_cast.campaign.pk},
        body={"count": 2},
        media_type="application/json",
    )
    assert isinstance(resp.json(), list) and len(resp.json()) == 2


def test_only_list_actions_document_limit_and_offset(openapi):
    for path, ops in openapi.raw_schema["paths"].items():
        for method, op in ops.items():
            names = {p["name"] for p in op.get("parameters", [])}
            paged = "Paginated" in str(op["responses"].get("200", ""))
            assert ("limit" in names) == paged, f"{method} {path}"


def test_the_researchers_answers_conform(call, api_cast):
    sweep, trial, campaign = api_cast.sweep, api_cast.trial, api_cast.campaign
    for path in ["/api/experiments/", "/api/sweeps/", "/api/trials/", "/api/campaigns/", "/api/hosts/"]:
        call("GET", path, "researcher", 200)
    call("GET", "/api/sweeps/{id}/", "researcher", 200, path_parameters={"id": sweep.pk})
    call("GET", "/api/trials/{id}/", "researcher", 200, path_parameters={"id": trial.pk})
    call("GET", "/api/experiments/{id}/", "researcher", 200, path_parameters={"id": sweep.experiment_id})
    call("GET", "/api/campaigns/{id}/", "researcher", 200, path_parameters={"id": campaign.pk})
    call("GET", "/api/job-types/{name}/", "researcher", 200, path_parameters={"name": "t_link"})


def test_the_error_answers_conform(call, api_cast):
    # 400: a bad page size, a bad body, a NUL in a filter; 403 without credentials; 404 unknown ids
    call("GET", "/api/sweeps/", "researcher", 400, query={"limit": "0"})
    call("GET", "/api/experiments/", "researcher", 400, query={"job_type": "a\x00"})
    call("POST", "/api/sweeps/", "researcher", 400, body={"grid": {}}, media_type="application/json")
    call("GET", "/api/sweeps/", None, 403)
    call("GET", "/api/sweeps/{id}/", "researcher", 404, path_parameters={"id": 999999})
    download = "/api/artifacts/{artifact_id}/download/"
    call("GET", download, "researcher", 404, path_parameters={"artifact_id": 9})
    call("GET", "/api/job-types/{name}/", "researcher", 404, path_parameters={"name": "nope"})
    call("DELETE", "/api/campaigns/{id}/", "researcher", 404, path_parameters={"id": 999999})


def test_the_worker_protocols_answers_conform(call, api_cast, wsgi_app):
    trial = api_cast.trial
    call("POST", "/api/hosts/heartbeat/", "host", 400, body={"name": "lab-1"}, media_type="application/json")
    call("POST", "/api/hosts/heartbeat/", None, 401, body={}, media_type="application/json")
    # not queued for this host yet: 409; unknown trial: 404
    call("POST", "/api/hosts/trials/{trial_id}/claim/", "host", 409, path_parameters={"trial_id": trial.pk})
    call("POST", "/api/hosts/trials/{trial_id}/claim/", "host", 404, path_parameters={"trial_id": 99999})
    trial.mark_queued(api_cast.lab.host)
    call("POST", "/api/hosts/trials/{trial_id}/claim/", "host", 200, path_parameters={"trial_id": trial.pk})
    call(
        "POST",
        "/api/hosts/trials/{trial_id}/finish/",
        "host",
        200,
        path_parameters={"trial_id": trial.pk},
        body={"status": "succeeded", "result": {"summary": {"tcp_down_bps": 1e6}}},
        media_type="application/json",
    )


def test_the_evaluators_answers_conform(call):
    call("GET", "/api/rate/state/", "evaluator", 200)
    call("POST", "/api/rate/screens/", "evaluator", 400, body={}, media_type="application/json")
    call("GET", "/api/rate/state/", None, 401)


def test_an_unknown_api_url_answers_json_404(client):
    for url in ["/api/nope/", "/api/hosts/trials/abc/finish/", "/api/sweeps/1/findings/x/"]:
        resp = client.get(url)
        assert resp.status_code == 404 and resp["Content-Type"] == "application/json", url
        assert "detail" in resp.json()
