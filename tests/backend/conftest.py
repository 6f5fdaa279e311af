"""Backend test setup: two test job types in the real registry, artifacts in a temp media root, and
the API's principals (``api_cast``) for the schema tests."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import pytest
from pydantic import BaseModel, ConfigDict

from qoelab import params
from qoelab.jobs import REGISTRY
from qoelab.jobtype import ChartSpec, JobType, Metric, TrialContext, TrialResult


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


@dataclass
class ApiCast:
    """One principal of each kind the API knows, and the real rows they address.

    ``headers`` maps researcher, host (``lab``), evaluator (of ``campaign``) and anonymous to the
    request headers that authenticate them. ``trial`` is the first of ``sweep``'s trials, pending
    until ``start_trial()`` queues it for ``lab`` and has the lab claim it (running).
    """

    lab: Any  # fixtures.cast.LabHost "lab-1" with netem
    sweep: Any
    trial: Any
    campaign: Any  # one condition, one evaluator invited
    headers: dict[str, dict[str, str]]

    def start_trial(self) -> Any:
        from experiments.choices import TrialStatus

        self.trial.mark_queued(self.lab.host)
        claim = self.lab.client.post(f"/api/hosts/trials/{self.trial.pk}/claim/", {}, format="json")
        assert claim.status_code == 200
        self.trial.refresh_from_db()
        assert self.trial.status == TrialStatus.RUNNING
        return self.trial


@pytest.fixture
def api_cast(alice: Any, sweep_of: Any, make_host: Any, client: Any) -> ApiCast:
    """Alice's API token, a lab host, an evaluator link and the rows they may address (``ApiCast``).

    Uses Django's test ``client``: request ``wsgi_app`` after this fixture.
    """
    from ratings import campaigns, invitations

    lab = make_host("lab-1", {"netem": True})
    sweep = sweep_of()
    trial = sweep.trials.order_by("index").first()
    campaign = campaigns.create_campaign(
        alice, name="c", conditions=[{"label": "a", "params": {"protocol": "vnc", "rate": "1mbit"}}]
    )
    [(_, evaluator_token)] = invitations.invite(campaign, count=1)
    resp = client.post(
        "/api/auth/token/",
        {"username": "alice", "password": "alice-password-1"},
        content_type="application/json",
    )
    assert resp.status_code == 200, resp.content
    headers = {
        "researcher": {"Authorization": f"Token {resp.json()['token']}"},
        "host": {"Authorization": f"Host {lab.token}"},
        "evaluator": {"Authorization": f"Evaluator {evaluator_token}"},
        "anonymous": {},
    }
    return ApiCast(lab=lab, sweep=sweep, trial=trial, campaign=campaign, headers=headers)


@pytest.fixture(scope="session")
def videos(tmp_path_factory: Any) -> dict[str, Path]:
    """A reference and a degraded WebM recording (ffmpeg), for rating campaigns' conditions."""
    from ratings.demo import make_video

    d = tmp_path_factory.mktemp("rating-videos")
    return {"reference": make_video(d / "ref.webm"), "degraded": make_video(d / "deg.webm", degraded=True)}
