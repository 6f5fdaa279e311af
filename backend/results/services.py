"""Storing a trial's result and aggregating results for charts.

``TrialResultPayload`` is the strict pydantic form of ``TrialResult.to_json()``; ``ingest_result``
writes it with bulk inserts; ``aggregate`` gives mean and 95 % confidence interval (Student t) of a
metric per x value and series value, which the dashboard charts draw.
"""

from __future__ import annotations

import hashlib
import logging
import math
import statistics
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.files import File
from django.db import transaction
from django.utils import timezone
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator
from scipy import stats

from experiments.choices import TrialStatus
from experiments.models import Sweep, Trial
from results import kinds
from results.models import Artifact, Sample, SeriesPoint, SummaryValue
from results.signals import artifacts_in_use

log = logging.getLogger("qoelab.results")

NAME = r"^[A-Za-z_][A-Za-z0-9_.:-]{0,63}$"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)


class SamplePayload(_Strict):
    kind: str = Field(pattern=NAME)
    index: int = Field(ge=0, lt=2**31)
    values: dict[str, float | int | str | bool | None]


class SeriesPayload(_Strict):
    name: str = Field(pattern=NAME)
    t: float
    value: float


class TrialResultPayload(_Strict):
    summary: dict[str, float] = {}
    samples: list[SamplePayload] = []
    series: list[SeriesPayload] = []
    provenance: dict[str, Any] = {}
    link: dict[str, Any] = {}

    @field_validator("summary")
    @classmethod
    def _names(cls, v: dict[str, float]) -> dict[str, float]:
        import re

        for key in v:
            if not re.match(NAME, key):
                raise ValueError(f"metric name {key!r} must match {NAME}")
        return v

    @field_validator("samples")
    @classmethod
    def _unique(cls, v: list[SamplePayload]) -> list[SamplePayload]:
        seen: set[tuple[str, int]] = set()
        for s in v:
            if (s.kind, s.index) in seen:
                raise ValueError(f"duplicate sample (kind {s.kind!r}, index {s.index})")
            seen.add((s.kind, s.index))
        return v


def parse_result(raw: Any, field: str = "result") -> dict[str, Any]:
    """Validate a TrialResult JSON; raise ParamsInvalid-style errors naming ``result.<path>``."""
    from qoelab.params import ParamsInvalid

    if raw is None:
        raw = {}
    try:
        return TrialResultPayload.model_validate(raw).model_dump()
    except ValidationError as exc:
        errors = []
        for e in exc.errors()[:20]:
            path = field
            for p in e["loc"]:
                path += f"[{p}]" if isinstance(p, int) else f".{p}"
            errors.append({"field": path, "message": e["msg"].removeprefix("Value error, ")})
        raise ParamsInvalid(errors) from None


def ingest_result(trial: Trial, result: dict[str, Any]) -> None:
    """Replace the trial's summary/samples/series with ``result`` (already validated)."""
    with transaction.atomic():
        SummaryValue.objects.filter(trial=trial).delete()
        Sample.objects.filter(trial=trial).delete()
        SeriesPoint.objects.filter(trial=trial).delete()
        SummaryValue.objects.bulk_create(
            [SummaryValue(trial=trial, name=k, value=v) for k, v in (result.get("summary") or {}).items()]
        )
        Sample.objects.bulk_create(
            [
                Sample(trial=trial, kind=s["kind"], index=s["index"], values=s["values"])
                for s in result.get("samples") or []
            ],
            batch_size=5000,
        )
        SeriesPoint.objects.bulk_create(
            [
                SeriesPoint(trial=trial, name=p["name"], t=p["t"], value=p["value"])
                for p in result.get("series") or []
            ],
            batch_size=5000,
        )


def capture_input_problem(sender: type, trial: Trial, **kwargs: Any) -> str | None:
    """Why ``trial`` cannot be a sweep's capture input (``trial:N``), or None: it must have a pcap."""
    if Artifact.objects.filter(trial=trial, kind="pcap").exists():
        return None
    return f"trial {trial.pk} has no packet capture (pcap artifact) to replay"


class ArtifactRejected(Exception):
    def __init__(self, field: str, message: str) -> None:
        self.field = field
        self.message = message
        super().__init__(f"{field}: {message}")


class ArtifactTooLarge(ArtifactRejected):
    """Larger than its kind allows (HTTP 413)."""


