"""Live mode: slot reservations, the queue, timeouts, and the hook where remote sessions plug in.

A live evaluator operates the remote desktop in the page, so the lab can serve only a few at once.
Each evaluator holds at most one slot; ``reserve`` puts them in the queue, ``promote`` makes the
oldest waiting slots active while capacity allows and asks the session provider to start a session,
and ``release_expired_slots`` (called by the scheduler loop or ``manage.py ratings_release_slots``)
frees slots whose page stopped renewing them.

The session provider is the hook for the remote-desktop engineers: a module named by the setting
``QOELAB_LIVE_SESSION_PROVIDER`` with

    start_session(slot) -> {"websocket_url": "wss://...", "client": "novnc" | "spice-html5" | "x2go-view",
                            "password": "...", "note": "..."}
    stop_session(slot) -> None

``start_session`` reserves the worker, applies the condition's link profile and starts the server;
the evaluator page reads the answer from ``GET /api/rate/session/`` and mounts the client in the
``live_session`` template block. Without a provider this deployment says plainly that live
sessions are unavailable, and live campaigns cannot be opened.
"""

from __future__ import annotations

import importlib
import logging
import os
from datetime import timedelta
from types import ModuleType
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from ratings.choices import SlotState
from ratings.models import Condition, Evaluator, Slot

log = logging.getLogger("qoelab.ratings.live")


def _setting(name: str, default: Any) -> Any:
    if hasattr(settings, name):
        return getattr(settings, name)
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    return type(default)(raw) if not isinstance(default, str) else raw


def capacity() -> int:
    return int(_setting("QOELAB_LIVE_SLOTS", 1))


def wait_ttl() -> timedelta:
    """A waiting slot whose page stopped polling for this long leaves the queue."""
    return timedelta(seconds=int(_setting("QOELAB_LIVE_WAIT_SECONDS", 60)))


def active_ttl() -> timedelta:
    """An active session not renewed for this long is released (closed tab, lost network)."""
    return timedelta(seconds=int(_setting("QOELAB_LIVE_ACTIVE_SECONDS", 120)))


def max_session() -> timedelta:
    """Hard limit of one live session, renewals included."""
    return timedelta(seconds=int(_setting("QOELAB_LIVE_MAX_SESSION_SECONDS", 900)))


def provider() -> ModuleType | None:
    path = _setting("QOELAB_LIVE_SESSION_PROVIDER", "")
    if not path:
        return None
    try:
        mod = importlib.import_module(path)
    except ImportError as exc:
        log.error("live session provider %s cannot be imported: %s", path, exc)
        return None
    if not callable(getattr(mod, "start_session", None)):
        log.error("live session provider %s has no start_session(slot)", path)
        return None
    return mod


def available() -> bool:
    return provider() is not None


def unavailable_reason() -> str:
    path = _setting("QOELAB_LIVE_SESSION_PROVIDER", "")
    if path:
        return (
            f"Live sessions are not available on this deployment: the session provider {path!r} "
            "cannot be loaded (see the server log)."
        )
    return (
        "Live sessions are not available on this deployment: no remote-session provider is configured "
        "(QOELAB_LIVE_SESSION_PROVIDER; see docs/ratings.md). Use recorded mode."
    )


# What an evaluator reads instead (issue 33: the researcher's sentence about the provider setting
# and docs/ratings.md was shown to evaluators).
EVALUATOR_UNAVAILABLE = (
    "Live sessions are not available on this deployment right now, so this case cannot be rated "
    "here. Please tell the researcher who sent you the link."
)


def open_slot(evaluator: Evaluator) -> Slot | None:
    return Slot.objects.filter(evaluator=evaluator).exclude(state=SlotState.RELEASED).first()


def queue_position(slot: Slot) -> int:
    """1 for the first in line; 0 when the slot is active or released."""
    if slot.state != SlotState.WAITING:
        return 0
    return Slot.objects.filter(state=SlotState.WAITING, created__lt=slot.created).count() + 1


def _release(qs: Any, reason: str) -> list[Slot]:
    slots = list(qs.select_for_update())
    now = timezone.now()
    mod = provider()
    for s in slots:
        if s.state == SlotState.ACTIVE and mod is not None and callable(getattr(mod, "stop_session", None)):
            try:
                mod.stop_session(s)
            except Exception:  # a provider failure must not keep the slot taken
                log.exception("stop_session failed for slot %s", s.pk)
        s.state, s.released_at, s.release_reason = SlotState.RELEASED, now, reason[:200]
        s.save(update_fields=["state", "released_at", "release_reason"])
    return slots


