"""A rate written with full-width digits is refused by the API, not stored as written (issue 14, 4b).

The rule (docs/security.md, "Spec files (YAML)"): numbers with units are read from ASCII only; the
answer names the field and shows the ASCII form to write instead.
"""

from __future__ import annotations

import pytest

from experiments.models import Sweep, Trial

pytestmark = pytest.mark.django_db


def test_a_full_width_rate_is_a_400_naming_the_point_and_the_ascii_form(alice, api_client_for):
    body = {
        "experiment": {"name": "links"},
        "job_type": "t_link",
        "grid": {"rate": ["1mbit", "１０mbit"]},
        "fixed": {"delay": "１０ms"},
    }
    resp = api_client_for(alice).post("/api/sweeps/", body, format="json")
    assert resp.status_code == 400, resp.content
    errors = {e["field"]: e["message"] for e in resp.json()["errors"]}
    assert errors["grid.rate[1]"] == "'１０mbit' has non-ASCII characters; write '10mbit'"
    assert errors["fixed.delay"] == "'１０ms' has non-ASCII characters; write '10ms'"
    assert not Sweep.objects.exists() and not Trial.objects.exists()


def test_an_experiment_id_written_with_full_width_digits_is_not_an_id(alice, api_client_for):
    client = api_client_for(alice)
    exp = client.post("/api/experiments/", {"name": "links", "job_type": "t_link"}, format="json")
    assert exp.status_code == 201, exp.content
    written = "".join(chr(0xFF10 + int(d)) for d in str(exp.json()["id"]))  # "１" for 1
    resp = client.post("/api/sweeps/", {"experiment": written, "grid": {"rate": ["1mbit"]}}, format="json")
    assert resp.status_code == 400, resp.content
    assert "experiment" in [e["field"] for e in resp.json()["errors"]]
    assert not Sweep.objects.exists()
