"""/api/status/, settings parsing, management commands, migrations and the committed OpenAPI schema."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys
from io import StringIO

import pytest
from django.core.management import call_command

REPO = pathlib.Path(__file__).resolve().parents[2]
PY = sys.executable


def run_manage(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    full = {**os.environ, "QOELAB_DEBUG": "true", **(env or {})}
    return subprocess.run(
        [PY, str(REPO / "backend" / "manage.py"), *args],
        capture_output=True,
        text=True,
        env=full,
        timeout=120,
    )


@pytest.mark.django_db
def test_status_reports_database_migrations_redis_and_worker_heartbeats(make_host, api_client_for, alice):
    make_host("lab-live", {"netem": True})
    make_host("lab-dead", alive=False)
    resp = api_client_for(alice).get("/api/status/")  # the details are for researchers only
    assert resp.status_code == 200, resp.content
    body = resp.json()
    assert body["ok"] and body["database"]["ok"] and body["redis"]["ok"]
    assert body["migrations"] == {"ok": True, "detail": "all applied"}
    assert body["database"]["detail"].startswith("PostgreSQL")
    workers = {w["name"]: w for w in body["workers"]}
    assert workers["lab-live"]["alive"] and workers["lab-live"]["capabilities"] == ["netem"]
    assert workers["lab-live"]["seconds_since_heartbeat"] < 10
    assert not workers["lab-dead"]["alive"] and workers["lab-dead"]["last_heartbeat"] is None


@pytest.mark.django_db
def test_status_answers_503_when_redis_is_down(api_client_for, alice, settings):
    settings.REDIS_URL = "redis://127.0.0.1:1/0"
    resp = api_client_for(alice).get("/api/status/")
    assert resp.status_code == 503 and not resp.json()["redis"]["ok"] and resp.json()["database"]["ok"]


def test_settings_refuse_a_non_boolean_debug_value():
    code = "import qoelab_web.settings"
    env = {**os.environ, "QOELAB_DEBUG": "ture", "PYTHONPATH": str(REPO / "backend")}
    out = subprocess.run([PY, "-c", code], capture_output=True, text=True, env=env, cwd="/")
    assert out.returncode != 0 and "QOELAB_DEBUG must be 'true' or 'false', got 'ture'" in out.stderr


def test_settings_require_a_secret_key_in_production():
    env = {k: v for k, v in os.environ.items() if k != "QOELAB_SECRET_KEY"}
    env.update(QOELAB_DEBUG="false", PYTHONPATH=str(REPO / "backend"))
    out = subprocess.run(
        [PY, "-c", "import qoelab_web.settings"], capture_output=True, text=True, env=env, cwd="/"
    )
    assert out.returncode != 0 and "QOELAB_SECRET_KEY is required" in out.stderr
    env["QOELAB_SECRET_KEY"] = "0123456789" * 5  # 50 characters, as test_deploy_profile.py checks
    ok = subprocess.run(
        [PY, "-c", "import qoelab_web.settings"], capture_output=True, text=True, env=env, cwd="/"
    )
    assert ok.returncode == 0, ok.stderr


def test_settings_refuse_a_bad_integer():
    env = {**os.environ, "QOELAB_DEBUG": "true", "QOELAB_MAX_TRIALS_PER_SWEEP": "lots"}
    env["PYTHONPATH"] = str(REPO / "backend")
    out = subprocess.run(
        [PY, "-c", "import qoelab_web.settings"], capture_output=True, text=True, env=env, cwd="/"
    )
    assert "QOELAB_MAX_TRIALS_PER_SWEEP must be an integer, got 'lots'" in out.stderr


def test_every_setting_is_listed_in_env_example():
    import re

    example = (REPO / ".env.example").read_text()
    source = (REPO / "backend" / "qoelab_web" / "settings.py").read_text()
    used = set(re.findall(r'"((?:QOELAB_[A-Z_]+)|DATABASE_URL|REDIS_URL)"', source))
    assert {"DATABASE_URL", "REDIS_URL", "QOELAB_SECRET_KEY", "QOELAB_DEBUG"} <= used
    missing = sorted(v for v in used if f"{v}=" not in example)
    assert not missing, f".env.example lacks {missing}"


@pytest.mark.django_db
def test_add_host_prints_a_token_and_is_idempotent_with_a_fixed_token():
    from hosts.models import WorkerHost

    out = StringIO()
    call_command("add_host", "lab-9", stdout=out, stderr=StringIO())
    first = out.getvalue().strip()
    assert len(first) >= 40 and WorkerHost.objects.get(name="lab-9").check_token(first)
    for _ in range(2):
        call_command(
            "add_host", "lab-9", "--token", "demo-token-0123456789", stdout=StringIO(), stderr=StringIO()
        )
    host = WorkerHost.objects.get(name="lab-9")
    assert host.check_token("demo-token-0123456789") and not host.check_token(first)
    assert WorkerHost.objects.count() == 1


@pytest.mark.django_db
def test_add_host_refuses_a_bad_name():
    from django.core.management.base import CommandError

    with pytest.raises(CommandError, match="name"):
        call_command("add_host", "Bad Name!", stdout=StringIO(), stderr=StringIO())
    with pytest.raises(CommandError, match="reserved"):
        call_command("add_host", "heartbeat", stdout=StringIO(), stderr=StringIO())


@pytest.mark.django_db
def test_create_researcher_is_idempotent_and_grants_the_researcher_permission(client):
    from django.contrib.auth.models import User

    for _ in range(2):
        call_command(
            "create_researcher", "dora", "--password", "dora-pass-123", stdout=StringIO(), stderr=StringIO()
        )
    user = User.objects.get(username="dora")
    assert user.has_perm("experiments.researcher") and user.groups.count() == 1
    assert client.login(username="dora", password="dora-pass-123")
    assert client.get("/api/experiments/").status_code == 200


def test_migrations_are_committed_for_every_model_change():
    out = run_manage("makemigrations", "--check", "--dry-run")
    assert out.returncode == 0, out.stdout + out.stderr


def test_the_openapi_schema_generates_without_warnings_and_docs_openapi_yaml_is_current(tmp_path):
    target = tmp_path / "openapi.yaml"
    out = run_manage("spectacular", "--validate", "--fail-on-warn", "--file", str(target))
    assert out.returncode == 0, out.stdout + out.stderr
    committed = REPO / "docs" / "openapi.yaml"
    assert committed.read_text() == target.read_text(), (
        "docs/openapi.yaml is stale: run `cd backend && QOELAB_DEBUG=true ../.venv/bin/python manage.py "
        "spectacular --file ../docs/openapi.yaml`"
    )


@pytest.mark.django_db
def test_the_api_docs_page_serves_swagger_from_the_sidecar_package(client):
    resp = client.get("/api/docs/")
    assert resp.status_code == 200
    html = resp.content.decode()
    assert "swagger-ui" in html and "cdn" not in html.lower() and "unpkg" not in html
    assert client.get("/api/schema/").status_code == 200
    assert client.get("/api/redoc/").status_code == 200
