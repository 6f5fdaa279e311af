"""Job type ``live_session``: an evaluator operates a remote desktop over an emulated link (live mode).

The ratings app's session provider (``backend/ratings/live_provider.py``) creates one trial of this
job type per live slot. The runner builds the emulated link for the condition, starts the
namespace desktop with the protocol's server and a WebSocket proxy on the client side of the link
(``qoelab.rd.live``), reports the session (``ws://<this host>:<port>/``, the browser client kind)
to the backend with ``POST /api/hosts/trials/<id>/live/`` and keeps reporting the screens the
evaluator went through until the backend answers ``release`` (slot released) or ``hold`` passes.
Teardown is always complete: processes by the trial prefix, then the link.
"""

from __future__ import annotations

import functools
import os
import time
from collections.abc import Callable
from typing import Any, Literal

from pydantic import Field

from qoelab import params as p
from qoelab.emulation.linkparams import LinkParams
from qoelab.errors import QoelabError
from qoelab.jobs.rd_qoe import PROTOCOL_CAPS
from qoelab.jobtype import Cleanup, JobType, Metric, TrialContext, TrialResult

TIMEOUT_S = 3600
# The control channel: called with {"session": {...}} once, then with {"pages_seen", "alive", "error"}
# every few seconds; answers {"release": bool, "reason": str}.
Channel = Callable[[dict[str, Any]], dict[str, Any]]


class LiveSessionParams(LinkParams):
    """The condition's link, its protocol, and how long the session may be held at most."""

    protocol: Literal["vnc", "spice", "x2go"] = Field(
        description="remote-desktop protocol shown in the browser: VNC through noVNC, SPICE through "
        "spice-html5; X2Go (no browser client) through the native X2Go client on the worker, shown "
        "over an unimpaired local view (x11vnc + noVNC)"
    )
    hold: p.Duration(10.0, 3000.0) = Field(  # type: ignore[valid-type]
        default=900.0, description="maximum time the session stays up, even if never released"
    )
    screens: int = Field(default=5, ge=1, le=100, description="workload pages (screens per condition)")
    seed: int = Field(default=1, ge=0, le=2**31 - 1, description="workload pages and link PRNG seed")
    verify_duration: p.Duration(0.0, 10.0) = Field(  # type: ignore[valid-type]
        default=1.0, description="seconds per TCP test of the link check before the session (0: skip)"
    )
    vnc_server: Literal["x11vnc", "tigervnc"] = Field(default="x11vnc", description="VNC server program")
    x2go_link: Literal["modem", "isdn", "adsl", "wan", "lan"] = Field(
        default="adsl", description="X2Go link quality (the thesis: adsl)"
    )
    x2go_pack: str = Field(
        default="16m-jpeg-9", pattern=r"^[0-9a-z-]{1,40}$", description="X2Go compression method"
    )
    spice_image_compression: Literal["auto_glz", "auto_lz", "quic", "glz", "lz", "off"] = Field(
        default="auto_glz", description="SPICE server image compression"
    )

    def settings(self) -> dict[str, Any]:
        if self.protocol == "vnc":
            return {"server": self.vnc_server}
        if self.protocol == "x2go":
            return {"link": self.x2go_link, "pack": self.x2go_pack}
        return {"image_compression": self.spice_image_compression}


def backend_channel(ctx: TrialContext) -> Channel:
    """``POST /api/hosts/trials/<id>/live/`` with the host token: the worker's client (the runner
    sets ``ctx.report_live``), else one made from the environment."""
    if ctx.report_live is not None:
        return ctx.report_live
    from qoelab.client import BackendClient

    url, token = os.environ.get("QOELAB_BACKEND_URL", ""), os.environ.get("QOELAB_HOST_TOKEN", "")
    if not url or not token:
        raise QoelabError(
            "live_session needs the backend: set QOELAB_BACKEND_URL and QOELAB_HOST_TOKEN (a worker has them)"
        )
    client = BackendClient(url, token)
    return functools.partial(client.live_report, ctx.trial_id)