def store_artifact(trial: Trial, upload: Any, kind: str, sha256: str) -> Artifact:
    """Save an uploaded file, verifying its kind's size limit, SHA-256 and content before it is recorded."""
    try:
        limit = kinds.get_kind(kind).limit()
    except kinds.ContentMismatch as exc:
        raise ArtifactRejected(exc.field, exc.message) from None
    if upload.size > limit:
        raise ArtifactTooLarge(
            "file", f"is {upload.size} bytes; a {kind} is at most {limit} bytes (QOELAB_MAX_ARTIFACT_BYTES)"
        )
    digest = hashlib.sha256()
    head = b""
    for chunk in upload.chunks():
        digest.update(chunk)
        if len(head) < kinds.HEAD_BYTES:
            head += chunk[: kinds.HEAD_BYTES - len(head)]
    actual = digest.hexdigest()
    if actual != sha256.lower():
        raise ArtifactRejected("sha256", f"does not match the uploaded file (got {actual}); upload again")
    try:
        kinds.check_content(kind, head)
    except kinds.ContentMismatch as exc:
        raise ArtifactRejected(exc.field, exc.message) from None
    upload.seek(0)
    name = _keep_suffix(Path(upload.name or "artifact").name, 200) or "artifact"
    artifact = Artifact(
        trial=trial, attempt=max(trial.attempts, 1), kind=kind, name=name, size=upload.size, sha256=actual
    )
    artifact.file.save(stored_name(name), File(upload), save=False)
    try:
        artifact.save()
    except Exception:
        artifact.file.delete(save=False)
        raise
    return artifact


def _keep_suffix(name: str, limit: int) -> str:
    """``name`` cut to ``limit`` characters, its extension kept (a reader still sees ``.pcap``)."""
    if len(name) <= limit:
        return name
    suffix = Path(name).suffix if len(Path(name).suffix) <= 16 else ""
    return name[: limit - len(suffix)] + suffix


def stored_name(name: str, limit: int = 200) -> str:
    """``name`` cut to ``limit`` UTF-8 bytes for the file system (255 bytes a name, with room for the
    storage's de-duplicating suffix), its extension kept: 200 non-ASCII characters were 400+ bytes
    and the upload a 500 (issue 33). The artifact keeps the name as uploaded for display."""
    if len(name.encode()) <= limit:
        return name
    path = Path(name)
    suffix = path.suffix if len(path.suffix.encode()) <= 16 else ""
    stem = name[: len(name) - len(suffix)] if suffix else name
    room = limit - len(suffix.encode())
    cut = stem.encode()[:room].decode(errors="ignore")  # never half a character
    return (cut or "artifact") + suffix


def _t_interval(values: list[float]) -> tuple[float, float | None, float | None, float | None]:
    """mean, ci_low, ci_high, sd of a 95 % Student t interval (None when n < 2)."""
    n = len(values)
    mean = statistics.fmean(values)
    if n < 2:
        return mean, None, None, None
    sd = statistics.stdev(values)
    half = float(stats.t.ppf(0.975, n - 1)) * sd / math.sqrt(n)
    return mean, mean - half, mean + half, sd


def _key(value: Any) -> Any:
    # Grid values resolve to floats (SI) or strings (enumerations); both sort within their kind.
    return (
        (0, value, "")
        if isinstance(value, int | float) and not isinstance(value, bool)
        else (1, 0, str(value))
    )


_FROM_PARAMS = object()  # a row's series value comes from its trial's parameters


def grouped(
    sweep: Sweep, metric: str, key_of: Callable[[dict[str, Any]], Any], where: Mapping[str, Any] | None = None
) -> dict[Any, dict[str, Any]]:
    """Mean and 95 % CI of summary ``metric`` over succeeded trials, grouped by ``key_of(resolved)``
    (a results table's cell); ``where`` as in :func:`aggregate`."""
    conditions = dict(where or {})
    trials = {
        t["id"]: t["resolved"]
        for t in sweep.trials.filter(status=TrialStatus.SUCCEEDED).values("id", "resolved")
        if all(t["resolved"].get(k) == v for k, v in conditions.items())
    }
    values: dict[Any, list[float]] = defaultdict(list)
    for trial_id, value in SummaryValue.objects.filter(trial_id__in=trials, name=metric).values_list(
        "trial_id", "value"
    ):
        values[key_of(trials[trial_id])].append(value)
    out = {}
    for key, vs in values.items():
        mean, low, high, sd = _t_interval(vs)
        out[key] = {"n": len(vs), "mean": mean, "ci_low": low, "ci_high": high, "sd": sd}
    return out


