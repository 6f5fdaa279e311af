"""Throttles that hold: failed logins are limited per username and per address, answered 429 with
Retry-After, and every throttle counts in the shared cache (Redis), so a second web process sees it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.django_db
REPO = Path(__file__).resolve().parents[2]
GOOD = {"username": "alice", "password": "alice-password-1"}
BAD = {"username": "alice", "password": "wrong"}


@pytest.fixture(autouse=True)
def fast_password_hashing(settings):
    # Each wrong password costs a full PBKDF2 run (~1 s on a busy 2-core host); these tests make 20.
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


def in_second_process(code: str, prefix: str) -> None:
    """Run ``code`` in another Python process with Django set up: a second gunicorn worker."""
    env = {**os.environ, "QOELAB_CACHE_KEY_PREFIX": prefix, "QOELAB_DEBUG": "true"}
    env["PYTHONPATH"] = os.pathsep.join([str(REPO / "backend"), str(REPO / "workers")])
    env["DJANGO_SETTINGS_MODULE"] = "qoelab_web.settings"
    script = "import django\ndjango.setup()\n" + code
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, env=env)
    assert out.returncode == 0, out.stderr


def test_the_cache_every_throttle_uses_is_redis_not_process_memory():
    from django.conf import settings

    assert settings.CACHES["default"]["BACKEND"] == "django.core.cache.backends.redis.RedisCache"


def test_twenty_wrong_passwords_on_the_token_endpoint_end_in_429_with_retry_after(alice, api_client_for):
    answers = [api_client_for(None).post("/api/auth/token/", BAD, format="json") for _ in range(20)]
    codes = [r.status_code for r in answers]
    assert codes[:10] == [400] * 10 and set(codes[10:]) == {429}, codes
    last = answers[-1]
    assert 0 < int(last["Retry-After"]) <= 15 * 60 and last.json()["detail"]
    # Past the limit the password is not even checked: the right one is refused too.
    assert api_client_for(None).post("/api/auth/token/", GOOD, format="json").status_code == 429


def test_twenty_wrong_passwords_on_the_login_form_end_in_429_with_retry_after(alice, client):
    answers = [client.post("/accounts/login/", BAD) for _ in range(20)]
    codes = [r.status_code for r in answers]
    assert codes[:10] == [200] * 10 and set(codes[10:]) == {429}, codes
    assert int(answers[-1]["Retry-After"]) > 0
    assert "Too many failed logins" in answers[-1].content.decode()
    assert client.post("/accounts/login/", GOOD).status_code == 429
    assert not client.login(username="alice", password="alice-password-1")


def test_the_admin_login_counts_and_refuses_too(alice, client):
    for _ in range(10):
        client.post("/admin/login/", BAD)
    resp = client.post("/admin/login/", GOOD)
    assert resp.status_code == 429 and int(resp["Retry-After"]) > 0


def test_a_right_password_before_the_limit_clears_the_username_s_count(alice, api_client_for):
    for _ in range(9):
        assert api_client_for(None).post("/api/auth/token/", BAD, format="json").status_code == 400
    assert api_client_for(None).post("/api/auth/token/", GOOD, format="json").status_code == 200
    for _ in range(9):
        assert api_client_for(None).post("/api/auth/token/", BAD, format="json").status_code == 400


def test_the_username_limit_holds_across_client_addresses(alice, api_client_for):
    for i in range(10):
        c = api_client_for(None)
        assert c.post("/api/auth/token/", BAD, format="json", REMOTE_ADDR=f"10.0.0.{i}").status_code == 400
    c = api_client_for(None)
    assert c.post("/api/auth/token/", GOOD, format="json", REMOTE_ADDR="10.0.1.1").status_code == 429


def test_one_address_trying_many_usernames_is_refused(alice, api_client_for, settings):
    settings.QOELAB_LOGIN_FAILURES_PER_ADDRESS = "5/15min"
    for i in range(5):
        body = {"username": f"nobody{i}", "password": "x"}
        assert api_client_for(None).post("/api/auth/token/", body, format="json").status_code == 400
    assert api_client_for(None).post("/api/auth/token/", GOOD, format="json").status_code == 429
    # Another address is not affected.
    assert (
        api_client_for(None).post("/api/auth/token/", GOOD, format="json", REMOTE_ADDR="10.9.9.9").status_code
        == 200
    )


def test_failed_logins_counted_by_another_process_refuse_this_one(alice, api_client_for, own_cache_prefix):
    in_second_process(
        "from qoelab_web.throttles import login_failed\nfor _ in range(10): login_failed(None, 'alice')\n",
        own_cache_prefix,
    )
    assert api_client_for(None).post("/api/auth/token/", GOOD, format="json").status_code == 429


def test_the_evaluator_limit_is_shared_between_processes(own_cache_prefix, settings):
    """Two gunicorn workers used to count apart (58 of 80 reports through a 30/min limit)."""
    from ratings import throttle

    settings.QOELAB_RATINGS_SUBMIT_RATE = "30/min"
    in_second_process(
        "from django.conf import settings\nsettings.QOELAB_RATINGS_SUBMIT_RATE = '30/min'\n"
        "from ratings import throttle\nassert all(throttle.allow(4242)[0] for _ in range(30))\n",
        own_cache_prefix,
    )
    allowed, wait = throttle.allow(4242)
    assert not allowed and 0 < wait <= 60


def test_a_malformed_login_rate_is_a_configuration_error():
    from django.core.exceptions import ImproperlyConfigured

    from qoelab_web.throttles import parse_rate

    assert parse_rate("10/15min") == (10, 900) and parse_rate("30/min") == (30, 60)
    for bad in ("ten/min", "10/15fortnights", "10/0min", "10"):
        with pytest.raises(ImproperlyConfigured):
            parse_rate(bad)


def test_a_password_reset_link_comes_from_the_base_url_not_the_host_header(settings, client, alice):
    """Issue 33: a reset mail rendered for ``Host: evil.example`` linked there (the demo accepts any
    host name)."""
    from django.core import mail
    from django.core.cache import cache

    cache.clear()
    settings.ALLOWED_HOSTS = ["*"]
    settings.QOELAB_BASE_URL = "https://lab.example.org"
    alice.email = "alice@lab.example.org"
    alice.save()
    resp = client.post("/accounts/password_reset/", {"email": alice.email}, HTTP_HOST="evil.example")
    assert resp.status_code == 302, resp.content
    (sent,) = mail.outbox
    assert "https://lab.example.org/accounts/reset/" in sent.body and "evil.example" not in sent.body


def test_password_reset_requests_are_throttled_per_address(settings, client):
    from django.core.cache import cache

    cache.clear()
    settings.QOELAB_BASE_URL = "https://lab.example.org"
    settings.QOELAB_PASSWORD_RESETS_PER_ADDRESS = "3/hour"
    answers = [
        client.post("/accounts/password_reset/", {"email": "x@example.org"}).status_code for _ in range(4)
    ]
    assert answers == [302, 302, 302, 429]
    assert int(client.post("/accounts/password_reset/", {"email": "x@example.org"})["Retry-After"]) > 0