def promote() -> list[Slot]:
    """Activate the oldest waiting slots while there is capacity and a provider to start sessions."""
    mod = provider()
    if mod is None:
        return []
    started = []
    with transaction.atomic():
        # Lock the queue so two requests cannot both take the last free slot.
        waiting = list(
            Slot.objects.select_for_update().filter(state=SlotState.WAITING).order_by("created", "id")
        )
        free = capacity() - Slot.objects.filter(state=SlotState.ACTIVE).count()
        for slot in waiting[: max(free, 0)]:
            now = timezone.now()
            try:
                session = mod.start_session(slot) or {}
            except Exception as exc:
                log.exception("start_session failed for slot %s", slot.pk)
                session = {"error": f"the remote session could not start: {exc}"}
            slot.state, slot.activated_at, slot.session = SlotState.ACTIVE, now, session
            slot.expires_at = now + active_ttl()
            slot.save(update_fields=["state", "activated_at", "session", "expires_at"])
            started.append(slot)
    return started


def reserve(evaluator: Evaluator, condition: Condition) -> Slot:
    """The evaluator's slot for ``condition`` (new one in the queue, or the existing one renewed)."""
    now = timezone.now()
    with transaction.atomic():
        slot = (
            Slot.objects.select_for_update()
            .filter(evaluator=evaluator)
            .exclude(state=SlotState.RELEASED)
            .first()
        )
        if slot is not None and slot.condition_id != condition.pk:
            _release(Slot.objects.filter(pk=slot.pk), "moved to another condition")
            slot = None
        if slot is None:
            slot = Slot.objects.create(condition=condition, evaluator=evaluator, expires_at=now + wait_ttl())
        else:
            renew(slot)
    promote()
    slot.refresh_from_db()
    return slot


def renew(slot: Slot) -> None:
    now = timezone.now()
    if slot.state == SlotState.WAITING:
        slot.expires_at = now + wait_ttl()
    elif slot.state == SlotState.ACTIVE:
        slot.expires_at = min(now + active_ttl(), (slot.activated_at or now) + max_session())
    else:
        return
    Slot.objects.filter(pk=slot.pk).exclude(state=SlotState.RELEASED).update(expires_at=slot.expires_at)


def release_for(evaluator: Evaluator, reason: str) -> int:
    with transaction.atomic():
        n = len(_release(Slot.objects.filter(evaluator=evaluator).exclude(state=SlotState.RELEASED), reason))
    if n:
        promote()
    return n


def release_expired_slots(now: Any = None) -> int:
    """Release every slot past its expiry and let the queue move; the scheduler calls this."""
    now = now or timezone.now()
    with transaction.atomic():
        n = len(
            _release(
                Slot.objects.exclude(state=SlotState.RELEASED).filter(expires_at__lt=now),
                "timed out (not renewed)",
            )
        )
    promote()
    if n:
        log.info("released %d expired live slot(s)", n)
    return n


def slot_json(slot: Slot | None) -> dict[str, Any]:
    if slot is None:
        return {"state": "none", "queue_position": 0, "available": available()}
    return {
        "id": slot.pk,
        "state": slot.state,
        "condition": slot.condition_id,
        "queue_position": queue_position(slot),
        "expires_at": slot.expires_at.isoformat(),
        "available": available(),
    }


def worker_report(trial_id: int, host_id: int | None, body: dict[str, Any]) -> dict[str, Any]:
    """A live_session worker's report: the session info once, then the screens; answers release or not.

    The slot is found by the trial its session provider started (``session.trial``). The first report
    with ``session`` (WebSocket URL, client kind) makes the session ready for the page; later ones
    update ``pages_seen`` (pages the remote kiosk browser loaded after the first). The answer
    ``{"release": true}`` tells the worker to tear the session down: the slot was released (page
    closed, timed out, moved on) or no slot knows the trial.
    """
    with transaction.atomic():
        slot = Slot.objects.select_for_update().filter(session__trial=trial_id).order_by("-id").first()
        if slot is None:
            return {"release": True, "reason": f"no live slot is waiting for trial {trial_id}"}
        if slot.state != SlotState.ACTIVE:
            return {"release": True, "reason": slot.release_reason or f"the slot is {slot.state}"}
        session = dict(slot.session or {})
        info = body.get("session")
        if isinstance(info, dict):
            for key in (
                "websocket_url",
                "client",
                "password",
                "note",
                "protocol",
                "link_backend",
                "local_view",
            ):
                if key in info:
                    session[key] = info[key]
            session["ready"] = True
            session["host"] = host_id
        if isinstance(body.get("pages_seen"), int):
            session["pages_seen"] = body["pages_seen"]
        if body.get("error"):
            session["error"] = f"the remote session broke: {body['error']}"[:500]
        slot.session = session
        slot.save(update_fields=["session"])
    return {"release": False, "reason": ""}
