"""The trial page's readable values: metric names in words and units, JSON as tables, and the
trial's place in its sweep (point and repetition as a person counts them).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from django.db.models import Max

from dashboard.quantities import UNIX_TIME, scale_for
from experiments.models import Sweep, Trial
from results import kinds
from results.models import SummaryValue

if TYPE_CHECKING:
    from qoelab.jobtype import JobType

# A name's last word that says its unit (``configured_delay_ms``); checked after a statistic's word.
UNIT_SUFFIXES = {
    "ms": "ms",
    "s": "s",
    "us": "µs",
    "ns": "ns",
    "bps": "bit/s",
    "bytes": "B",
    "B": "B",
    "pct": "%",
}
STAT_WORDS = frozenset({"mean", "median", "min", "max", "avg", "std", "sd", "p50", "p90", "p95", "p99"})
MAX_TABLE_ROWS = 400  # a flattened JSON shows at most this many rows; the rest is in the raw JSON


@dataclass(frozen=True)
class NamedValue:
    """What a name says about its values: a label for people and the unit of the number."""

    label: str
    unit: str


def describe_name(name: str) -> NamedValue:
    """Label and unit from a name's words: ``configured_delay_ms`` -> ("configured delay", "ms").

    The last word names the unit (``_ms``, ``_s``, ``_us``, ``_ns``, ``_bps``, ``_bytes``/``_B``,
    ``_pct``), also before a statistic (``T_ms_median`` -> "T (median)", ms); a name starting with
    ``bytes`` counts bytes (``bytes_down_unique``) and a ``*_at`` number is a moment (unix time, in UTC).
    Anything else is a plain number labelled by its words.
    """
    words = [w for w in name.split("_") if w]
    stat = words.pop() if len(words) > 2 and words[-1].lower() in STAT_WORDS else None
    unit = ""
    if len(words) > 1 and words[-1] in UNIT_SUFFIXES:
        unit = UNIT_SUFFIXES[words.pop()]
    elif len(words) > 1 and words[-1] == "at":
        unit = UNIX_TIME
    elif words and words[0].lower() == "bytes":
        unit = "B"
    label = " ".join(words) or name
    return NamedValue(f"{label} ({stat})" if stat else label, unit)


def metric_names(job: JobType | None, names: Iterable[str]) -> dict[str, NamedValue]:
    """Label and unit of each name: the job type's declaration, else what the name says."""
    declared = {m.name: m for m in job.metrics} if job else {}
    out = {}
    for name in names:
        m = declared.get(name)
        out[name] = NamedValue(m.label, m.unit) if m else describe_name(name)
    return out


def summary_rows(job: JobType | None, values: Iterable[SummaryValue]) -> list[dict[str, Any]]:
    """One row per summary value: label, unit (declared or from the name), raw name, value."""
    rows = list(values)
    names = metric_names(job, (s.name for s in rows))
    return [
        {"name": s.name, "value": s.value, "label": names[s.name].label, "unit": names[s.name].unit}
        for s in rows
    ]