def aggregate(
    sweep: Sweep,
    metric: str,
    x: str,
    series: str | None = None,
    source: str = "summary",
    where: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Mean and 95 % CI of ``metric`` per (x, series) over succeeded trials of the sweep.

    ``source="summary"`` aggregates one value per trial; ``"samples"`` aggregates every per-event
    sample value named ``metric`` (RD: one per screen update); ``"series"`` aggregates the time
    series ``metric`` per whole second of its time (x is then the time, e.g. APT's goodput over a
    run). ``"curve"`` reads x from the same samples as the metric (a curve each trial reports,
    e.g. thin-client TCP's delay CCDF: x the delay, y the share above it), and the series from the
    samples too when they carry it, else from the trial's parameters. ``where`` keeps only trials
    whose resolved (SI) parameters equal the given values, e.g. ``{"rate": 1e6}`` for one chart panel.
    """
    conditions = dict(where or {})
    trials = {
        t["id"]: t["resolved"]
        for t in sweep.trials.filter(status=TrialStatus.SUCCEEDED).values("id", "resolved")
        if all(t["resolved"].get(k) == v for k, v in conditions.items())
    }
    groups: dict[tuple[Any, Any], list[float]] = defaultdict(list)
    # (trial, x or None for the trial's own x, series value or _FROM_PARAMS, value)
    rows: Iterable[tuple[int, Any, Any, Any]]
    if source == "curve":
        found = Sample.objects.filter(trial_id__in=trials, values__has_key=metric).filter(values__has_key=x)
        rows = (
            (trial_id, v[x], v.get(series, _FROM_PARAMS) if series else _FROM_PARAMS, v[metric])
            for trial_id, v in found.values_list("trial_id", "values").iterator(chunk_size=5000)
        )
    elif source == "series":
        # x is the series' time, binned to whole seconds, so repetitions line up point by point.
        points = SeriesPoint.objects.filter(trial_id__in=trials, name=metric)
        points = points.values_list("trial_id", "t", "value")
        rows = (
            (trial_id, round(t), _FROM_PARAMS, value)
            for trial_id, t, value in points.iterator(chunk_size=5000)
        )
    else:
        if source == "samples":
            per_trial = Sample.objects.filter(trial_id__in=trials, values__has_key=metric).values_list(
                "trial_id", f"values__{metric}"
            )
        else:
            per_trial = SummaryValue.objects.filter(trial_id__in=trials, name=metric)
            per_trial = per_trial.values_list("trial_id", "value")
        rows = (
            (trial_id, None, _FROM_PARAMS, value) for trial_id, value in per_trial.iterator(chunk_size=5000)
        )
    for trial_id, xv, sv, value in rows:
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
            continue
        resolved = trials[trial_id]
        key = resolved.get(x) if xv is None else xv
        if sv is _FROM_PARAMS:
            sv = resolved.get(series) if series else None
        groups[(key, sv)].append(float(value))
    by_series: dict[Any, list[dict[str, Any]]] = defaultdict(list)
    for (xv, sv), values in sorted(groups.items(), key=lambda kv: (_key(kv[0][1]), _key(kv[0][0]))):
        mean, lo, hi, sd = _t_interval(values)
        by_series[sv].append({"x": xv, "mean": mean, "ci_low": lo, "ci_high": hi, "sd": sd, "n": len(values)})
    return {
        "metric": metric,
        "x": x,
        "series_param": series,
        "source": source,
        "series": [{"value": sv, "points": pts} for sv, pts in by_series.items()],
    }


@dataclass(frozen=True)
class PruneReport:
    """What :func:`prune_artifacts` deleted (or would delete, on a dry run)."""

    artifacts: int
    bytes: int
    kept_for_ratings: int
    missing_files: int

    def __str__(self) -> str:
        return (
            f"{self.artifacts} artifact(s), {self.bytes / 1e6:.1f} MB; kept {self.kept_for_ratings} used by "
            f"rating campaigns; {self.missing_files} file(s) already gone"
        )


def prune_artifacts(
    older_than: timedelta,
    kinds: list[str] | None = None,
    *,
    dry_run: bool = False,
    now: datetime | None = None,
) -> PruneReport:
    """Delete artifacts (file and row) created more than ``older_than`` ago, optionally of some kinds.

    Only the raw files go: samples, series and summaries stay, so charts and CSV exports are
    unchanged. Artifacts an app above says are in use are kept (``signals.artifacts_in_use``: the
    videos a rating campaign's condition shows; a campaign without its videos could not be rated).
    A file already missing from storage still has its row removed.
    """
    cutoff = (now or timezone.now()) - older_than
    old = Artifact.objects.filter(created__lt=cutoff)
    if kinds:
        old = old.filter(kind__in=kinds)
    used = _artifacts_in_use()
    kept = old.filter(pk__in=used).count() if used else 0
    doomed = list(old.exclude(pk__in=used).only("pk", "file", "size"))
    total = sum(a.size for a in doomed)
    missing = 0
    if not dry_run:
        for artifact in doomed:
            if artifact.file and not artifact.file.storage.exists(artifact.file.name):
                missing += 1
            elif artifact.file:
                artifact.file.delete(save=False)
        Artifact.objects.filter(pk__in=[a.pk for a in doomed]).delete()
    return PruneReport(len(doomed), total, kept, missing)


def apply_retention() -> PruneReport | None:
    """Apply QOELAB_ARTIFACT_RETENTION_DAYS (0: keep everything); the scheduler loop calls this hourly."""
    days = settings.QOELAB_ARTIFACT_RETENTION_DAYS
    if days <= 0:
        return None
    report = prune_artifacts(timedelta(days=days))
    if report.artifacts:
        log.info("artifact retention (%s days): deleted %s", days, report)
    return report


def _artifacts_in_use() -> set[int]:
    used: set[int] = set()
    for _receiver, ids in artifacts_in_use.send(sender=Artifact):
        used |= set(ids or ())
    return used
