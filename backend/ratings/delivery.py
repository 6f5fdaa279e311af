"""Server-side evidence that a recorded stimulus reached the evaluator's page ("seen" means seen).

The page reports a video's ``ended`` event, but anything can post that. What the server knows for
itself is which bytes of which file the media view handed to which evaluator, and when: every
response of ``/rate/<token>/media/<condition>/<stage>/`` is a ``MediaDelivery`` row (HTTP Range
requests give partial rows). A rating needs, for each stage of its condition, rows whose ranges
cover the whole current file; screening flags ratings given faster than the videos last.
"""

from __future__ import annotations

import logging
import re
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import IO, Any

from django.core.cache import cache
from django.utils import timezone

from qoelab.errors import QoelabError
from qoelab.rd.record import probe
from ratings.choices import CampaignMode, Phase, Stage
from ratings.models import Campaign, Condition, Evaluator, MediaDelivery, Playback, Rating, Slot

log = logging.getLogger("qoelab.ratings.delivery")

BLOCK = 64 * 1024
RANGE = re.compile(r"^\s*bytes\s*=\s*(\d*)\s*-\s*(\d*)\s*$")
STAGE_NAMES = {Stage.REFERENCE: "reference video", Stage.DEGRADED: "video of the case"}
# A rating given sooner than this share of the two videos' total duration after the reference
# began to arrive cannot have followed normal playback (e.g. a raised playbackRate): flagged.
FAST_SHARE = 0.9


class RangeNotSatisfiable(Exception):
    pass


def parse_range(header: str | None, size: int) -> tuple[int, int] | None:
    """The single byte range ``[start, end)`` a ``Range`` header asks for; None serves the whole file.

    Multiple ranges or other units are ignored (RFC 9110 allows it): the whole file is sent.
    """
    if not header or size <= 0:
        return None
    m = RANGE.match(header)
    if not m or (m.group(1) == "" and m.group(2) == ""):
        return None
    first, last = m.group(1), m.group(2)
    if first == "":  # suffix: the last N bytes
        n = int(last)
        if n == 0:
            raise RangeNotSatisfiable
        return max(0, size - n), size
    start = int(first)
    end = size if last == "" else int(last) + 1
    if start >= size or end <= start:
        raise RangeNotSatisfiable
    return start, min(end, size)


def open_delivery(
    evaluator: Evaluator, condition: Condition, stage: str, artifact: Any, size: int, start: int, end: int
) -> MediaDelivery:
    return MediaDelivery.objects.create(
        evaluator=evaluator,
        condition=condition,
        stage=stage,
        artifact=artifact,
        file_size=size,
        sent_from=start,
        sent_to=start,
        requested_to=end,
    )


def _finish(row_id: int, sent_to: int) -> None:
    try:
        MediaDelivery.objects.filter(pk=row_id).update(sent_to=sent_to, finished_at=timezone.now())
    except Exception:  # a closed connection must not turn a served video into an error page
        log.exception("could not record the end of media delivery %s", row_id)


def stream(handle: IO[bytes], row_id: int, start: int, end: int) -> Iterator[bytes]:
    """Yield ``[start, end)`` of the file and record how far it got.

    The last block counts as delivered when it is handed to the web server (recorded before the
    yield, so a page that plays to the end never races its own evidence); earlier blocks count
    once the server has come back for the next one, i.e. wrote them. A response cut off by the
    client (the generator is closed) records what was written until then.
    """
    sent = start
    recorded = False
    try:
        handle.seek(start)
        while sent < end:
            chunk = handle.read(min(BLOCK, end - sent))
            if not chunk:
                break
            if sent + len(chunk) >= end:
                _finish(row_id, sent + len(chunk))
                recorded = True
            yield chunk
            sent += len(chunk)
    finally:
        if not recorded:
            _finish(row_id, sent)
        handle.close()


def covered(ranges: list[tuple[int, int]], size: int) -> int:
    """Bytes of ``[0, size)`` covered by the union of the ranges."""
    total, reach = 0, 0
    for a, b in sorted((max(0, a), min(b, size)) for a, b in ranges):
        if b <= reach:
            continue
        total += b - max(a, reach)
        reach = b
    return total