def serve(params: LiveSessionParams, ctx: TrialContext, channel: Channel) -> TrialResult:
    """The runner with an explicit control channel (the worker passes the backend's)."""
    from qoelab.emulation.topology import emulated_link
    from qoelab.emulation.verify import verify_link
    from qoelab.rd.clients import resolve_settings
    from qoelab.rd.live import LiveSession, hold

    t0 = time.monotonic()
    settings = resolve_settings(params.protocol, params.settings())
    result = TrialResult()
    with emulated_link(params.to_profile(seed=params.seed), prefix=ctx.prefix,
                       log_path=ctx.workdir / "linkemu.log") as link:  # fmt: skip
        if params.verify_duration > 0:
            result.link = verify_link(link, duration_s=float(params.verify_duration))
        session = LiveSession(
            params.protocol, link.server_ns, link.client_ns, link.server_ip, ctx.workdir / "live",
            ctx.prefix, settings, pages=params.screens, seed=params.seed, log=ctx.log,
        )  # fmt: skip
        try:
            info = session.start()
            setup_s = time.monotonic() - t0
            answer = channel({"session": {**info, "link_backend": link.backend}})
            if answer.get("release"):
                ended = {"reason": str(answer.get("reason") or "released"), "held_s": 0.0, "pages_seen": 0}
            else:
                left = ctx.time_left()
                deadline = None if left is None else time.monotonic() + max(left - 20.0, 1.0)
                ended = hold(session, channel, float(params.hold), deadline=deadline)
        finally:
            session.stop()
            for log_file in sorted((ctx.workdir / "live" / "logs").glob("*.log")):
                ctx.add_artifact(log_file, "log")
    ctx.log.info("live session ended: %s after %.0f s, %d screens", ended["reason"], ended["held_s"],
                 ended["pages_seen"])  # fmt: skip
    result.summary = {
        "setup_s": setup_s,
        "held_s": ended["held_s"],
        "screens": float(ended["pages_seen"]),
        # 1.0: the evaluator saw the native X2Go client through an unimpaired local view.
        "local_view": 1.0 if info.get("local_view") else 0.0,
    }
    result.provenance = {
        "protocol": params.protocol,
        "settings": settings,
        "client": info["client"],
        "local_view": bool(info.get("local_view")),
        "view_note": info["note"],
        "proxy": (
            "websockify (root namespace) -> x11vnc on the X2Go client's display (loopback, not impaired); "
            "X2Go client (client namespace) -> emulated link -> x2goserver"
            if info.get("local_view")
            else "websockify (root namespace) -> unix socket -> socat (client namespace) -> emulated link"
        ),
        "end_reason": ended["reason"],
        "emulation_backend": link.backend,
    }
    return result


def run(params: LiveSessionParams, ctx: TrialContext) -> TrialResult:
    return serve(params, ctx, backend_channel(ctx))


JOB = JobType(
    name="live_session",
    title="Live remote-desktop session (ratings)",
    description=(
        "An evaluator operates VNC (noVNC) or SPICE (spice-html5) in the browser; the WebSocket "
        "proxy sits on the client side of the emulated link. X2Go: the native client on the worker, "
        "shown through an unimpaired local view (x11vnc + noVNC). Created by the ratings app per "
        "live slot."
    ),
    params=LiveSessionParams,
    internal=True,
    requires=frozenset({"netns", "link", "rd.desktop"}),
    # The session's server, and for X2Go its native client (the others' client is the browser).
    requires_for=lambda params: (
        PROTOCOL_CAPS[params.protocol]
        if params.protocol == "x2go"
        else frozenset({f"rd.{params.protocol}.server"})
    ),
    run=run,
    metrics=(
        Metric("setup_s", "setup time", "s"),
        Metric("held_s", "session time", "s"),
        Metric("screens", "screens gone through"),
        Metric("local_view", "shown through a local view (X2Go)"),
    ),
    timeout_s=TIMEOUT_S,
    max_attempts=1,
    probes=("qoelab.rd.capability:probe",),
    cleanups=(Cleanup("qoelab.rd.cleanup:cleanup_leftovers"),),
)
