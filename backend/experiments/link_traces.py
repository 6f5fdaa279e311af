"""Uploaded link traces: a researcher's own Mahimahi-format trace (issue 37), checked with the worker
library's parser when it arrives and named in sweeps as ``upload:<id>`` beside the library's names.

The worker running a trial that names one fetches its text over the worker protocol
(``api.worker.LinkTraceInputView``) and keeps it in its upload folder (``traces.store_upload``)."""

from __future__ import annotations

import re
from typing import Any

from django.db import IntegrityError, transaction

from experiments.models import LinkTrace
from qoelab.emulation import traces

NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")
# The link parameters that take a trace, in every job type that has a link (LinkParams).
TRACE_PARAMS = ("link_trace", "up_link_trace")


class TraceRefused(Exception):
    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field
        self.message = message


def upload(owner: Any, name: str, text: str) -> tuple[LinkTrace, bool]:
    """Check and keep a trace; (the trace, whether it is new). The same text uploaded again by the
    same researcher is the trace already kept (its name stays)."""
    name = (name or "").strip()
    if not NAME.fullmatch(name):
        raise TraceRefused(
            "name",
            "must be a file name of 1 to 100 letters, digits, '.', '_' or '-', starting with a letter "
            "or digit",
        )
    try:
        trace = traces.parse(text, name)
    except traces.TraceError as err:
        raise TraceRefused("text", str(err)) from None
    existing = LinkTrace.objects.filter(owner=owner, sha256=trace.sha256).first()
    if existing is not None:
        return existing, False
    try:
        with transaction.atomic():
            kept = LinkTrace.objects.create(
                owner=owner, name=name, text=text, sha256=trace.sha256, lines=trace.lines,
                period_ms=trace.period_ms, mean_bps=trace.mean_bps,
            )  # fmt: skip
    except IntegrityError:  # the same upload, twice at once
        return LinkTrace.objects.get(owner=owner, sha256=trace.sha256), False
    return kept, True


def ref_id(value: object) -> int | None:
    """N of an ``upload:N`` reference, or None for anything else (a library name)."""
    match = traces.UPLOAD_REF.fullmatch(str(value).strip()) if value is not None else None
    return int(match.group(1)) if match else None


def ref_errors(
    job_params: set[str], grid: dict[str, list[Any]], fixed: dict[str, Any], user: Any
) -> list[dict[str, str]]:
    """A sweep's ``upload:N`` references: each names a trace the researcher may use (their own)."""
    errors = []
    for name in TRACE_PARAMS:
        if name not in job_params:
            continue
        written = [(f"grid.{name}[{i}]", v) for i, v in enumerate(grid.get(name, []))]
        written += [(f"fixed.{name}", fixed[name])] if name in fixed else []
        for where, value in written:
            n = ref_id(value)
            if n is None:
                continue
            visible = LinkTrace.objects.all() if user is None else LinkTrace.objects.visible_to(user)
            if not visible.filter(pk=n).exists():
                errors.append({"field": where, "message": f"no uploaded trace {n} of yours (upload it under "
                               "Link traces, or name one of the library's)"})  # fmt: skip
    return errors


def named_by(params: dict[str, Any]) -> set[int]:
    """The uploaded traces a trial's parameters name."""
    return {n for name in TRACE_PARAMS if (n := ref_id(params.get(name))) is not None}


def describe(t: LinkTrace) -> dict[str, Any]:
    return {"id": t.pk, "ref": t.ref, "name": t.name, "lines": t.lines, "period_s": t.period_ms / 1000,
            "mean_bps": round(t.mean_bps, 1), "sha256": t.sha256, "owner": t.owner.get_username(),
            "created_at": t.created_at}  # fmt: skip


def library() -> list[dict[str, Any]]:
    """The traces shipped with the lab (the worker library's), described alike."""
    return [{**t.describe(), "ref": t.name} for t in traces.library()]
