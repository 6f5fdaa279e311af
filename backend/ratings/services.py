"""Campaign logic: build conditions (from a sweep or by hand), invite, the evaluator flow, analysis.

Views and API call these functions; they hold every rule the server enforces (order, required
screens, idempotent submit, what "ready to open" means), so the HTML pages and the API agree.
"""

from __future__ import annotations

import csv
import io
import random
import re
import secrets
from collections import defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import Count
from django.utils import timezone

from experiments.choices import TrialStatus
from experiments.models import Sweep, Trial
from qoelab.emulation.profile import LinkParams
from qoelab.errors import ParameterError
from qoelab.units import format_duration, format_rate, parse_duration, parse_percent, parse_rate
from ratings import delivery, stats
from ratings.choices import (
    ASPECT_HELP,
    IMPAIRMENT_SCALE,
    SCORE_MAX,
    SCORE_MIN,
    TRAINING_KINDS,
    CampaignMode,
    CampaignStatus,
    ConditionKind,
    Phase,
    Stage,
)
from ratings.models import Campaign, Condition, Evaluator, Rating, ScreenEvent, default_aspects, hash_token
from results.models import Artifact, SummaryValue

# Parameters that describe the condition (protocol, where its server runs, link profile); the rest
# (durations, workload settings) are how a trial measures it, not what the evaluator experiences.
# The server mode is experienced: QEMU's servers encode the screen differently (docs/vm.md).
LINK_KEYS = frozenset(LinkParams.model_fields) | {"protocol", "server"}
KEY_ORDER = ("protocol", "server", "rate", "delay", "loss", "jitter", "up_rate", "up_delay", "up_loss")
MAX_ASPECTS = 8
MAX_CONDITIONS = 200
MAX_INVITES = 200
ASPECT_KEY = re.compile(r"^[a-z][a-z0-9_]{0,63}$")
# Artifacts of kind "video": a name starting with this is the locally rendered reference.
REFERENCE_PREFIX = "reference"
VIDEO_KIND = "video"


class CampaignError(Exception):
    """Invalid campaign input: ``errors`` is [{field, message}] (the API's error shape)."""

    def __init__(self, errors: list[dict[str, str]]) -> None:
        self.errors = errors
        super().__init__("; ".join(f"{e['field']}: {e['message']}" for e in errors))


class FlowError(Exception):
    """The evaluator asked for something the flow does not allow now; ``message`` is shown as is."""

    def __init__(self, message: str, status: int = 409) -> None:
        self.message = message
        self.status = status
        super().__init__(message)


# ---------------------------------------------------------------------------------------------
# Conditions


def si_params(params: dict[str, Any]) -> dict[str, float | None]:
    """rate (bit/s), delay (s), loss (%) of a condition in SI, None where absent or unreadable."""

    def conv(fn: Any, key: str) -> float | None:
        if params.get(key) in (None, ""):
            return None
        try:
            return float(fn(params[key], key))
        except ParameterError:
            return None

    return {
        "rate_bps": conv(parse_rate, "rate"),
        "delay_s": conv(parse_duration, "delay"),
        "loss_pct": conv(parse_percent, "loss"),
    }


def system_name(params: dict[str, Any]) -> str:
    """The protocol as results group it: VM-mode conditions apart from the namespace desktop's."""
    protocol = str(params.get("protocol", ""))
    return f"{protocol} (VM)" if params.get("server") == "vm" else protocol


def condition_label(params: dict[str, Any]) -> str:
    keys = [k for k in KEY_ORDER if k in params] + sorted(k for k in params if k not in KEY_ORDER)
    parts = []
    for k in keys:
        v = params[k]
        parts.append(str(v) if k in ("protocol", "rate", "delay") else f"{k} {v}")
    return " · ".join(parts) or "condition"


def validate_condition_params(params: Any, field: str) -> dict[str, Any]:
    if not isinstance(params, dict):
        raise CampaignError(
            [{"field": field, "message": "must be an object such as {protocol, rate, delay}"}]
        )
    errors = []
    for key, fn in (("rate", parse_rate), ("delay", parse_duration), ("loss", parse_percent)):
        if params.get(key) not in (None, ""):
            try:
                fn(params[key], key)
            except ParameterError as exc:
                errors.append({"field": f"{field}.{key}", "message": str(exc)})
    if "protocol" in params and not isinstance(params["protocol"], str):
        errors.append({"field": f"{field}.protocol", "message": "must be a protocol name such as vnc"})
    if errors:
        raise CampaignError(errors)
    return params


def _measured_tcp(trials: list[Trial]) -> float | None:
    """Mean measured TCP goodput (down) of the trials' link verifications, or their summary value."""
    values = []
    for t in trials:
        link = t.link or {}
        # A short check measures RTT only; the goodput is the full verification's it relied on.
        value = (link.get("measured") or {}).get("tcp_down_bps")
        if value is None:
            value = ((link.get("reused") or {}).get("measured") or {}).get("tcp_down_bps")
        if isinstance(value, int | float):
            values.append(float(value))
    if not values:
        values = list(
            SummaryValue.objects.filter(trial__in=trials, name="tcp_down_bps").values_list("value", flat=True)
        )
    return sum(values) / len(values) if values else None


