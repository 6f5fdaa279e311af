"""Evaluator pages under /rate/<token>/: consent, training, conditions, thanks. No account needed.

The token in the link is the credential; the first open also binds the browser's session to the
evaluator (so ``/rate/`` alone resumes in that browser). Forms post with CSRF; the page script
reports seen screens to the token-authenticated API. Every rule is checked again on the server
in ``ratings.flow``.
"""

from __future__ import annotations

import mimetypes
import os
import re
import shutil
from pathlib import Path
from typing import Any

from django.http import FileResponse, Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.cache import never_cache
from django.views.decorators.clickjacking import xframe_options_sameorigin
from django.views.decorators.http import require_GET, require_http_methods

from ratings import campaigns, delivery, flow, invitations, live, throttle
from ratings.choices import (
    TRAINING_KINDS,
    CampaignMode,
    CampaignStatus,
    ConditionKind,
    Phase,
    Stage,
    scale_of,
)
from ratings.models import Condition, Evaluator
from results import kinds

SESSION_KEY = "qoelab_rate_evaluator"


def _no_referrer(response: HttpResponse) -> HttpResponse:
    # The token is in the URL: keep it out of Referer headers to other sites and out of shared caches.
    # (no-referrer would make Chromium send "Origin: null" on our own form posts, failing CSRF.)
    response["Referrer-Policy"] = "same-origin"
    response["Cache-Control"] = "no-store"
    return response


def _page(request: HttpRequest, template: str, ctx: dict[str, Any], status: int = 200) -> HttpResponse:
    return _no_referrer(render(request, f"ratings/{template}", ctx, status=status))


def _evaluator(request: HttpRequest, token: str, bind: bool = False) -> Evaluator | None:
    """The link's evaluator. ``bind``: remember it in this browser's session (``/rate/`` without a
    token then says a link was opened here): only when the evaluator acts (a POST), so a crawler's
    or a preview's cookie-less GETs create no session rows (200 requests made 400, issue 33)."""
    ev = invitations.evaluator_for_token(token)
    if bind and ev is not None and request.session.get(SESSION_KEY) != ev.pk:
        request.session[SESSION_KEY] = ev.pk
    return ev


@require_GET
@never_cache
def resume(request: HttpRequest) -> HttpResponse:
    """``/rate/``: without a token in the link, tell the person what to do."""
    return _page(request, "invalid.html", {"bound": bool(request.session.get(SESSION_KEY))}, status=404)


@require_http_methods(["GET", "POST"])
@never_cache
def rate(request: HttpRequest, token: str) -> HttpResponse:
    ev = _evaluator(request, token, bind=request.method == "POST")
    if ev is None:
        return _page(request, "invalid.html", {"bound": False}, status=404)
    flow.open_link(ev)
    campaign = ev.campaign
    error = ""
    status = 200
    if request.method == "POST":
        action = request.POST.get("action", "")
        try:
            if action == "consent":
                if request.POST.get("agree") != "yes":
                    raise flow.FlowError("Please tick the box to confirm that you agree.", 400)
                flow.give_consent(ev)
            elif action == "rate":
                ok, wait = throttle.allow(ev.pk)
                if not ok:
                    raise flow.FlowError(f"Too many submissions; please wait {wait} s and try again.", 429)
                cid = request.POST.get("condition", "")
                if not cid.isdigit():
                    raise flow.FlowError("The form is missing the condition; please reload the page.", 400)
                scores = {a: request.POST.get(f"score_{a}") for a in campaign.aspect_keys}
                scores = {k: v for k, v in scores.items() if v not in (None, "")}
                flow.submit_ratings(ev, int(cid), scores)
            else:
                raise flow.FlowError("Unknown action; please reload the page.", 400)
        except flow.FlowError as exc:
            error, status = exc.message, exc.status
        else:
            return _no_referrer(redirect("ratings_rate:rate", token=token))
        ev.refresh_from_db()

    ctx: dict[str, Any] = {"token": token, "evaluator": ev, "campaign": campaign, "error": error}
    if campaign.status == CampaignStatus.DRAFT:
        return _page(request, "not_open.html", {**ctx, "message": "This campaign has not started yet."}, 409)
    if ev.finished_at is not None:
        return _page(request, "thanks.html", ctx, status)
    if campaign.status == CampaignStatus.CLOSED:
        return _page(request, "not_open.html", {**ctx, "message": "This campaign is closed."}, 409)
    if ev.consent_at is None:
        ctx.update(
            {
                "aspects": flow.aspect_rows(campaign),
                "scale": scale_of(campaign.method),
                "live": campaign.mode == CampaignMode.LIVE,
                "acr": Stage.REFERENCE not in campaign.stages,
            }
        )
        return _page(request, "consent.html", ctx, status)

    cond = Condition.objects.select_related("recording", "reference").get(pk=ev.current_condition_id())
    state = flow.form_state(ev, cond)
    n_training = Condition.objects.filter(pk__in=ev.order, kind__in=list(TRAINING_KINDS)).count()
    training = cond.phase == Phase.TRAINING
    ctx.update(
        {
            "condition": cond,
            "training": training,
            "anchor": "best" if cond.kind == ConditionKind.TRAINING_BEST else "worst" if training else "",
            "number": ev.position + 1 if training else ev.position + 1 - n_training,
            "of": n_training if training else ev.total - n_training,
            "done": ev.position,
            "total": ev.total,
            "percent": round(100 * ev.position / max(ev.total, 1)),
            "state": state,
            "aspects": flow.aspect_rows(campaign),
            "scale": scale_of(campaign.method),
            "recorded": campaign.mode == CampaignMode.RECORDED,
            "acr": Stage.REFERENCE not in campaign.stages,
            "live_available": live.available(),
            "live_reason": "" if live.available() else live.EVALUATOR_UNAVAILABLE,
            "reference_url": reverse("ratings_rate:media", args=[token, cond.pk, Stage.REFERENCE]),
            "degraded_url": reverse("ratings_rate:media", args=[token, cond.pk, Stage.DEGRADED]),
            "live_reference_url": reverse("ratings_rate:live-reference", args=[token, cond.pk, "page1.html"]),
            "api_base": "/api/rate/",
            "posted": request.POST if request.method == "POST" else {},
        }
    )
    return _page(request, "condition.html", ctx, status)


