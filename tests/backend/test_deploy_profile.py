"""The deployable security profile (issue 14, finding 7): QOELAB_HTTPS makes `check --deploy` clean,
invite links come from QOELAB_BASE_URL and never from the Host header, /api/status/ details only for
researchers. docs/security.md, "Deploying with HTTPS".
"""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys
from typing import Any

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
PY = sys.executable
SECRET = "k7Qz-" * 11  # 55 characters, 5 different ones: Django's own bar (security.W009)


def production_env(**extra: str) -> dict[str, str]:
    """The environment of a deployment: nothing of this shell's QOELAB_ settings, DEBUG off, and
    none of the test harness's DJANGO_ variables (Playwright's fixtures set DJANGO_ALLOW_ASYNC_UNSAFE
    in this process, which `check --deploy` rightly reports as async.E001)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("QOELAB_", "DJANGO_"))}
    env.update(QOELAB_DEBUG="false", QOELAB_SECRET_KEY=SECRET, PYTHONPATH=str(REPO / "backend"))
    env.update(extra)
    return env


def check_deploy(**extra: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [PY, str(REPO / "backend" / "manage.py"), "check", "--deploy", "--fail-level", "WARNING"],
        capture_output=True,
        text=True,
        env=production_env(**extra),
        timeout=120,
    )


def settings_of(**extra: str) -> subprocess.CompletedProcess:
    names = [
        *("SECURE_SSL_REDIRECT", "SESSION_COOKIE_SECURE", "CSRF_COOKIE_SECURE", "SECURE_HSTS_SECONDS"),
        *(
            "SECURE_HSTS_INCLUDE_SUBDOMAINS",
            "SECURE_HSTS_PRELOAD",
            "SECURE_PROXY_SSL_HEADER",
            "QOELAB_BASE_URL",
        ),
    ]
    code = f"import json, qoelab_web.settings as s; print(json.dumps({{n: getattr(s, n) for n in {names}}}))"
    return subprocess.run(
        [PY, "-c", code], capture_output=True, text=True, env=production_env(**extra), cwd="/", timeout=60
    )


# ---- settings and `manage.py check --deploy` -------------------------------------------------------


def test_check_deploy_is_clean_with_the_https_profile():
    out = check_deploy(QOELAB_HTTPS="true", QOELAB_BASE_URL="https://lab.example.org")
    assert out.returncode == 0, out.stdout + out.stderr
    assert "System check identified no issues" in out.stdout, out.stdout


def test_check_deploy_warns_without_the_https_profile():
    out = check_deploy(QOELAB_BASE_URL="https://lab.example.org")
    assert out.returncode != 0
    for warning in ("security.W004", "security.W008", "security.W012", "security.W016"):
        assert warning in out.stderr, out.stderr


def test_check_deploy_names_a_missing_or_plain_http_base_url():
    out = check_deploy(QOELAB_HTTPS="true")
    assert out.returncode != 0 and "qoelab.W001" in out.stderr and "QOELAB_BASE_URL" in out.stderr
    out = check_deploy(QOELAB_HTTPS="true", QOELAB_BASE_URL="http://lab.example.org")
    assert out.returncode != 0 and "qoelab.W002" in out.stderr


def test_the_https_switch_turns_on_hsts_redirect_and_secure_cookies_each_overridable():
    out = settings_of(QOELAB_HTTPS="true")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == {
        "SECURE_SSL_REDIRECT": True,
        "SESSION_COOKIE_SECURE": True,
        "CSRF_COOKIE_SECURE": True,
        "SECURE_HSTS_SECONDS": 365 * 24 * 3600,
        "SECURE_HSTS_INCLUDE_SUBDOMAINS": True,
        "SECURE_HSTS_PRELOAD": False,
        "SECURE_PROXY_SSL_HEADER": None,
        "QOELAB_BASE_URL": "",
    }
    out = settings_of(
        QOELAB_HTTPS="true",
        QOELAB_HSTS_SECONDS="3600",
        QOELAB_HSTS_INCLUDE_SUBDOMAINS="false",
        QOELAB_HSTS_PRELOAD="true",
        QOELAB_SSL_REDIRECT="false",
        QOELAB_PROXY_SSL_HEADER="X-Forwarded-Proto",
        QOELAB_BASE_URL="https://lab.example.org/",
    )
    got = json.loads(out.stdout)
    assert got["SECURE_HSTS_SECONDS"] == 3600 and got["SECURE_HSTS_PRELOAD"] is True
    assert got["SECURE_HSTS_INCLUDE_SUBDOMAINS"] is False and got["SECURE_SSL_REDIRECT"] is False
    assert got["SESSION_COOKIE_SECURE"] is True
    assert got["SECURE_PROXY_SSL_HEADER"] == ["HTTP_X_FORWARDED_PROTO", "https"]
    assert got["QOELAB_BASE_URL"] == "https://lab.example.org"
    got = json.loads(settings_of(QOELAB_PROXY_SSL_HEADER="X-Forwarded-Ssl: on").stdout)
    assert got["SECURE_PROXY_SSL_HEADER"] == ["HTTP_X_FORWARDED_SSL", "on"]
    assert json.loads(settings_of().stdout)["SECURE_HSTS_SECONDS"] == 0  # off without the switch


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("QOELAB_HTTPS", "yes", "QOELAB_HTTPS must be 'true' or 'false'"),
        ("QOELAB_BASE_URL", "lab.example.org", "QOELAB_BASE_URL must be scheme://host[:port]"),
        ("QOELAB_BASE_URL", "https://lab.example.org/qoelab", "QOELAB_BASE_URL must be scheme://host[:port]"),
        ("QOELAB_PROXY_SSL_HEADER", "X Forwarded Proto", "QOELAB_PROXY_SSL_HEADER must be a header name"),
        ("QOELAB_SECRET_KEY", "not-empty-but-short-0123456789", "is too short (30 characters"),
        ("QOELAB_SECRET_KEY", "ab" * 30, "QOELAB_SECRET_KEY is too short"),
    ],
)
def test_settings_refuse_a_bad_profile_value(name: str, value: str, message: str):
    out = settings_of(**{name: value})
    assert out.returncode != 0 and message in out.stderr, out.stderr


def test_a_short_secret_key_is_fine_on_a_development_machine():
    out = settings_of(QOELAB_DEBUG="true", QOELAB_SECRET_KEY="dev")
    assert out.returncode == 0, out.stderr


@pytest.mark.django_db
def test_pages_redirect_to_https_but_the_healthcheck_and_the_worker_protocol_do_not(
    settings: Any, client: Any, make_host: Any
):
    settings.SECURE_SSL_REDIRECT = True
    settings.SECURE_HSTS_SECONDS = 3600
    settings.SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    lab = make_host("lab-1", {"netem": True})
    page = client.get("/accounts/login/")
    assert page.status_code == 301 and page["Location"] == "https://testserver/accounts/login/"
    assert client.get("/api/status/").status_code == 200  # curl in the container, plain HTTP
    assert lab.heartbeat().status_code == 200  # a worker on the compose network (http://web:8000)
    proxied = client.get("/accounts/login/", HTTP_X_FORWARDED_PROTO="https")
    assert proxied.status_code == 200 and proxied["Strict-Transport-Security"] == "max-age=3600"


@pytest.mark.django_db
def test_the_login_cookies_are_secure_in_the_https_profile(settings: Any, client: Any, alice: Any):
    settings.SESSION_COOKIE_SECURE = settings.CSRF_COOKIE_SECURE = True
    form = client.get("/accounts/login/", secure=True)
    assert form.cookies["csrftoken"]["secure"]
    done = client.post("/accounts/login/", {"username": "alice", "password": "alice-password-1"}, secure=True)
    assert done.status_code == 302 and done.cookies["sessionid"]["secure"]


# ---- invite links ---------------------------------------------------------------------------------


@pytest.fixture
def draft_campaign(alice: Any) -> Any:
    from ratings import campaigns, demo

    sweep = demo.demo_sweep(
        alice, [{"protocol": "vnc", "rate": "1mbit"}, {"protocol": "vnc", "rate": "2mbit"}]
    )
    return campaigns.create_campaign(alice, name="c", sweep=sweep, seed=1)


@pytest.mark.django_db
def test_a_forged_host_header_cannot_change_an_invite_link(
    settings: Any, draft_campaign: Any, alice: Any, api_client_for: Any, client: Any
):
    settings.ALLOWED_HOSTS = ["*"]  # the demo's: any Host reaches the view
    settings.QOELAB_BASE_URL = "https://lab.example.org"
    api = api_client_for(alice)
    url = f"/api/campaigns/{draft_campaign.pk}/invite/"
    links = api.post(url, {"labels": ["anna"]}, format="json", HTTP_HOST="evil.example").json()
    assert links[0]["url"] == f"https://lab.example.org/rate/{links[0]['token']}/"
    client.force_login(alice)
    page = client.post(
        f"/campaigns/{draft_campaign.pk}/invite/",
        {"labels": "ben"},
        HTTP_HOST="evil.example",
        HTTP_X_FORWARDED_HOST="evil2.example",
    )
    assert page.status_code == 200 and b"https://lab.example.org/rate/" in page.content
    assert b"evil" not in page.content
    ben = draft_campaign.evaluators.get(label="ben")
    again = client.post(
        f"/campaigns/{draft_campaign.pk}/evaluators/{ben.pk}/",
        {"action": "reissue"},
        HTTP_HOST="evil.example",
    )
    assert again.status_code == 200 and b"https://lab.example.org/rate/" in again.content
    assert b"evil" not in again.content


@pytest.mark.django_db
def test_without_a_base_url_invites_are_refused_in_production_before_any_evaluator_exists(
    settings: Any, draft_campaign: Any, alice: Any, api_client_for: Any, client: Any
):
    settings.QOELAB_BASE_URL = ""
    settings.DEBUG = False
    r = api_client_for(alice).post(f"/api/campaigns/{draft_campaign.pk}/invite/", {"count": 2}, format="json")
    assert r.status_code == 503 and "QOELAB_BASE_URL" in r.json()["detail"]
    client.force_login(alice)
    page = client.post(f"/campaigns/{draft_campaign.pk}/invite/", {"count": "1"}, follow=True)
    assert b"QOELAB_BASE_URL" in page.content
    assert not draft_campaign.evaluators.exists()


@pytest.mark.django_db
def test_without_a_base_url_a_development_machine_uses_the_request(
    settings: Any, draft_campaign: Any, alice: Any, api_client_for: Any
):
    settings.QOELAB_BASE_URL = ""
    settings.DEBUG = True
    r = api_client_for(alice).post(f"/api/campaigns/{draft_campaign.pk}/invite/", {"count": 1}, format="json")
    assert r.status_code == 201 and r.json()[0]["url"].startswith("http://testserver/rate/")


# ---- /api/status/ ---------------------------------------------------------------------------------


@pytest.mark.django_db
def test_status_tells_anonymous_callers_only_the_overall_health(make_host: Any, client: Any):
    make_host("lab-secret-name", {"netem": True})
    resp = client.get("/api/status/")
    assert resp.status_code == 200 and resp.json() == {"ok": True}
    assert b"lab-secret-name" not in resp.content and b"PostgreSQL" not in resp.content


@pytest.mark.django_db
def test_status_shows_workers_and_versions_to_researchers_only(
    make_host: Any, client: Any, alice: Any, charlie: Any, api_client_for: Any
):
    make_host("lab-1", {"netem": True})
    by_token = api_client_for(alice).get("/api/status/").json()
    assert by_token["workers"][0]["name"] == "lab-1" and by_token["workers"][0]["capabilities"] == ["netem"]
    assert by_token["database"]["detail"].startswith("PostgreSQL") and "redis" in by_token["redis"]["detail"]
    client.force_login(alice)
    assert client.get("/api/status/").json()["workers"][0]["name"] == "lab-1"
    # an account without researcher permission cannot list hosts, so it sees no names here either
    assert api_client_for(charlie).get("/api/status/").json() == {"ok": True}


@pytest.mark.django_db
def test_status_refuses_a_wrong_token_and_keeps_503_for_anonymous(client: Any, settings: Any):
    bad = client.get("/api/status/", HTTP_AUTHORIZATION="Token not-a-real-token")
    assert bad.status_code == 403
    settings.REDIS_URL = "redis://127.0.0.1:1/0"
    down = client.get("/api/status/")
    assert down.status_code == 503 and down.json() == {"ok": False}