def _videos(trial_ids: list[int]) -> tuple[Artifact | None, Artifact | None]:
    """(degraded recording, reference recording): the newest video artifacts of the trials."""
    recording = reference = None
    for a in Artifact.objects.filter(trial_id__in=trial_ids, kind=VIDEO_KIND).order_by("-created", "-id"):
        if a.name.lower().startswith(REFERENCE_PREFIX):
            reference = reference or a
        else:
            recording = recording or a
    return recording, reference


def conditions_from_sweep(sweep: Sweep) -> list[dict[str, Any]]:
    """One condition per distinct (protocol, link profile) of the sweep's trials, in trial order."""
    groups: dict[tuple, list[Trial]] = {}
    for trial in sweep.trials.order_by("index"):
        link = {k: v for k, v in (trial.params or {}).items() if k in LINK_KEYS}
        key = tuple(sorted((k, repr(v)) for k, v in link.items()))
        groups.setdefault(key, []).append(trial)
    out = []
    for trials in groups.values():
        link = {k: v for k, v in (trials[0].params or {}).items() if k in LINK_KEYS}
        ok = [t for t in trials if t.status == TrialStatus.SUCCEEDED] or trials
        recording, reference = _videos([t.pk for t in ok])
        out.append(
            {
                "label": condition_label(link),
                "params": link,
                "source_trials": [t.pk for t in trials],
                "measured_tcp_bps": _measured_tcp(ok),
                "recording": recording,
                "reference": reference,
            }
        )
    return out


def _anchor_order(cond: dict[str, Any]) -> tuple[float, float, float]:
    """Sort key 'better first': higher rate, then lower delay, then lower loss."""
    si = si_params(cond["params"])
    rate = cond.get("measured_tcp_bps") or si["rate_bps"] or 0.0
    return (-rate, si["delay_s"] or 0.0, si["loss_pct"] or 0.0)


def validate_aspects(aspects: Any) -> list[dict[str, str]]:
    if aspects in (None, "", []):
        return default_aspects()
    if not isinstance(aspects, list):
        raise CampaignError([{"field": "aspects", "message": "must be a list of {key, label}"}])
    if len(aspects) > MAX_ASPECTS:
        raise CampaignError(
            [{"field": "aspects", "message": f"at most {MAX_ASPECTS} aspects, got {len(aspects)}"}]
        )
    out, seen, errors = [], set(), []
    for i, a in enumerate(aspects):
        if isinstance(a, str):
            a = {"key": re.sub(r"[^a-z0-9_]+", "_", a.strip().lower()).strip("_"), "label": a.strip()}
        key, label = (a or {}).get("key", ""), ((a or {}).get("label") or "").strip()
        if not ASPECT_KEY.match(key or ""):
            errors.append(
                {"field": f"aspects[{i}].key", "message": "lower-case letters, digits and _ (max 64)"}
            )
        elif key in seen:
            errors.append({"field": f"aspects[{i}].key", "message": f"duplicate aspect {key!r}"})
        if not label:
            errors.append({"field": f"aspects[{i}].label", "message": "must not be empty"})
        seen.add(key)
        out.append({"key": key, "label": label[:100]})
    if errors:
        raise CampaignError(errors)
    return out


@transaction.atomic
def create_campaign(
    owner: Any,
    *,
    name: str,
    mode: str = CampaignMode.RECORDED,
    aspects: Any = None,
    screens_per_condition: int = 5,
    sweep: Sweep | None = None,
    conditions: list[dict[str, Any]] | None = None,
    add_gold: bool = True,
    add_repeat: bool = True,
    training_best: int | None = None,
    training_worst: int | None = None,
    description: str = "",
    seed: int | None = None,
) -> Campaign:
    """Create a campaign with its normal conditions (from ``sweep`` and/or ``conditions``), a gold
    trap, a consistency repeat and the two training anchors (indices into the normal conditions;
    default: the best and the worst link). Nothing is created on error.
    """
    errors = []
    name = (name or "").strip()
    if not name:
        errors.append({"field": "name", "message": "must not be empty"})
    if mode not in CampaignMode.values:
        errors.append({"field": "mode", "message": f"must be one of {', '.join(CampaignMode.values)}"})
    if not isinstance(screens_per_condition, int) or not 1 <= screens_per_condition <= 50:
        errors.append({"field": "screens_per_condition", "message": "must be a whole number from 1 to 50"})
    if errors:
        raise CampaignError(errors)
    aspect_list = validate_aspects(aspects)

    normal: list[dict[str, Any]] = conditions_from_sweep(sweep) if sweep is not None else []
    for i, c in enumerate(conditions or []):
        field = f"conditions[{i}]"
        if not isinstance(c, dict):
            raise CampaignError([{"field": field, "message": "must be an object {label, params}"}])
        params = validate_condition_params(c.get("params", {}), f"{field}.params")
        tcp = c.get("measured_tcp_bps")
        if tcp is not None and (not isinstance(tcp, int | float) or tcp <= 0):
            raise CampaignError(
                [{"field": f"{field}.measured_tcp_bps", "message": "must be a positive number"}]
            )
        normal.append(
            {
                "label": (c.get("label") or condition_label(params)).strip()[:200],
                "params": params,
                "source_trials": [],
                "measured_tcp_bps": tcp,
                "recording": c.get("recording"),
                "reference": c.get("reference"),
            }
        )
    if not normal:
        raise CampaignError([{"field": "conditions", "message": "a campaign needs at least one condition"}])
    if len(normal) > MAX_CONDITIONS:
        raise CampaignError(
            [{"field": "conditions", "message": f"at most {MAX_CONDITIONS} conditions, got {len(normal)}"}]
        )
    ranked = sorted(range(len(normal)), key=lambda i: _anchor_order(normal[i]))
    for fname, idx in (("training_best", training_best), ("training_worst", training_worst)):
        if idx is not None and not (isinstance(idx, int) and 0 <= idx < len(normal)):
            raise CampaignError(
                [{"field": fname, "message": f"must be a condition index from 0 to {len(normal) - 1}"}]
            )
    best = training_best if training_best is not None else ranked[0]
    worst = training_worst if training_worst is not None else ranked[-1]

    campaign = Campaign.objects.create(
        owner=owner,
        name=name[:200],
        description=description,
        sweep=sweep,
        mode=mode,
        aspects=aspect_list,
        screens_per_condition=screens_per_condition,
    )
    rows = [
        Condition.objects.create(campaign=campaign, position=i, kind=ConditionKind.NORMAL, **c)
        for i, c in enumerate(normal)
    ]
    pos = len(rows)
    for kind, idx, prefix in (
        (ConditionKind.TRAINING_BEST, best, "Training (best)"),
        (ConditionKind.TRAINING_WORST, worst, "Training (worst)"),
    ):
        src = rows[idx]
        _copy_condition(src, kind, f"{prefix}: {src.label}", pos)
        pos += 1
    if add_gold:
        ref = next((r.reference for r in rows if r.reference_id), None)
        Condition.objects.create(
            campaign=campaign,
            label="Reference vs reference (gold)",
            params={"protocol": "reference"},
            kind=ConditionKind.GOLD,
            recording=ref,
            reference=ref,
            position=pos,
        )
        pos += 1
    if add_repeat:
        rng = random.Random(seed if seed is not None else secrets.randbits(32))
        src = rows[rng.randrange(len(rows))]
        rep = _copy_condition(src, ConditionKind.REPEAT, f"Repeat: {src.label}", pos)
        rep.repeat_of = src
        rep.save(update_fields=["repeat_of"])
    return campaign


