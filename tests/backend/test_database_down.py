"""A database that stops answering: 503 with Retry-After and the posted fields kept, never a 500."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.db import OperationalError
from django.test import Client

pytestmark = pytest.mark.django_db(transaction=True)


def test_the_api_answers_503_json_with_retry_after_while_the_database_is_down(
    alice: Any, database_refusing: Any
) -> None:
    from accounts.services import issue_token

    token = issue_token(alice)
    c = Client(raise_request_exception=False, HTTP_AUTHORIZATION=f"Token {token}")
    assert c.get("/api/sweeps/").status_code == 200
    with database_refusing():
        down = c.get("/api/sweeps/")
    assert down.status_code == 503 and down["Retry-After"] == "5"
    assert "nothing was saved" in down.json()["detail"]
    assert c.get("/api/sweeps/").status_code == 200  # back as soon as it answers again


def test_a_page_post_gets_a_send_again_form_with_the_same_fields(database_refusing: Any) -> None:
    c = Client(raise_request_exception=False)
    token = "x" * 43  # the shape of an evaluator token; looking it up needs the database
    with database_refusing():
        down = c.post(f"/rate/{token}/", {"action": "rate", "condition": "7", "score_image": "4"})
    page = down.content.decode()
    assert down.status_code == 503 and down["Retry-After"] == "5"
    assert f'<form method="post" action="/rate/{token}/">' in page
    fields = dict(re.findall(r'<input type="hidden" name="([^"]+)" value="([^"]*)">', page))
    assert fields == {"action": "rate", "condition": "7", "score_image": "4"}
    with database_refusing():
        get = c.get(f"/rate/{token}/")
    assert get.status_code == 503 and f'href="/rate/{token}/"' in get.content.decode()


def test_only_database_errors_become_503() -> None:
    from qoelab_web.unavailable import database_down

    try:
        try:
            raise OperationalError("connection refused")
        except OperationalError as inner:
            raise RuntimeError("while rendering") from inner
    except RuntimeError as outer:
        assert database_down(outer)
    assert not database_down(ValueError("a bug"))
    assert not database_down(None)
