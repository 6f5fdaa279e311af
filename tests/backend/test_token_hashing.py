"""Researcher API tokens are stored only as SHA-256; the token endpoint keeps its request and answer."""

from __future__ import annotations

import hashlib
from io import StringIO

import pytest
from django.core.management import call_command
from django.db import connection

pytestmark = pytest.mark.django_db


def _sha(raw: str) -> str:
    return hashlib.sha256(raw.encode()).hexdigest()


def _every_text_value_in_the_database() -> str:
    """Every row of every table, as text: a raw token must be nowhere in it."""
    out = []
    with connection.cursor() as cur:
        for table in connection.introspection.table_names():
            cur.execute(f'SELECT * FROM "{table}"')
            out.extend(str(row) for row in cur.fetchall())
    return "\n".join(out)


def test_the_token_endpoint_answers_a_token_that_is_stored_only_as_its_hash(alice, api_client_for):
    from accounts.models import ApiToken

    resp = api_client_for(None).post(
        "/api/auth/token/", {"username": "alice", "password": "alice-password-1"}, format="json"
    )
    assert resp.status_code == 200 and set(resp.json()) == {"token"}
    raw = resp.json()["token"]
    assert len(raw) >= 40
    assert ApiToken.objects.filter(user=alice, token_hash=_sha(raw)).exists()
    assert raw not in _every_text_value_in_the_database()


def test_a_hashed_token_authenticates_and_a_wrong_one_is_refused(alice, api_client_for):
    from rest_framework.test import APIClient

    raw = (
        api_client_for(None)
        .post("/api/auth/token/", {"username": "alice", "password": "alice-password-1"}, format="json")
        .json()["token"]
    )
    c = APIClient()
    c.credentials(HTTP_AUTHORIZATION=f"Token {raw}")
    assert c.get("/api/experiments/").status_code == 200
    c.credentials(HTTP_AUTHORIZATION=f"Token {raw[:-1]}x")
    assert c.get("/api/experiments/").status_code in (401, 403)
    # The hash itself is not a credential: a database dump gives away no working token.
    c.credentials(HTTP_AUTHORIZATION=f"Token {_sha(raw)}")
    assert c.get("/api/experiments/").status_code in (401, 403)


def test_each_login_gets_its_own_token_and_earlier_ones_keep_working(alice, api_client_for):
    from rest_framework.test import APIClient

    body = {"username": "alice", "password": "alice-password-1"}
    first, second = (
        api_client_for(None).post("/api/auth/token/", body, format="json").json()["token"] for _ in "12"
    )
    assert first != second
    for raw in (first, second):
        c = APIClient()
        c.credentials(HTTP_AUTHORIZATION=f"Token {raw}")
        assert c.get("/api/experiments/").status_code == 200


def test_an_inactive_user_s_token_is_refused(alice, api_client_for):
    c = api_client_for(alice)
    alice.is_active = False
    alice.save()
    assert c.get("/api/experiments/").status_code in (401, 403)


def test_create_researcher_prints_a_token_it_stores_hashed_and_a_fixed_one_is_idempotent():
    from django.contrib.auth.models import User
    from rest_framework.test import APIClient

    from accounts.models import ApiToken

    out = StringIO()
    call_command("create_researcher", "erin", "--password", "erin-pass-123", stdout=out, stderr=StringIO())
    printed = out.getvalue().strip()
    erin = User.objects.get(username="erin")
    assert list(ApiToken.objects.filter(user=erin).values_list("token_hash", flat=True)) == [_sha(printed)]
    fixed = "demo-token-" + "0123456789" * 3
    for _ in range(2):
        out = StringIO()
        call_command("create_researcher", "erin", "--token", fixed, stdout=out, stderr=StringIO())
        assert out.getvalue().strip() == fixed
    assert list(ApiToken.objects.filter(user=erin).values_list("token_hash", flat=True)) == [_sha(fixed)]
    c = APIClient()
    c.credentials(HTTP_AUTHORIZATION=f"Token {fixed}")
    assert c.get("/api/experiments/").status_code == 200


def test_a_user_keeps_at_most_the_newest_tokens(alice):
    from accounts.models import ApiToken
    from accounts.services import MAX_TOKENS_PER_USER, issue_token

    tokens = [issue_token(alice) for _ in range(MAX_TOKENS_PER_USER + 3)]
    kept = set(ApiToken.objects.filter(user=alice).values_list("token_hash", flat=True))
    assert len(kept) == MAX_TOKENS_PER_USER
    assert _sha(tokens[-1]) in kept and _sha(tokens[0]) not in kept


def test_the_migration_hashes_drf_plain_tokens_in_place_so_their_clients_keep_working(alice):
    """A database from before: DRF's authtoken_token with a plain key. After the migration the key
    still authenticates, the table with plain keys is gone, and nothing stores the key in clear."""
    import importlib

    from django.apps import apps
    from rest_framework.test import APIClient

    plain = "0123456789abcdef0123456789abcdef01234567"  # DRF's 40 hex characters
    with connection.cursor() as cur:
        cur.execute(
            "CREATE TABLE authtoken_token (key varchar(40) PRIMARY KEY, created timestamptz NOT NULL,"
            " user_id integer NOT NULL UNIQUE)"
        )
        cur.execute(
            "INSERT INTO authtoken_token VALUES (%s, now() - interval '3 days', %s)", [plain, alice.pk]
        )
        cur.execute(
            "INSERT INTO django_migrations (app, name, applied) VALUES ('authtoken', '0001_initial', now())"
        )
    migration = importlib.import_module("accounts.migrations.0002_hash_plain_drf_tokens")
    with connection.schema_editor() as editor:
        migration.hash_plain_tokens(apps, editor)
    assert "authtoken_token" not in connection.introspection.table_names()
    with connection.cursor() as cur:
        cur.execute("SELECT count(*) FROM django_migrations WHERE app = 'authtoken'")
        assert cur.fetchone()[0] == 0
    assert plain not in _every_text_value_in_the_database()
    c = APIClient()
    c.credentials(HTTP_AUTHORIZATION=f"Token {plain}")
    assert c.get("/api/experiments/").status_code == 200


def test_a_provisioned_token_survives_any_number_of_logins(alice) -> None:
    """Issue 33: the 21st token login evicted make demo's own .state/api_token."""
    from accounts.services import MAX_TOKENS_PER_USER, issue_token, user_for_token

    demo = issue_token(alice, "demo-token-kept-in-state-0123456789")
    for _ in range(MAX_TOKENS_PER_USER + 5):
        issue_token(alice)
    assert user_for_token(demo) == alice
    assert alice.api_tokens.filter(pinned=False).count() == MAX_TOKENS_PER_USER