def _copy_condition(src: Condition, kind: str, label: str, position: int) -> Condition:
    return Condition.objects.create(
        campaign=src.campaign,
        label=label[:200],
        params=dict(src.params),
        kind=kind,
        recording=src.recording,
        reference=src.reference,
        measured_tcp_bps=src.measured_tcp_bps,
        source_trials=list(src.source_trials),
        position=position,
    )


def attach_recordings(campaign: Campaign) -> int:
    """Fill in recordings that arrived after the campaign was made (RD trials finish later).

    Conditions copy their source's recordings (training anchors, repeats); the gold trap takes the
    first reference. Returns how many conditions changed. Only draft campaigns change.
    """
    if campaign.status != CampaignStatus.DRAFT:
        raise CampaignError(
            [{"field": "status", "message": "recordings can only change while the campaign is a draft"}]
        )
    changed = 0
    conds = list(campaign.conditions.all())
    for c in conds:
        if c.kind == ConditionKind.GOLD or not c.source_trials:
            continue
        recording, reference = _videos(list(c.source_trials))
        if (recording and recording.pk != c.recording_id) or (reference and reference.pk != c.reference_id):
            c.recording = recording or c.recording
            c.reference = reference or c.reference
            c.save(update_fields=["recording", "reference"])
            changed += 1
    ref = next((c.reference for c in conds if c.reference_id and c.kind == ConditionKind.NORMAL), None)
    for c in conds:
        if c.kind == ConditionKind.GOLD and ref and c.recording_id != ref.pk:
            c.recording = c.reference = ref
            c.save(update_fields=["recording", "reference"])
            changed += 1
    return changed


def artifact_usable(artifact: Artifact | None) -> bool:
    if artifact is None:
        return False
    try:
        return bool(artifact.file) and artifact.file.storage.exists(artifact.file.name)
    except (OSError, ValueError):
        return False


def condition_problems(campaign: Campaign, condition: Condition) -> list[str]:
    """What this condition lacks for the campaign's mode (empty when it can be rated)."""
    problems = []
    if campaign.mode == CampaignMode.RECORDED:
        if not artifact_usable(condition.recording):
            problems.append("no recording for this condition yet")
        if not artifact_usable(condition.reference):
            problems.append("no reference recording for this condition yet")
    elif condition.kind != ConditionKind.GOLD and not condition.params.get("protocol"):
        problems.append("no protocol: a live session needs to know which remote desktop to start")
    elif condition.params.get("server") == "vm":
        problems.append(
            "server vm: live sessions run the namespace desktop only; rate VM-mode conditions "
            "in a recorded campaign (rd_qoe with record: true)"
        )
    return problems


def readiness_problems(campaign: Campaign) -> list[dict[str, str]]:
    """Why the campaign cannot open yet, as [{field, message}] (empty: it can open)."""
    from ratings import live

    errors = []
    conds = list(campaign.conditions.select_related("recording", "reference"))
    kinds = {c.kind for c in conds}
    if ConditionKind.NORMAL not in kinds:
        errors.append({"field": "conditions", "message": "the campaign has no condition to rate"})
    for kind in (ConditionKind.TRAINING_BEST, ConditionKind.TRAINING_WORST):
        if kind not in kinds:
            errors.append({"field": "conditions", "message": f"no {ConditionKind(kind).label}"})
    for c in conds:
        for p in condition_problems(campaign, c):
            errors.append({"field": f"conditions.{c.pk}", "message": f"{c.label}: {p}"})
    if campaign.mode == CampaignMode.LIVE and not live.available():
        errors.append({"field": "mode", "message": live.unavailable_reason()})
    return errors


