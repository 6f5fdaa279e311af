"""The live-session provider: one ``live_session`` trial per active slot, routed by the normal scheduler.

Set ``QOELAB_LIVE_SESSION_PROVIDER = "ratings.live_provider"``. ``start_session(slot)`` creates, in the
campaign owner's experiment "Live sessions: <campaign>", a one-trial sweep of the job type
``live_session`` with the condition's protocol and link fields, so the scheduler sends it to a
worker that can run it. The worker reports the WebSocket URL and the screens the evaluator went
through with ``POST /api/hosts/trials/<id>/live/`` (``live.worker_report``), which also tells it when
the slot was released. ``stop_session(slot)`` cancels the trial if no worker took it yet; a running
one stops at its next report (within a few seconds), because the slot is then released.

X2Go has no browser client: its trial runs the native X2Go client on the worker and shows that
client's display through an unimpaired local view (x11vnc + noVNC, client kind ``x2go-view``). The
session says so from the start (``local_view``, ``note``), so the page shows it, and the trial's
summary and provenance record it for the results.
"""

from __future__ import annotations

import logging
from typing import Any

from experiments import services as experiment_services
from experiments.models import Sweep, Trial

log = logging.getLogger("qoelab.ratings.live")

# Condition parameters that are part of the link (qoelab.emulation.profile.LinkParams) or the
# protocol; others (durations of the benchmark...) are how a trial measured, not the condition.
PASSED = ("protocol", "rate", "delay", "jitter", "loss", "up_rate", "up_delay", "up_jitter", "up_loss",
          "gemodel", "limit", "mtu", "backend", "spice_image_compression", "vnc_server",
          "x2go_link", "x2go_pack")  # fmt: skip
# The same sentence the worker reports (qoelab.rd.live.LOCAL_VIEW_NOTE); the page shows it.
LOCAL_VIEW_NOTE = (
    "You are seeing the X2Go client's screen through a local view; the network conditions apply "
    "between that client and the server."
)


def _link_fields() -> set[str]:
    from qoelab.jobs.live_session import LiveSessionParams

    return set(LiveSessionParams.model_fields)


def session_params(slot: Any) -> dict[str, Any]:
    from ratings.live import max_session

    cond = slot.condition
    known = _link_fields()
    params = {k: v for k, v in (cond.params or {}).items() if k in PASSED and k in known and v is not None}
    params["hold"] = float(max_session().total_seconds())
    params["screens"] = int(cond.campaign.screens_per_condition)
    return params


def start_session(slot: Any) -> dict[str, Any]:
    protocol = (slot.condition.params or {}).get("protocol")
    campaign = slot.condition.campaign
    spec = {
        "experiment": {
            "name": f"Live sessions: {campaign.name}"[:200],
            "description": f"live_session trials of rating campaign {campaign.pk} (one per live slot)",
        },
        "job_type": "live_session",
        "name": f"slot {slot.pk}: {slot.condition.label}"[:200],
        # A sweep needs a non-empty grid: the protocol is its one point.
        "grid": {"protocol": [protocol]},
        "fixed": {k: v for k, v in session_params(slot).items() if k != "protocol"},
        "repetitions": 1,
    }
    try:
        sweep = experiment_services.create_sweep(spec, campaign.owner)
    except experiment_services.SpecError as exc:
        problems = "; ".join(f"{e['field']}: {e['message']}" for e in exc.errors)
        return {"error": f"the remote session could not be requested: {problems}"}
    trial = sweep.trials.get()
    log.info("slot %s: live_session trial %s (%s) requested", slot.pk, trial.pk, protocol)
    session: dict[str, Any] = {"trial": trial.pk, "sweep": sweep.pk, "protocol": protocol, "ready": False}
    if protocol == "x2go":
        session.update(local_view=True, client="x2go-view", note=LOCAL_VIEW_NOTE)
    return session


def stop_session(slot: Any) -> None:
    sweep_id = (slot.session or {}).get("sweep")
    if sweep_id is None:
        return
    sweep = Sweep.objects.filter(pk=sweep_id).first()
    if sweep is not None:
        n = experiment_services.cancel_sweep(sweep)
        log.info("slot %s: live session stopped (%d trial(s) cancelled before start)", slot.pk, n)


def trial_for(slot: Any) -> Trial | None:
    trial_id = (slot.session or {}).get("trial")
    return Trial.objects.filter(pk=trial_id).first() if trial_id else None
