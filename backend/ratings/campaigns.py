"""Campaigns: conditions (from a sweep or by hand), training anchors, gold and repeat, readiness.

Builds a campaign and its conditions, keeps recordings attached while it is a draft, and decides
whether it can open (``readiness_problems``); opening, closing and the researcher's querysets.
Every rule the server enforces here is shared by the HTML pages and the API.
"""

from __future__ import annotations

import random
import re
import secrets
from typing import Any

from django.db import transaction
from django.utils import timezone

from experiments import jobtypes
from experiments.archiving import filter_archived
from experiments.choices import TrialStatus
from experiments.models import Sweep, Trial
from qoelab.emulation.linkparams import LinkParams
from qoelab.errors import ParameterError
from qoelab.units import parse_duration, parse_percent, parse_rate
from ratings import screening as screening_settings
from ratings.choices import DEFAULT_ASPECTS, CampaignMode, CampaignStatus, ConditionKind, RatingMethod, Stage
from ratings.models import Campaign, Condition, default_aspects
from results.models import Artifact, SummaryValue

# Parameters that describe the condition (protocol, where its server runs, link profile); the rest
# (durations, workload settings) are how a trial measures it, not what the evaluator experiences.
# The server mode is experienced: QEMU's servers encode the screen differently (docs/vm.md).
LINK_KEYS = frozenset(LinkParams.model_fields) | {"protocol", "server"}
KEY_ORDER = ("protocol", "server", "rate", "delay", "loss", "jitter", "up_rate", "up_delay", "up_loss")
MAX_ASPECTS = 8
KEY_OF_LABEL = {label.lower(): key for key, label in DEFAULT_ASPECTS}
# Screens per stage of a live campaign unless the researcher says otherwise (the thesis' five).
LIVE_SCREENS_DEFAULT = 5
MAX_CONDITIONS = 200
ASPECT_KEY = re.compile(r"^[a-z][a-z0-9_]{0,63}$")
# Artifacts of kind "video": a name starting with this is the locally rendered reference.
REFERENCE_PREFIX = "reference"
VIDEO_KIND = "video"


# The label researchers see for the condition that shows the reference as a case (never evaluators).
REFERENCE_LABELS = {
    RatingMethod.DCR: "Reference vs reference (gold)",
    RatingMethod.ACR: "Reference alone (gold)",
    RatingMethod.ACR_HR: "Hidden reference",
}
# Conditions that show the first reference recording as their case.
SHOWS_REFERENCE = frozenset({ConditionKind.GOLD, ConditionKind.HIDDEN_REFERENCE})


class CampaignError(Exception):
    """Invalid campaign input: ``errors`` is [{field, message}] (the API's error shape)."""

    def __init__(self, errors: list[dict[str, str]]) -> None:
        self.errors = errors
        super().__init__("; ".join(f"{e['field']}: {e['message']}" for e in errors))


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