def open_campaign(campaign: Campaign) -> Campaign:
    if campaign.status == CampaignStatus.OPEN:
        return campaign
    if campaign.status == CampaignStatus.CLOSED:
        raise CampaignError([{"field": "status", "message": "a closed campaign cannot be opened again"}])
    errors = readiness_problems(campaign)
    if errors:
        raise CampaignError(errors)
    Campaign.objects.filter(pk=campaign.pk, status=CampaignStatus.DRAFT).update(
        status=CampaignStatus.OPEN, opened_at=timezone.now()
    )
    campaign.refresh_from_db()
    return campaign


def close_campaign(campaign: Campaign) -> Campaign:
    if campaign.status != CampaignStatus.CLOSED:
        Campaign.objects.filter(pk=campaign.pk).update(status=CampaignStatus.CLOSED, closed_at=timezone.now())
        campaign.refresh_from_db()
    return campaign


# ---------------------------------------------------------------------------------------------
# Invitations and tokens


def new_token() -> str:
    return secrets.token_urlsafe(32)


@transaction.atomic
def invite(
    campaign: Campaign, labels: list[str] | None = None, count: int | None = None
) -> list[tuple[Evaluator, str]]:
    """Create evaluators with fresh one-time link tokens; the raw tokens are returned once, never stored."""
    if campaign.status == CampaignStatus.CLOSED:
        raise CampaignError([{"field": "status", "message": "the campaign is closed"}])
    if labels is None:
        if not isinstance(count, int) or not 1 <= count <= MAX_INVITES:
            raise CampaignError(
                [{"field": "count", "message": f"must be a whole number from 1 to {MAX_INVITES}"}]
            )
        start = campaign.evaluators.count() + 1
        labels = [f"E{start + i}" for i in range(count)]
    labels = [str(x).strip()[:100] for x in labels]
    if not labels or any(not x for x in labels) or len(labels) > MAX_INVITES:
        raise CampaignError([{"field": "labels", "message": f"1 to {MAX_INVITES} non-empty labels"}])
    taken = set(campaign.evaluators.filter(label__in=labels).values_list("label", flat=True))
    dupes = taken | {x for x in labels if labels.count(x) > 1}
    if dupes:
        raise CampaignError([{"field": "labels", "message": f"already used: {', '.join(sorted(dupes))}"}])
    out = []
    for label in labels:
        raw = new_token()
        ev = Evaluator.objects.create(
            campaign=campaign, label=label, token_hash=hash_token(raw), seed=secrets.randbits(48)
        )
        out.append((ev, raw))
    return out


def reissue(evaluator: Evaluator) -> str:
    """A new link for the same evaluator (progress kept); the old link stops working."""
    raw = new_token()
    Evaluator.objects.filter(pk=evaluator.pk).update(token_hash=hash_token(raw), revoked_at=None)
    evaluator.refresh_from_db()
    return raw


def revoke(evaluator: Evaluator) -> None:
    Evaluator.objects.filter(pk=evaluator.pk).update(revoked_at=timezone.now())
    evaluator.refresh_from_db()


TOKEN_SHAPE = re.compile(r"^[A-Za-z0-9_-]{20,100}$")


def evaluator_for_token(raw: str | None) -> Evaluator | None:
    if not raw or not TOKEN_SHAPE.match(raw):
        return None
    ev = Evaluator.objects.select_related("campaign").filter(token_hash=hash_token(raw)).first()
    if ev is None or ev.revoked_at is not None:
        return None
    return ev


# ---------------------------------------------------------------------------------------------
# The evaluator flow


def build_order(campaign: Campaign, seed: int) -> list[int]:
    """Training anchors (best, then worst) then every other condition in a seeded random order.

    A consistency repeat is never placed right after the condition it repeats.
    """
    conds = list(campaign.conditions.order_by("position", "id"))
    training = [
        c.pk
        for k in (ConditionKind.TRAINING_BEST, ConditionKind.TRAINING_WORST)
        for c in conds
        if c.kind == k
    ]
    main = [c for c in conds if c.kind not in TRAINING_KINDS]
    rng = random.Random(seed)
    rng.shuffle(main)
    for i, c in enumerate(main):
        if c.repeat_of_id and i > 0 and main[i - 1].pk == c.repeat_of_id and len(main) > 2:
            j = (i + 2) % len(main) if (i + 2) < len(main) else 0
            main[i], main[j] = main[j], main[i]
    return training + [c.pk for c in main]


def open_link(evaluator: Evaluator) -> None:
    if evaluator.first_opened_at is None:
        Evaluator.objects.filter(pk=evaluator.pk, first_opened_at=None).update(first_opened_at=timezone.now())
        evaluator.refresh_from_db()


def check_campaign_open(evaluator: Evaluator) -> None:
    status = evaluator.campaign.status
    if status == CampaignStatus.DRAFT:
        raise FlowError("This campaign has not started yet. Please try the link again later.", 409)
    if status == CampaignStatus.CLOSED:
        raise FlowError("This campaign is closed. Thank you for your interest.", 409)