@dataclass
class StageDelivery:
    stage: str
    size: int
    covered: int
    first_at: datetime | None

    @property
    def complete(self) -> bool:
        return self.first_at is not None and self.covered >= self.size

    def to_json(self) -> dict[str, Any]:
        return {"size": self.size, "delivered": self.covered, "complete": self.complete}

    def problem(self) -> str:
        name = STAGE_NAMES.get(self.stage, self.stage)
        if self.first_at is None:
            return f"The {name} never reached this page, so it cannot have been watched"
        if not self.complete:
            pct = int(100 * self.covered / self.size) if self.size else 0
            return f"Only {pct} % of the {name} reached this page"
        return ""


def _stage_artifact(condition: Condition, stage: str) -> Any:
    return condition.reference if stage == Stage.REFERENCE else condition.recording


def _summarise(
    rows: list[tuple[Any, ...]], condition: Condition, stages: tuple[str, ...]
) -> dict[str, StageDelivery]:
    """``rows``: (stage, artifact_id, sent_from, sent_to, started_at) of one evaluator and condition;
    ``stages``: the ones its campaign shows (``Campaign.stages``)."""
    out = {}
    for stage in stages:
        art = _stage_artifact(condition, stage)
        mine = [r for r in rows if r[0] == stage and art is not None and r[1] == art.pk]
        size = art.size if art is not None else 0
        out[stage] = StageDelivery(
            stage=stage,
            size=size,
            covered=covered([(r[2], r[3]) for r in mine], size),
            first_at=min((r[4] for r in mine), default=None),
        )
    return out


ROW_FIELDS = ("stage", "artifact_id", "sent_from", "sent_to", "started_at")


def stage_deliveries(evaluator: Evaluator, condition: Condition) -> dict[str, StageDelivery]:
    """Per stage: how much of the condition's current file the media view handed to this evaluator."""
    rows = list(
        MediaDelivery.objects.filter(evaluator=evaluator, condition=condition).values_list(*ROW_FIELDS)
    )
    return _summarise(rows, condition, evaluator.campaign.stages)


def delivery_problem(evaluator: Evaluator, condition: Condition) -> str:
    """A sentence for the page when a recorded stimulus did not fully reach it; "" otherwise."""
    if evaluator.campaign.mode != CampaignMode.RECORDED:
        return ""
    problems = [d.problem() for d in stage_deliveries(evaluator, condition).values() if not d.complete]
    if not problems:
        return ""
    text = "; ".join([problems[0], *(p[0].lower() + p[1:] for p in problems[1:])])
    return text + ". Please reload the page and play the videos to the end."


def pages_reported(evaluator: Evaluator, condition: Condition) -> int:
    """Live mode: screens of this case the lab worker itself reported (``session.pages_seen``).

    The worker counts the pages its remote kiosk browser loaded, from the page server's log, and
    reports them with its host token (``live.worker_report``): evidence from the lab, not from the
    evaluator's browser. The most any of the evaluator's sessions of the case reported counts.
    """
    sessions = Slot.objects.filter(evaluator=evaluator, condition=condition).values_list("session", flat=True)
    counts = [s.get("pages_seen") for s in sessions if isinstance(s, dict)]
    return max((n for n in counts if isinstance(n, int)), default=0)


def video_duration(artifact: Any) -> float | None:
    """Seconds of a video by ffprobe, cached by content hash; None when unknown."""
    if artifact is None:
        return None
    key = f"qoelab:video-duration:{artifact.sha256}"
    hit = cache.get(key)
    if hit is not None:
        return float(hit) if hit >= 0 else None
    # The worker library's probe (the one ffprobe call in the project); a video it cannot read
    # (no ffprobe, a broken file) is cached as unknown and skips the timing check.
    try:
        duration = probe(Path(artifact.file.path))["duration_s"]
    except (QoelabError, OSError, ValueError, subprocess.SubprocessError, NotImplementedError):
        duration = None
    value = -1.0 if duration is None else float(duration)
    cache.set(key, value, 7 * 24 * 3600)
    return value if value >= 0 else None