def sample_columns(job: JobType | None, keys: list[str], rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The samples table's columns: label, declared unit, and the one prefix the column is shown in
    (from the largest number of the column on this page), so its numbers compare at a glance."""
    names = metric_names(job, keys)
    out = []
    for key in keys:
        unit = names[key].unit
        numbers = [
            abs(v)
            for r in rows
            if isinstance(v := r.get(key), int | float) and not isinstance(v, bool) and math.isfinite(v)
        ]
        factor, shown = (1.0, "") if unit == UNIX_TIME else scale_for(unit, max(numbers, default=0.0))
        out.append({"key": key, "label": names[key].label, "unit": unit, "shown": shown, "factor": factor})
    return out


# Dicts of statistics whose name carries no unit: the link check's RTTs (emulation/verify.py), kept
# under these names in stored trials.
UNITS_OF_STATS = {"rtt_idle": "ms", "rtt_loaded": "ms"}
# A check's numbers are in the unit of the quantity it names ({"name": "tcp_down_bps", "configured":
# 9653333, ...} -> bit/s).
CHECK_FIELDS = frozenset({"configured", "measured", "expected", "target", "value", "limit"})


def flatten(data: Any, *, limit: int = MAX_TABLE_ROWS) -> tuple[list[dict[str, Any]], int]:
    """A nested JSON document as (rows of dotted key, value, unit, left-out count).

    Dict keys are sorted (jsonb keeps no order) and joined with dots; list items of dicts get
    ``[i]``; a list of plain values stays one row. The unit comes from the key's last name
    (``measured.rtt_ms`` -> ms; ``loss_ci95_pct`` -> % for each item of the list); a statistic
    (``mean``, ``max``, ...) takes its dict's unit (``rtt_idle.mean`` -> ms) and a check's
    ``configured``/``measured`` the unit of the name it checks.
    """
    rows: list[dict[str, Any]] = []
    skipped = 0

    def add(key: str, name: str, value: Any, outer: str = "") -> None:
        nonlocal skipped
        if isinstance(value, dict) and value:
            here = (UNITS_OF_STATS.get(name) or describe_name(name).unit) if name else ""
            checked = value.get("name")
            check_unit = describe_name(checked).unit if isinstance(checked, str) else ""
            for k in sorted(value, key=str):
                k = str(k)
                inherited = check_unit if k in CHECK_FIELDS else here if k.lower() in STAT_WORDS else ""
                add(f"{key}.{k}" if key else k, k, value[k], inherited)
            return
        if isinstance(value, list) and any(isinstance(v, dict | list) for v in value):
            for i, v in enumerate(value):
                add(f"{key}[{i}]", name, v)
            return
        if len(rows) >= limit:
            skipped += 1
            return
        unit = (describe_name(name).unit if name else "") or outer
        rows.append({"key": key or "(value)", "value": value, "unit": unit})

    add("", "", data)
    return rows, skipped


@dataclass(frozen=True)
class Place:
    """Where a trial sits in its sweep, counted from 1: the grid point and the repetition."""

    point: int
    points: int
    repetition: int
    repetitions: int
    run: int  # the order in which the sweep's trials are handed out (index + 1)
    runs: int

    def __str__(self) -> str:
        return f"point {self.point} of {self.points}, repetition {self.repetition} of {self.repetitions}"


def _params_key(params: Any) -> str:
    return json.dumps(params, sort_keys=True, default=str)


def _point_numbers(sweep: Sweep, all_params: Iterable[Any]) -> dict[str, int]:
    """Each distinct parameter set of the sweep -> its number (from 1) in the grid's written order:
    the first grid parameter changes slowest, as the sweep made them (itertools.product)."""
    keys = [k for k in (sweep.grid_order or sorted(sweep.grid)) if k in sweep.grid]

    def rank(params: dict[str, Any]) -> tuple[int, ...]:
        out = []
        for k in keys:
            values = sweep.grid[k]
            if k not in params:  # dropped as inapplicable (a setting another protocol lacks): first
                out.append(-1)
            else:
                out.append(values.index(params[k]) if params[k] in values else len(values))
        return tuple(out)

    distinct = {_params_key(p): p for p in all_params}
    ordered = sorted(distinct, key=lambda k: (rank(distinct[k] or {}), k))
    return {k: i for i, k in enumerate(ordered, start=1)}


def trial_places(sweep: Sweep, trials: Iterable[Trial]) -> dict[int, Place]:
    """The place of each of the sweep's trials (all of them, as the sweep's trial table lists)."""
    trials = list(trials)
    numbers = _point_numbers(sweep, (t.params for t in trials))
    reps = max([sweep.repetitions, *(t.repetition + 1 for t in trials)])
    runs = max(sweep.trial_count, len(trials))
    return {
        t.pk: Place(numbers[_params_key(t.params)], len(numbers), t.repetition + 1, reps, t.index + 1, runs)
        for t in trials
    }


def trial_place(trial: Trial) -> Place:
    """One trial's place, from the sweep's distinct parameter sets (one row per point, not per trial)."""
    sweep = trial.sweep
    distinct = list(sweep.trials.order_by().values_list("params", flat=True).distinct())
    numbers = _point_numbers(sweep, [*distinct, trial.params])
    last_rep = sweep.trials.aggregate(m=Max("repetition"))["m"] or 0
    return Place(
        numbers[_params_key(trial.params)],
        len(numbers),
        trial.repetition + 1,
        max(sweep.repetitions, last_rep + 1),
        trial.index + 1,
        max(sweep.trial_count, sweep.trials.count()),
    )


LOG_PREVIEW_BYTES = 64 * 1024
# C0 controls but tab and newline (terminal escapes in a tool's output): shown as U+FFFD.
_CONTROLS = {c: "\ufffd" for c in (*range(0x00, 0x09), *range(0x0B, 0x20), 0x7F)}


def log_previews(artifacts: Iterable[Any]) -> list[dict[str, Any]]:
    """The text of the trial's log artifacts, for reading in the page: the first 64 KiB of each
    (the download has all of it), undecodable bytes and control characters replaced."""
    out = []
    for a in artifacts:
        if a.kind != "log":
            continue
        try:
            with a.file.open("rb") as fh:
                head = fh.read(LOG_PREVIEW_BYTES + 1)
        except (FileNotFoundError, OSError, ValueError):
            out.append({"artifact": a, "text": None, "truncated": False})
            continue
        text = head[:LOG_PREVIEW_BYTES].decode("utf-8", errors="replace")
        text = text.replace("\r\n", "\n").replace("\r", "\n").translate(_CONTROLS)
        out.append({"artifact": a, "text": text, "truncated": len(head) > LOG_PREVIEW_BYTES})
    return out


# A link log larger than this is not drawn (a three-hour trial's log is about 20 MB of JSON).
LINK_LOG_MAX_BYTES = 64 * 1024**2


def link_log_chart(artifacts: Iterable[Any]) -> dict[str, Any] | None:
    """The trace link's log (``qoelab.emulation.linklog``, artifact ``link_log.json``) in 100 ms
    bins for the trial page's chart, or None when the trial has none. A log that cannot be read
    says why instead (``{"error": ...}``)."""
    from qoelab.emulation import linklog

    found = [a for a in artifacts if a.kind == "json" and a.name == linklog.ARTIFACT]
    if not found:
        return None
    artifact = found[-1]  # the last attempt's
    if artifact.size > LINK_LOG_MAX_BYTES:
        return {"error": f"the log is {artifact.size} bytes, more than the page draws; download it below"}
    try:
        with artifact.file.open("rb") as fh:
            log = json.loads(fh.read())
        return linklog.chart(log)
    except (FileNotFoundError, OSError, ValueError, KeyError, TypeError) as err:
        return {"error": f"the log could not be read ({err.__class__.__name__})"}


def playable(artifact: Any) -> str | None:
    """None when the page can play this artifact; else why not (shown instead of the player)."""
    kind = kinds.KINDS.get(artifact.kind)
    if kind is None or not kind.inline:
        return f"a {artifact.kind} artifact is not media a page plays"
    try:
        with artifact.file.open("rb") as fh:
            head = fh.read(kinds.HEAD_BYTES)
    except (FileNotFoundError, OSError, ValueError):
        return "its file is missing from storage"
    if kind.sniff(head) is None:
        return f"its bytes are not {kind.expected}"
    return None


# Paper 002's flow classification of an rd_qoe capture (provenance["thinclient_classify"]): the
# measured value beside the paper's RDP value, in the order of its Tables 1 and 2.
CLASSIFY_ROWS = (
    ("alpha", "α: P(interactive → bulk)", ""),
    ("beta", "β: P(bulk → interactive)", ""),
    ("p_I", "p_I: share of interactive flows", ""),
    ("p_B", "p_B: share of bulk flows", ""),
    ("c_B", "c_B: segments per bulk flow", ""),
    ("t_II_s", "t_II: interactive → interactive", "s"),
    ("t_IB_s", "t_IB: interactive → bulk", "s"),
    ("t_BI_s", "t_BI: bulk → interactive", "s"),
    ("t_BB_s", "t_BB: bulk → bulk", "s"),
    ("bytes_per_packet_interactive", "bytes per packet, interactive", "B"),
    ("bytes_per_packet_bulk", "bytes per packet, bulk", "B"),
)


def _number(value: Any) -> float | None:
    ok = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
    return float(value) if ok else None


def thinclient_table(provenance: Any) -> dict[str, Any] | None:
    """The trial page's "Traffic by paper 002's rule" table, or None when the trial has no
    classification; ``error`` (and no rows) when the classification could not be made."""
    doc = provenance.get("thinclient_classify") if isinstance(provenance, dict) else None
    if not isinstance(doc, dict):
        return None
    if doc.get("error"):
        return {"error": str(doc["error"]), "rows": []}
    paper = doc.get("paper") if isinstance(doc.get("paper"), dict) else {}
    rows = [
        {
            "key": key,
            "label": label,
            "unit": unit,
            "measured": _number(doc.get(key)),
            "paper": _number(paper.get(key)),
        }
        for key, label, unit in CLASSIFY_ROWS
    ]
    tau, paper_tau = _number(doc.get("tau_s")), _number(paper.get("tau_s"))
    return {
        "error": None,
        "rows": rows,
        "tau_s": tau,
        "tau_is_papers": tau is not None
        and paper_tau is not None
        and math.isclose(tau, paper_tau, rel_tol=1e-6),
        "paper_tau_s": paper_tau,
        "flows_interactive": doc.get("flows_interactive"),
        "flows_bulk": doc.get("flows_bulk"),
        "segments": doc.get("segments"),
        "connections": doc.get("connections"),
        "server": ":".join(str(v) for v in (doc.get("server_ip"), doc.get("server_port")) if v is not None),
        "capture_point": doc.get("capture_point"),
    }