@transaction.atomic
def give_consent(evaluator: Evaluator) -> Evaluator:
    """Record consent and fix the evaluator's order (once; a second consent changes nothing)."""
    ev = Evaluator.objects.select_for_update().select_related("campaign").get(pk=evaluator.pk)
    check_campaign_open(ev)
    if ev.consent_at is None:
        ev.consent_at = timezone.now()
        ev.order = build_order(ev.campaign, ev.seed)
        ev.position = 0
        ev.save(update_fields=["consent_at", "order", "position"])
    return ev


def _current(evaluator: Evaluator, condition_id: int) -> Condition:
    """The condition, if it is the evaluator's current one; FlowError otherwise."""
    check_campaign_open(evaluator)
    if evaluator.consent_at is None:
        raise FlowError("Please read the instructions and give your consent first.", 409)
    if evaluator.finished_at is not None:
        raise FlowError("You have already finished this campaign. Thank you!", 409)
    current = evaluator.current_condition_id()
    if condition_id not in evaluator.order:
        raise FlowError("This condition is not part of your tasks.", 404)
    if current != condition_id:
        raise FlowError("This is not your current condition; the page will show where you are.", 409)
    return Condition.objects.select_related("recording", "reference").get(pk=condition_id)


def screens_seen(evaluator: Evaluator, condition: Condition) -> dict[str, int]:
    rows = (
        ScreenEvent.objects.filter(evaluator=evaluator, condition=condition)
        .values("stage")
        .annotate(n=Count("id"))
    )
    out = {Stage.REFERENCE: 0, Stage.DEGRADED: 0}
    out.update({r["stage"]: r["n"] for r in rows})
    return out


def form_state(evaluator: Evaluator, condition: Condition) -> dict[str, Any]:
    campaign = evaluator.campaign
    seen = screens_seen(evaluator, condition)
    need = campaign.required_screens
    problems = condition_problems(campaign, condition)
    # Seen means seen: in recorded mode the server must also have handed out every byte of both videos.
    undelivered = "" if problems else delivery.delivery_problem(evaluator, condition)
    return {
        "required": need,
        "reference_seen": seen[Stage.REFERENCE],
        "degraded_seen": seen[Stage.DEGRADED],
        "reference_done": seen[Stage.REFERENCE] >= need,
        "degraded_done": seen[Stage.DEGRADED] >= need,
        "problems": problems,
        "delivery_problem": undelivered,
        "enabled": not problems
        and not undelivered
        and seen[Stage.REFERENCE] >= need
        and seen[Stage.DEGRADED] >= need,
    }


def record_screen(
    evaluator: Evaluator, condition_id: int, stage: str, index: int, client_t: float | None = None
) -> dict[str, Any]:
    """Store that a screen (or a whole video) of a stage was seen; the reference comes first."""
    condition = _current(evaluator, condition_id)
    campaign = evaluator.campaign
    if stage not in Stage.values:
        raise FlowError(f"stage must be one of {', '.join(Stage.values)}", 400)
    need = campaign.required_screens
    if not isinstance(index, int) or not 0 <= index < need:
        raise FlowError(f"screen index must be from 0 to {need - 1}", 400)
    problems = condition_problems(campaign, condition)
    if problems:
        raise FlowError(problems[0].capitalize() + "; this condition cannot be rated now.", 409)
    if stage == Stage.DEGRADED and not form_state(evaluator, condition)["reference_done"]:
        raise FlowError("Please go through the reference first, then the condition to rate.", 409)
    if campaign.mode == CampaignMode.LIVE and stage == Stage.DEGRADED:
        reported = delivery.pages_reported(evaluator, condition)
        if index >= reported:
            raise FlowError(
                f"The lab computer has reported {reported} screen(s) of this remote desktop session so far; "
                f"screen {index + 1} counts once it has reported it.",
                409,
            )
    ScreenEvent.objects.get_or_create(
        evaluator=evaluator,
        condition=condition,
        stage=stage,
        screen_index=index,
        defaults={"client_t": client_t},
    )
    return form_state(evaluator, condition)


def validate_scores(campaign: Campaign, scores: Any) -> dict[str, int]:
    if not isinstance(scores, dict):
        raise FlowError("scores must be an object {aspect: 1..5}", 400)
    keys = campaign.aspect_keys
    missing = [
        a["label"] for a in campaign.aspects if a["key"] not in scores or scores[a["key"]] in (None, "")
    ]
    if missing:
        raise FlowError(f"Please answer every question: missing {', '.join(missing)}.", 400)
    unknown = sorted(set(scores) - set(keys))
    if unknown:
        raise FlowError(f"unknown aspect(s): {', '.join(unknown)}", 400)
    out = {}
    for k in keys:
        raw = scores[k]
        try:
            v = int(raw)
        except (TypeError, ValueError):
            raise FlowError(
                f"{k}: the score must be a whole number from {SCORE_MIN} to {SCORE_MAX}", 400
            ) from None
        if isinstance(raw, bool) or str(raw).strip() not in {str(v)} or not SCORE_MIN <= v <= SCORE_MAX:
            raise FlowError(f"{k}: the score must be a whole number from {SCORE_MIN} to {SCORE_MAX}", 400)
        out[k] = v
    return out