def playback_rows(campaign: Campaign) -> dict[int, list[tuple[str, float, float]]]:
    """Per evaluator, each rated main-phase case: (label, seconds its videos were played, seconds
    they last), from the page's ``Playback`` reports and ffprobe; a case whose length is unknown
    is left out. Recorded campaigns only (empty otherwise)."""
    if campaign.mode != CampaignMode.RECORDED:
        return {}
    conds = {
        c.pk: c for c in Condition.objects.filter(campaign=campaign).select_related("recording", "reference")
    }
    played: dict[tuple[int, int], float] = {}
    for ev_id, cond_id, seconds in Playback.objects.filter(condition__campaign=campaign).values_list(
        "evaluator_id", "condition_id", "seconds"
    ):
        played[(ev_id, cond_id)] = played.get((ev_id, cond_id), 0.0) + seconds
    rated = (
        Rating.objects.filter(condition__campaign=campaign, phase=Phase.MAIN)
        .values_list("evaluator_id", "condition_id")
        .distinct()
    )
    out: dict[int, list[tuple[str, float, float]]] = {}
    for ev_id, cond_id in sorted(rated):
        cond = conds[cond_id]
        lengths = [video_duration(_stage_artifact(cond, stage)) for stage in campaign.stages]
        if None in lengths:
            continue
        total = sum(x for x in lengths if x is not None)
        out.setdefault(ev_id, []).append((cond.label, played.get((ev_id, cond_id), 0.0), total))
    return out


def suspicious_sessions(campaign: Campaign) -> dict[int, list[str]]:
    """Evaluator id -> reasons their ratings look unwatched (recorded mode; empty dict otherwise).

    Flags a rated condition whose videos did not fully reach the page (ratings stored before the
    server checked delivery) and one rated sooner after the reference began to arrive than
    ``FAST_SHARE`` of the two videos' total duration.
    """
    if campaign.mode != CampaignMode.RECORDED:
        return {}
    rated: dict[tuple[int, int], datetime] = {}
    for ev_id, cond_id, created in Rating.objects.filter(condition__campaign=campaign).values_list(
        "evaluator_id", "condition_id", "created"
    ):
        key = (ev_id, cond_id)
        rated[key] = min(created, rated.get(key, created))
    conds = {
        c.pk: c for c in Condition.objects.filter(campaign=campaign).select_related("recording", "reference")
    }
    rows: dict[tuple[int, int], list[tuple[Any, ...]]] = {}
    for ev_id, cond_id, *row in MediaDelivery.objects.filter(condition__campaign=campaign).values_list(
        "evaluator_id", "condition_id", *ROW_FIELDS
    ):
        rows.setdefault((ev_id, cond_id), []).append(tuple(row))
    out: dict[int, list[str]] = {}
    for (ev_id, cond_id), rated_at in sorted(rated.items()):
        cond = conds[cond_id]
        reasons = []
        stages = _summarise(rows.get((ev_id, cond_id), []), cond, campaign.stages)
        for d in stages.values():
            if not d.complete:
                reasons.append(d.problem().replace("this page", "the page").replace("The ", "the ", 1))
        first = stages[campaign.stages[0]]  # the reference (DCR) or the case alone (ACR)
        durations = [video_duration(_stage_artifact(cond, stage)) for stage in campaign.stages]
        if first.first_at is not None and None not in durations:
            total = sum(d for d in durations if d is not None)
            elapsed = (rated_at - first.first_at).total_seconds()
            if elapsed < FAST_SHARE * total:
                name, what = ("reference", "the videos last") if len(durations) > 1 else ("video", "it lasts")
                reasons.append(
                    f"rated {elapsed:.1f} s after the {name} began to arrive; {what} {total:.1f} s"
                )
        if reasons:
            out.setdefault(ev_id, []).extend(f"{cond.label}: {r}" for r in reasons)
    return out
