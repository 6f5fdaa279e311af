"""docker-compose.yml is checked by parsing (no Docker engine on the lab's CI machines)."""

import re
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
COMPOSE = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
SERVICES = COMPOSE["services"]


def documented_env_vars() -> set[str]:
    names = set()
    for line in (ROOT / ".env.example").read_text().splitlines():
        m = re.match(r"\s*#?\s*([A-Z][A-Z0-9_]+)=", line)
        if m:
            names.add(m.group(1))
    return names


def test_it_defines_the_deployment_services():
    assert {"db", "redis", "web", "worker", "scheduler"} <= set(SERVICES)


def test_every_service_has_an_image_or_a_build():
    for name, svc in SERVICES.items():
        assert "image" in svc or "build" in svc, f"service {name} has neither image nor build"


def test_long_running_services_have_healthchecks():
    for name in ("db", "redis", "web", "worker", "scheduler"):
        check = SERVICES[name].get("healthcheck")
        assert check and check.get("test"), f"service {name} has no healthcheck"


def test_the_build_context_has_a_dockerfile():
    builds = {svc["build"] for svc in SERVICES.values() if "build" in svc}
    for context in builds:
        assert (ROOT / context / "Dockerfile").is_file()


def test_the_worker_can_create_namespaces_and_use_tun_and_kvm():
    worker = SERVICES["worker"]
    assert worker.get("privileged") is True
    assert any("/dev/net/tun" in d for d in worker["devices"])
    assert any("/dev/kvm" in d for d in worker["devices"])


def test_the_worker_does_not_get_database_credentials():
    # Workers talk to the backend over HTTP with a host token, never to PostgreSQL.
    assert "DATABASE_URL" not in SERVICES["worker"].get("environment", {})


def test_every_variable_it_references_is_documented_in_env_example():
    text = (ROOT / "docker-compose.yml").read_text()
    referenced = set(re.findall(r"\$\{([A-Z][A-Z0-9_]*)", text))
    for svc in SERVICES.values():
        if "build" in svc:  # our own image reads these; db/redis images have their own fixed settings
            referenced |= set((svc.get("environment") or {}).keys())
    missing = referenced - documented_env_vars()
    assert not missing, f"variables used in docker-compose.yml but not in .env.example: {sorted(missing)}"


def test_data_lives_in_named_volumes():
    assert {"pgdata", "media"} <= set(COMPOSE["volumes"])
    assert any(v.startswith("pgdata:") for v in SERVICES["db"]["volumes"])


def test_clients_reach_gunicorn_only_through_the_buffering_proxy():
    """Issue 33: gunicorn's sync workers published directly were frozen by two slow clients."""
    assert "ports" not in SERVICES["web"]
    proxy = SERVICES["proxy"]
    assert proxy["image"].startswith("nginx:") and proxy["image"] != "nginx:latest"  # pinned
    assert any(p.endswith(":80") for p in proxy["ports"])
    mounted = [v.split(":")[0] for v in proxy["volumes"]]
    assert mounted == ["./scripts/nginx/qoelab.conf.template"] and (ROOT / mounted[0]).is_file()
    # Every value the template needs is in the proxy's environment (the image substitutes only those).
    needed = set(re.findall(r"\$\{(QOELAB_[A-Z_]+)\}", (ROOT / mounted[0]).read_text()))
    assert needed and needed <= set(proxy["environment"])
    assert proxy["environment"]["QOELAB_PROXY_UPSTREAM"] == "web:8000"
    assert COMPOSE["x-app"]["environment"]["QOELAB_BEHIND_PROXY"] == "true"
    assert SERVICES["worker"]["environment"]["QOELAB_BACKEND_URL"] == "http://proxy"