@dataclass
class SubmitResult:
    changed: bool
    evaluator: Evaluator
    detail: str


def submit_ratings(evaluator: Evaluator, condition_id: int, scores: Any) -> SubmitResult:
    """Store one answer per aspect for the current condition and move on; idempotent.

    Submitting again for a condition already answered (a double click, a reload re-posting the
    form, a retried request) stores nothing and answers ``changed = False``: a rating is stored once.
    """
    with transaction.atomic():
        ev = Evaluator.objects.select_for_update().select_related("campaign").get(pk=evaluator.pk)
        if (
            condition_id in ev.order
            and Rating.objects.filter(evaluator=ev, condition_id=condition_id).exists()
        ):
            return SubmitResult(False, ev, "already stored; the first answer counts")
        condition = _current(ev, condition_id)
        values = validate_scores(ev.campaign, scores)
        state = form_state(ev, condition)
        if state["problems"]:
            raise FlowError(state["problems"][0].capitalize() + "; this condition cannot be rated now.", 409)
        if not (state["reference_done"] and state["degraded_done"]):
            raise FlowError(
                "The rating form opens after you have gone through the reference and the condition "
                f"({state['required']} screen(s) each; seen {state['reference_seen']} and "
                f"{state['degraded_seen']}).",
                409,
            )
        if state["delivery_problem"]:
            raise FlowError(state["delivery_problem"], 409)
        seen = state["reference_seen"] + state["degraded_seen"]
        try:
            with transaction.atomic():
                Rating.objects.bulk_create(
                    [
                        Rating(
                            evaluator=ev,
                            condition=condition,
                            aspect=k,
                            score=v,
                            phase=condition.phase,
                            screens_seen=seen,
                        )
                        for k, v in values.items()
                    ]
                )
        except IntegrityError:
            return SubmitResult(False, ev, "already stored; the first answer counts")
        ev.position += 1
        fields = ["position"]
        if ev.position >= len(ev.order):
            ev.finished_at = timezone.now()
            fields.append("finished_at")
        ev.save(update_fields=fields)
    from ratings import live

    live.release_for(ev, "rated")
    return SubmitResult(True, ev, "stored")


def evaluator_state(evaluator: Evaluator) -> dict[str, Any]:
    """What the evaluator's page needs: where they are, the current condition and its form state."""
    campaign = evaluator.campaign
    n_training = Condition.objects.filter(pk__in=evaluator.order, kind__in=list(TRAINING_KINDS)).count()
    out: dict[str, Any] = {
        "campaign": campaign.name,
        "campaign_status": campaign.status,
        "mode": campaign.mode,
        "state": evaluator.state,
        "position": evaluator.position,
        "total": evaluator.total,
        "training_total": n_training,
        "aspects": campaign.aspects,
        "scale": [{"score": s, "label": label} for s, label in IMPAIRMENT_SCALE],
        "condition": None,
    }
    cid = evaluator.current_condition_id() if evaluator.consent_at else None
    if cid is not None:
        cond = Condition.objects.select_related("recording", "reference").get(pk=cid)
        out["phase"] = cond.phase
        out["condition"] = {
            "id": cond.pk,
            "number": evaluator.position + 1,
            "form": form_state(evaluator, cond),
        }
    return out


def aspect_rows(campaign: Campaign) -> list[dict[str, str]]:
    return [{**a, "help": ASPECT_HELP.get(a["key"], "")} for a in campaign.aspects]


# ---------------------------------------------------------------------------------------------
# Progress and analysis


def progress(campaign: Campaign) -> dict[str, Any]:
    evaluators = list(campaign.evaluators.all())
    conds = list(campaign.conditions.annotate(n_ratings=Count("ratings__evaluator", distinct=True)))
    started = [e for e in evaluators if e.consent_at]
    return {
        "evaluators": [
            {
                "id": e.pk,
                "label": e.label,
                "state": e.state,
                "done": min(e.position, e.total) if e.consent_at else 0,
                "total": e.total,
                "first_opened_at": e.first_opened_at,
                "finished_at": e.finished_at,
            }
            for e in evaluators
        ],
        "conditions": [
            {"id": c.pk, "label": c.label, "kind": c.kind, "rated_by": c.n_ratings, "of": len(started)}
            for c in conds
        ],
        "invited": len(evaluators),
        "started": len(started),
        "finished": sum(1 for e in evaluators if e.finished_at),
    }


def _main_ratings(campaign: Campaign) -> list[Rating]:
    return list(
        Rating.objects.filter(condition__campaign=campaign, phase=Phase.MAIN)
        .select_related("condition", "evaluator")
        .order_by("condition__position", "evaluator_id", "aspect")
    )