@require_GET
def media(request: HttpRequest, token: str, condition: int, stage: str) -> HttpResponse:
    """The reference or degraded video of a condition in this evaluator's own task list.

    Answers HTTP Range requests (206) and records the bytes handed out (``ratings.delivery``): the
    server's own evidence that the stimulus reached the page before it may be rated.
    """
    ev = _evaluator(request, token)
    if ev is None or stage not in ev.campaign.stages or condition not in (ev.order or []):
        raise Http404("no such video for this link")
    cond = Condition.objects.select_related("recording", "reference").get(pk=condition)
    artifact = cond.reference if stage == Stage.REFERENCE else cond.recording
    if not campaigns.artifact_usable(artifact):
        raise Http404("no recording for this condition yet")
    try:
        # Played in the page, so inline; only a video by its bytes, with the type of its format.
        response = kinds.file_response(artifact, inline=True)
    except (FileNotFoundError, kinds.ContentMismatch):
        raise Http404("no playable recording for this condition") from None
    handle = response.file_to_stream
    size = handle.seek(0, os.SEEK_END)
    try:
        byte_range = delivery.parse_range(request.headers.get("Range"), size)
    except delivery.RangeNotSatisfiable:
        handle.close()  # not response.close(): that would signal the end of the request
        refused = HttpResponse(status=416)
        refused["Content-Range"] = f"bytes */{size}"
        return refused
    start, end = byte_range or (0, size)
    row = delivery.open_delivery(ev, cond, stage, artifact, size, start, end)
    response.streaming_content = delivery.stream(handle, row.pk, start, end)
    response["Content-Length"] = str(end - start)
    response["Accept-Ranges"] = "bytes"
    if byte_range is not None:
        response.status_code = 206
        response["Content-Range"] = f"bytes {start}-{end - 1}/{size}"
    response["Cache-Control"] = "private, no-store"
    response["Referrer-Policy"] = "same-origin"
    return response


REFERENCE_FILE = re.compile(r"^[A-Za-z0-9_-]{1,40}\.(html|jpg|jpeg|png)$")
# The generated workload pages (qoelab.rd.workload) position everything with style attributes and run
# no script; only the evaluator page may frame them.
LIVE_REFERENCE_CSP = (
    "default-src 'none'; img-src 'self'; style-src 'unsafe-inline'; frame-ancestors 'self'; "
    "base-uri 'none'; form-action 'none'"
)
# The workload a live_session trial shows (qoelab.jobs.live_session: seed 1, one page per screen).
LIVE_WORKLOAD_SEED = 1


def live_reference_dir(pages: int) -> Path:
    """The live reference pages, generated once per page count (the generator is deterministic)."""
    from django.conf import settings

    from qoelab.rd.workload import generate

    out = Path(settings.MEDIA_ROOT) / "live-reference" / f"seed{LIVE_WORKLOAD_SEED}-pages{pages}"
    if not (out / "manifest.json").exists():
        tmp = out.with_name(out.name + f".tmp{os.getpid()}")
        generate(tmp, pages=pages, seed=LIVE_WORKLOAD_SEED)
        out.parent.mkdir(parents=True, exist_ok=True)
        try:
            tmp.rename(out)
        except OSError:  # another request made it first
            shutil.rmtree(tmp, ignore_errors=True)
    return out


@require_GET
@xframe_options_sameorigin
def live_reference(request: HttpRequest, token: str, condition: int, name: str) -> FileResponse:
    """Live mode's reference: the session's workload pages at 800x600, without a remote desktop."""
    ev = _evaluator(request, token)
    if ev is None or condition not in (ev.order or []) or ev.campaign.mode != "live":
        raise Http404("no such page for this link")
    if not REFERENCE_FILE.match(name):
        raise Http404("no such page")
    path = live_reference_dir(max(ev.campaign.screens_per_condition, 2)) / name
    if not path.is_file():
        raise Http404("no such page")
    ctype = mimetypes.guess_type(path.name)[0] or "application/octet-stream"
    response = FileResponse(path.open("rb"), content_type=ctype)
    response["Content-Security-Policy"] = LIVE_REFERENCE_CSP
    response["Cache-Control"] = "private, no-store"
    response["Referrer-Policy"] = "same-origin"
    return response