def validate_aspects(aspects: Any, mode: str | None = None) -> list[dict[str, str]]:
    """A list of {key, label} (or labels); empty: the mode's default (``default_aspects``)."""
    if aspects in (None, "", []):
        return default_aspects(mode)
    if not isinstance(aspects, list):
        raise CampaignError([{"field": "aspects", "message": "must be a list of {key, label}"}])
    if len(aspects) > MAX_ASPECTS:
        raise CampaignError(
            [{"field": "aspects", "message": f"at most {MAX_ASPECTS} aspects, got {len(aspects)}"}]
        )
    out, seen, errors = [], set(), []
    for i, a in enumerate(aspects):
        if isinstance(a, str):
            # A thesis aspect typed by its label keeps the thesis' key (analysis and warnings use it).
            key = KEY_OF_LABEL.get(a.strip().lower())
            key = key or re.sub(r"[^a-z0-9_]+", "_", a.strip().lower()).strip("_")
            a = {"key": key, "label": a.strip()}
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
    method: str = RatingMethod.DCR,
    aspects: Any = None,
    screens_per_condition: int | None = None,
    sweep: Sweep | None = None,
    conditions: list[dict[str, Any]] | None = None,
    add_gold: bool = True,
    add_repeat: bool = True,
    training_best: int | None = None,
    training_worst: int | None = None,
    description: str = "",
    seed: int | None = None,
    screening: dict[str, Any] | None = None,
) -> Campaign:
    """Create a campaign with its normal conditions (from ``sweep`` and/or ``conditions``), a gold
    trap, a consistency repeat and the two training anchors (indices into the normal conditions;
    default: the best and the worst link). An ACR-HR campaign gets its hidden reference instead of
    the gold trap (the same video: its vote is the trap too). Nothing is created on error.
    """
    errors = []
    name = (name or "").strip()
    if not name:
        errors.append({"field": "name", "message": "must not be empty"})
    if mode not in CampaignMode.values:
        errors.append({"field": "mode", "message": f"must be one of {', '.join(CampaignMode.values)}"})
    if method not in RatingMethod.values:
        errors.append({"field": "method", "message": f"must be one of {', '.join(RatingMethod.values)}"})
    elif method == RatingMethod.ACR_HR and mode == CampaignMode.LIVE:
        # Live mode's reference is the pages in the evaluator's own browser, not a remote session:
        # shown as one more case it would not be hidden (docs/ratings.md, "Methods").
        errors.append({
            "field": "method",
            "message": "acr-hr needs a recorded campaign: a live campaign's reference is the pages in "
            "the evaluator's own browser, which cannot pass for a remote session (use acr or dcr live)",
        })  # fmt: skip
    if mode == CampaignMode.RECORDED:
        # A recorded stimulus is one whole video per stage; a screen count would be a false promise.
        if screens_per_condition not in (None, 1):
            errors.append(
                {
                    "field": "screens_per_condition",
                    "message": "applies to live campaigns only (a recorded campaign shows each video "
                    "once, whole): leave it empty",
                }
            )
        screens_per_condition = 1
    elif screens_per_condition is None:
        screens_per_condition = LIVE_SCREENS_DEFAULT
    if not isinstance(screens_per_condition, int) or not 1 <= screens_per_condition <= 50:
        errors.append({"field": "screens_per_condition", "message": "must be a whole number from 1 to 50"})
    if sweep is not None and not jobtypes.produces_stimuli(sweep.job_type):
        errors.append(
            {
                "field": "sweep",
                "message": f"a {sweep.job_type} sweep records no sessions to rate; pick a sweep of a job "
                f"type that records them ({', '.join(jobtypes.stimulus_job_types()) or 'none registered'})",
            }
        )
    try:
        settings = screening_settings.parse(screening)
    except screening_settings.ScreeningError as exc:
        errors += exc.errors
    if errors:
        raise CampaignError(errors)
    aspect_list = validate_aspects(aspects, mode)

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
        method=method,
        aspects=aspect_list,
        screens_per_condition=screens_per_condition,
        screening=settings.model_dump(),
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
    ref = next((r.reference for r in rows if r.reference_id), None)
    hidden = method == RatingMethod.ACR_HR
    if add_gold or hidden:
        # The lab's conditions share one source (the workload's pages), so one reference serves all.
        Condition.objects.create(
            campaign=campaign,
            label=REFERENCE_LABELS[method],
            params={"protocol": "reference"},
            kind=ConditionKind.HIDDEN_REFERENCE if hidden else ConditionKind.GOLD,
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

    Conditions copy their source's recordings (training anchors, repeats); the gold trap and the
    hidden reference take the first reference. Returns how many conditions changed. Only draft
    campaigns change.
    """
    if campaign.status != CampaignStatus.DRAFT:
        raise CampaignError(
            [{"field": "status", "message": "recordings can only change while the campaign is a draft"}]
        )
    changed = 0
    conds = list(campaign.conditions.all())
    for c in conds:
        if c.kind in SHOWS_REFERENCE or not c.source_trials:
            continue
        recording, reference = _videos(list(c.source_trials))
        if (recording and recording.pk != c.recording_id) or (reference and reference.pk != c.reference_id):
            c.recording = recording or c.recording
            c.reference = reference or c.reference
            c.save(update_fields=["recording", "reference"])
            changed += 1
    ref = next((c.reference for c in conds if c.reference_id and c.kind == ConditionKind.NORMAL), None)
    for c in conds:
        if c.kind in SHOWS_REFERENCE and ref and c.recording_id != ref.pk:
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


NO_RECORDINGS = "no recordings (neither the case nor its reference): its trial did not record"
HOW_TO_RECORD = (
    "make the campaign from an rd_qoe sweep run with record: true (the Reproduce page's Table 4.2 "
    "preset is one), or clone this sweep, add record: true to its fixed parameters and run it"
)


def condition_problems(campaign: Campaign, condition: Condition) -> list[str]:
    """What this condition lacks for the campaign's mode (empty when it can be rated)."""
    problems = []
    if campaign.mode == CampaignMode.RECORDED:
        case, reference = artifact_usable(condition.recording), artifact_usable(condition.reference)
        if Stage.REFERENCE not in campaign.stages:
            # ACR: the case alone (a hidden reference's case is the reference recording).
            if not case:
                problems.append(NO_RECORDINGS if not reference else "no recording of the case to rate yet")
        elif not case and not reference:
            problems.append(NO_RECORDINGS)
        elif not case:
            problems.append("no recording of the case to rate yet")
        elif not reference:
            problems.append("no reference recording yet")
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
    found = [(c, p) for c in conds for p in condition_problems(campaign, c)]
    unrecorded = {c.pk for c, p in found if p == NO_RECORDINGS}
    normal = [c.pk for c in conds if c.kind == ConditionKind.NORMAL]
    if normal and unrecorded >= set(normal):
        # The sweep did not record at all: one sentence that says how to get recordings, not two
        # per condition that never do (issue 33).
        source = f"sweep {campaign.sweep.name!r}" if campaign.sweep_id else "the sweep"
        errors.append({
            "field": "conditions",
            "message": f"none of the conditions has a recording: {source} did not record its trials; "
            + HOW_TO_RECORD,
        })  # fmt: skip
        found = [(c, p) for c, p in found if p != NO_RECORDINGS]
    for c, p in found:
        errors.append({"field": f"conditions.{c.pk}", "message": f"{c.label}: {p}"})
    if any(p == NO_RECORDINGS for _, p in found):
        errors.append({"field": "conditions", "message": "to get the missing recordings, " + HOW_TO_RECORD})
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


def owned_campaigns(user: Any) -> Any:
    return Campaign.objects.select_related("owner", "sweep").visible_to(user)


def usable_artifacts(user: Any) -> Any:
    """Video artifacts of trials the researcher may see (for attaching by hand)."""
    return Artifact.objects.filter(kind=VIDEO_KIND).visible_to(user)


def listed_campaigns(user: Any, archived: bool | None = False) -> Any:
    """``owned_campaigns`` for a list: current ones (default), archived ones (True) or all (None)."""
    return filter_archived(owned_campaigns(user), archived)