def analyze(campaign: Campaign) -> dict[str, Any]:
    """Screening, DMOS ± 95 % CI per condition and aspect (all evaluators and after exclusion),
    Krippendorff's alpha (ordinal, interval), a Table 4.2 layout and the data of Figs 4.3/4.4.
    """
    ratings = _main_ratings(campaign)
    conds = list(campaign.conditions.order_by("position", "id"))
    by_id = {c.pk: c for c in conds}
    labels = {e.pk: e.label for e in campaign.evaluators.all()}
    matrix: dict[int, dict[tuple[int, str], float]] = defaultdict(dict)
    gold: dict[int, list[tuple[Any, float]]] = defaultdict(list)
    per_eval_cond: dict[tuple[int, int, str], int] = {}
    for r in ratings:
        per_eval_cond[(r.evaluator_id, r.condition_id, r.aspect)] = r.score
        if r.condition.kind == ConditionKind.NORMAL:
            matrix[r.evaluator_id][(r.condition_id, r.aspect)] = r.score
        elif r.condition.kind == ConditionKind.GOLD:
            gold[r.evaluator_id].append((f"{r.condition.label} / {r.aspect}", r.score))
    repeats: dict[int, list[tuple[Any, float, float]]] = defaultdict(list)
    for (ev, cid, aspect), score in per_eval_cond.items():
        c = by_id.get(cid)
        if c is not None and c.kind == ConditionKind.REPEAT and c.repeat_of_id:
            first = per_eval_cond.get((ev, c.repeat_of_id, aspect))
            if first is not None:
                repeats[ev].append((f"{c.repeat_of.label} / {aspect}", first, score))
    screening = stats.screen(matrix, gold, repeats)
    excluded = {ev for ev, s in screening.items() if s.excluded}
    kept_matrix = {ev: row for ev, row in matrix.items() if ev not in excluded}

    def table(m: dict[int, dict[tuple[int, str], float]]) -> list[dict[str, Any]]:
        cells: dict[tuple[int, str], list[float]] = defaultdict(list)
        for row in m.values():
            for unit, score in row.items():
                cells[unit].append(score)
        out = []
        for c in conds:
            if c.kind != ConditionKind.NORMAL:
                continue
            si = si_params(c.params)
            for a in campaign.aspects:
                summ = stats.dmos(cells.get((c.pk, a["key"]), []))
                out.append(
                    {
                        "condition": c.pk,
                        "label": c.label,
                        "protocol": c.params.get("protocol", ""),
                        "system": system_name(c.params),
                        "params": c.params,
                        **si,
                        "measured_tcp_bps": c.measured_tcp_bps,
                        "aspect": a["key"],
                        "aspect_label": a["label"],
                        **summ.to_json(),
                    }
                )
        return out

    def agreement(m: dict[int, dict[tuple[int, str], float]]) -> dict[str, Any]:
        return {level: stats.alpha(m, level).to_json() for level in ("ordinal", "interval")}

    all_rows, kept_rows = table(matrix), table(kept_matrix)
    # Shown, not excluded by rule: the researcher decides (docs/security.md "Seen means seen").
    suspicious = delivery.suspicious_sessions(campaign)
    return {
        "campaign": campaign.pk,
        "aspects": campaign.aspects,
        "n_ratings": len(ratings),
        "evaluators": [
            {
                "id": ev,
                "label": labels.get(ev, str(ev)),
                **{k: v for k, v in s.to_json().items() if k != "evaluator"},
                "delivery": suspicious.get(ev, []),
            }
            for ev, s in screening.items()
        ],
        "suspicious": [
            {"id": ev, "label": labels.get(ev, str(ev)), "reasons": reasons}
            for ev, reasons in suspicious.items()
        ],
        "excluded": [
            {"id": ev, "label": labels.get(ev, str(ev)), "reasons": screening[ev].reasons} for ev in excluded
        ],
        "rule": {
            "min_correlation": stats.MIN_CORRELATION,
            "gold_fail_at_or_below": stats.GOLD_FAIL_AT_OR_BELOW,
            "max_repeat_difference": stats.MAX_REPEAT_DIFFERENCE,
        },
        "all": {"dmos": all_rows, "alpha": agreement(matrix), "table": table42(campaign, all_rows)},
        "screened": {
            "dmos": kept_rows,
            "alpha": agreement(kept_matrix),
            "table": table42(campaign, kept_rows),
        },
    }


def _fmt_rate(bps: float | None) -> str:
    return format_rate(bps) if bps is not None else "–"


def _fmt_delay(s: float | None) -> str:
    return format_duration(s) if s is not None else "–"


