"""Backend test setup: two test job types in the real registry, artifacts in a temp media root."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

import pytest
from pydantic import BaseModel, ConfigDict

from qoelab import params
from qoelab.jobs import REGISTRY
from qoelab.jobs.base import ChartSpec, JobType, Metric, TrialContext, TrialResult


class LinkParams(BaseModel):
    model_config = ConfigDict(extra="forbid")
    rate: params.Rate()
    delay: params.Duration() = 0.0
    loss: params.Percent() = 0.0
    protocol: Literal["vnc", "spice", "x2go"] = "vnc"


class VmParams(BaseModel):
    model_config = ConfigDict(extra="forbid")
    vms: int = 1


def _not_run_here(p: BaseModel, ctx: TrialContext) -> TrialResult:
    raise AssertionError("backend tests never run a runner")


LINK = JobType(
    name="t_link",
    title="test link job",
    description="needs netem",
    params=LinkParams,
    requires=frozenset({"netem"}),
    run=_not_run_here,
    metrics=(Metric("tcp_down_bps", "TCP download", "bit/s"),),
    charts=(ChartSpec(key="down", title="down vs rate", x="rate", y="tcp_down_bps", series="delay"),),
    timeout_s=120,
    max_attempts=2,
)
VM = JobType(
    name="t_vm",
    title="test VM job",
    description="needs kvm",
    params=VmParams,
    requires=frozenset({"kvm"}),
    run=_not_run_here,
    max_attempts=1,
)


@pytest.fixture(autouse=True)
def test_job_types() -> Iterator[dict[str, JobType]]:
    added = {}
    for job in (LINK, VM):
        if job.name not in REGISTRY:
            REGISTRY[job.name] = job
            added[job.name] = job
    yield {"t_link": LINK, "t_vm": VM}
    for name in added:
        REGISTRY.pop(name, None)


@pytest.fixture(autouse=True, scope="session")
def static_root() -> None:
    # WhiteNoise warns on every client when STATIC_ROOT is missing (it exists after collectstatic).
    from django.conf import settings

    Path(settings.STATIC_ROOT).mkdir(parents=True, exist_ok=True)


@pytest.fixture(autouse=True)
def media_root(settings: Any, tmp_path: Any) -> Any:
    settings.MEDIA_ROOT = tmp_path / "media"
    return settings.MEDIA_ROOT


@pytest.fixture(autouse=True)
def base_url(settings: Any) -> str:
    # Invite links come from QOELAB_BASE_URL (pytest-django runs with DEBUG off): the test client's host.
    settings.QOELAB_BASE_URL = "http://testserver"
    return settings.QOELAB_BASE_URL


@pytest.fixture
def sweep_of(alice: Any) -> Any:
    """Create a sweep through the service (fully validated) for ``user`` (default alice)."""
    from experiments.services import create_sweep

    def make(grid: dict[str, list[Any]] | None = None, user: Any = None, **spec: Any) -> Any:
        body = {
            "experiment": {"name": spec.pop("experiment_name", "exp"), "description": ""},
            "job_type": "t_link",
            "grid": grid or {"rate": ["1mbit", "10mbit"]},
            **spec,
        }
        return create_sweep(body, user or alice)

    return make


@pytest.fixture
def client_for() -> Any:
    """``client_for(user)``: a Django test client logged in as ``user`` (the dashboard's pages)."""
    from django.test import Client

    def make(user: Any) -> Client:
        c = Client()
        c.force_login(user)
        return c

    return make


@pytest.fixture
def wsgi_app(db: Any) -> Iterator[Any]:
    """The Django WSGI app, called in the test's transaction (schemathesis' ``case.call(app=...)``).

    The WSGI handler closes the connection after each request, which would end the test's
    transaction; Django's own test client disconnects the same signal handler (and connects it
    again after each of its requests: request this fixture after fixtures that use ``client``).
    """
    from django.core import signals
    from django.core.wsgi import get_wsgi_application
    from django.db import close_old_connections

    signals.request_started.disconnect(close_old_connections)
    signals.request_finished.disconnect(close_old_connections)
    yield get_wsgi_application()
    signals.request_started.connect(close_old_connections)
    signals.request_finished.connect(close_old_connections)


@pytest.fixture
def openapi(db: Any) -> Any:
    """The OpenAPI schema as ``make schema`` writes it, loaded by schemathesis."""
    import schemathesis
    from drf_spectacular.generators import SchemaGenerator

    return schemathesis.openapi.from_dict(SchemaGenerator().get_schema(request=None, public=True))