def table42(campaign: Campaign, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Thesis Table 4.2 layout: one table per remaining link setting (rate, loss), rows aspect × delay,
    one column per protocol (a VM-mode condition is a column of its own, e.g. "spice (VM)"); each
    cell DMOS ± half-width (n)."""
    protocols = sorted({r["system"] for r in rows})
    groups: dict[tuple, list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        groups[(r["rate_bps"] or -1, r["loss_pct"] or 0.0)].append(r)
    out = []
    for (rate, loss), items in sorted(groups.items()):
        delays = sorted({r["delay_s"] for r in items}, key=lambda d: (d is None, d or 0))
        body = []
        for a in campaign.aspects:
            for d in delays:
                cells = {}
                for p in protocols:
                    hit = next(
                        (
                            r
                            for r in items
                            if r["aspect"] == a["key"] and r["delay_s"] == d and r["system"] == p
                        ),
                        None,
                    )
                    cells[p] = hit
                body.append(
                    {"aspect": a["label"], "delay": _fmt_delay(d), "cells": [cells[p] for p in protocols]}
                )
        title = f"rate {_fmt_rate(rate if rate > 0 else None)}" + (f", loss {loss:g} %" if loss else "")
        out.append({"title": title, "protocols": protocols, "rows": body})
    return out


def chart_payloads(analysis_part: dict[str, Any], aspect: str, protocol: str) -> dict[str, Any]:
    """Figs 4.3 and 4.4 for one aspect and protocol (as ``system_name`` gives it), in the
    dashboard's chart payload format.

    4.3: DMOS vs measured TCP throughput (Mbit/s), one series per one-way delay.
    4.4: DMOS vs one-way delay (ms), one series per link rate (the fixed-throughput setting); each
    point's measured throughput is in the series label range.
    """
    rows = [r for r in analysis_part["dmos"] if r["aspect"] == aspect and r["system"] == protocol and r["n"]]

    def point(x: float | None, r: dict[str, Any]) -> dict[str, Any] | None:
        if x is None or r["mean"] is None:
            return None
        return {"x": x, "mean": r["mean"], "ci_low": r["ci_low"], "ci_high": r["ci_high"], "n": r["n"]}

    by_delay: dict[float | None, list] = defaultdict(list)
    by_rate: dict[float | None, list] = defaultdict(list)
    fallback = False
    for r in rows:
        tcp = r["measured_tcp_bps"]
        if tcp is None:
            tcp, fallback = r["rate_bps"], True
        p = point(tcp, r)
        if p:
            by_delay[r["delay_s"]].append(p)
        p = point(r["delay_s"], r)
        if p:
            by_rate[r["rate_bps"]].append(p)
    fig43 = {
        "title": f"Fig. 4.3: {protocol} — QoE vs TCP throughput",
        "x_label": "TCP throughput (Mbit/s)" + (" — configured rate where not measured" if fallback else ""),
        "y_label": "DMOS",
        "x_scale": 1e6,
        "y_scale": 1,
        "series": [
            {"label": f"delay {_fmt_delay(d)}", "points": pts}
            for d, pts in sorted(by_delay.items(), key=lambda kv: (kv[0] is None, kv[0] or 0))
        ],
    }
    fig44 = {
        "title": f"Fig. 4.4: {protocol} — QoE vs propagation delay",
        "x_label": "one-way propagation delay (ms)",
        "y_label": "DMOS",
        "x_scale": 1e-3,
        "y_scale": 1,
        "series": [
            {"label": f"rate {_fmt_rate(rt)}", "points": pts}
            for rt, pts in sorted(by_rate.items(), key=lambda kv: (kv[0] is None, kv[0] or 0))
        ],
    }
    return {"fig43": fig43, "fig44": fig44, "measured": not fallback}


# ---------------------------------------------------------------------------------------------
# CSV


def _csv(rows: Iterable[list[Any]]) -> Iterator[str]:
    buf = io.StringIO()
    w = csv.writer(buf)
    for row in rows:
        w.writerow(row)
        yield buf.getvalue()
        buf.seek(0)
        buf.truncate()


def ratings_csv(campaign: Campaign) -> Iterator[str]:
    def rows() -> Iterator[list[Any]]:
        yield [
            "campaign", "evaluator", "condition_id", "condition", "kind", "repeat_of", "protocol", "rate",
            "delay", "loss", "measured_tcp_bps", "phase", "aspect", "score", "screens_seen", "created",
        ]  # fmt: skip
        qs = (
            Rating.objects.filter(condition__campaign=campaign)
            .select_related("evaluator", "condition")
            .order_by("evaluator_id", "phase", "condition__position", "aspect")
        )
        for r in qs.iterator():
            c = r.condition
            yield [
                campaign.pk, r.evaluator.label, c.pk, c.label, c.kind, c.repeat_of_id or "",
                c.params.get("protocol", ""), c.params.get("rate", ""), c.params.get("delay", ""),
                c.params.get("loss", ""), c.measured_tcp_bps if c.measured_tcp_bps is not None else "",
                r.phase, r.aspect, r.score, r.screens_seen, r.created.isoformat(),
            ]  # fmt: skip

    return _csv(rows())


def summary_csv(campaign: Campaign) -> Iterator[str]:
    result = analyze(campaign)

    def rows() -> Iterator[list[Any]]:
        yield [
            "screening", "condition_id", "condition", "protocol", "rate_bps", "delay_s", "loss_pct",
            "measured_tcp_bps", "aspect", "n", "dmos", "sd", "ci95_low", "ci95_high",
        ]  # fmt: skip
        for part in ("all", "screened"):
            for r in result[part]["dmos"]:
                yield [
                    "all evaluators" if part == "all" else "after exclusion", r["condition"], r["label"],
                    r["protocol"], r["rate_bps"], r["delay_s"], r["loss_pct"], r["measured_tcp_bps"],
                    r["aspect"], r["n"], r["mean"], r["sd"], r["ci_low"], r["ci_high"],
                ]  # fmt: skip

    return _csv(rows())


def conditions_needing(campaign: Campaign) -> list[Condition]:
    return [c for c in campaign.conditions.all() if condition_problems(campaign, c)]


def owned_campaigns(user: Any) -> Any:
    qs = Campaign.objects.select_related("owner", "sweep")
    if not user.is_authenticated:
        return qs.none()
    return qs if user.is_staff else qs.filter(owner=user)


def usable_artifacts(user: Any) -> Any:
    """Video artifacts of trials the researcher may see (for attaching by hand)."""
    qs = Artifact.objects.filter(kind=VIDEO_KIND)
    return qs if user.is_staff else qs.filter(trial__sweep__experiment__owner=user)
