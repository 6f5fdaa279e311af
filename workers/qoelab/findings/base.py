"""Verdict types, statistics and grouping shared by the findings checks (no Django).

A check reads a plain list of succeeded trials, ``{"params": {resolved SI values}, "summary":
{metric: value}}``, groups them by condition (protocol series + x value + facet value) inside a
*scope* (every other parameter that varies, e.g. ``server``: VM and namespace trials are never
pooled), computes mean and 95 % Student-t CI over the repetitions and decides with non-overlapping
intervals. See docs/findings.md.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from scipy import stats

from qoelab.stats import CONFIDENCE, Stat, mean_ci  # the checks import them from here too

Verdict = Literal["holds", "does not hold", "inconclusive"]
HOLDS: Verdict = "holds"
FAILS: Verdict = "does not hold"
INCONCLUSIVE: Verdict = "inconclusive"
PROTOCOL_ORDER = ("vnc", "spice", "x2go")
# Never part of a condition: the seed is a repetition knob (workload pages, link PRNG), not a setting.
POOLED = frozenset({"seed"})


# ---- statistics ---------------------------------------------------------------------------------


def slope_ci(xs: Sequence[float], ys: Sequence[float], confidence: float = CONFIDENCE) -> Stat:
    """Least-squares slope of y over x with its Student-t CI (n − 2 degrees of freedom).

    Needs at least two distinct x values; n ≥ 3 points for an interval.
    """
    pts = [(float(x), float(y)) for x, y in zip(xs, ys, strict=True) if math.isfinite(float(y))]
    n = len(pts)
    if n < 2 or len({x for x, _ in pts}) < 2:
        return Stat(n, None, None, None)
    fit = stats.linregress([x for x, _ in pts], [y for _, y in pts])
    slope = float(fit.slope)
    if n < 3:
        return Stat(n, slope, None, None)
    half = float(stats.t.ppf(0.5 + confidence / 2, n - 2)) * float(fit.stderr)
    return Stat(n, slope, slope - half, slope + half)


# ---- verdicts -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Row:
    """One line of a finding's numbers: a quantity of one series at one condition."""

    condition: str
    protocol: str
    quantity: str
    n: int
    mean: float | None
    ci_low: float | None
    ci_high: float | None

    def to_json(self) -> dict[str, Any]:
        return {
            "condition": self.condition,
            "protocol": self.protocol,
            "quantity": self.quantity,
            "n": self.n,
            "mean": self.mean,
            "ci_low": self.ci_low,
            "ci_high": self.ci_high,
        }


@dataclass(frozen=True)
class Finding:
    """A check's answer for one scope (e.g. ``server = namespace``) of the results."""

    name: str
    title: str
    claim: str
    figure: str
    verdict: Verdict
    reason: str
    scope: dict[str, Any] = field(default_factory=dict)
    rows: tuple[Row, ...] = ()
    trials: int = 0  # the succeeded trials the check judged in this scope
    lab: str | None = None  # the deciding comparison, with the lab's numbers (``deciding``)

    @property
    def scope_label(self) -> str:
        return ", ".join(f"{k} = {fmt_value(k, v)}" for k, v in self.scope.items())

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "title": self.title,
            "claim": self.claim,
            "figure": self.figure,
            "verdict": self.verdict,
            "reason": self.reason,
            "scope": dict(self.scope),
            "scope_label": self.scope_label,
            "n": self.trials,
            "rows": [r.to_json() for r in self.rows],
        }


Outcome = Literal["supports", "contradicts", "unclear"]


@dataclass(frozen=True)
class Comparison:
    """One elementary test of a check (e.g. X2Go's T below SPICE's at 1 Mbit/s) and its text."""

    outcome: Outcome
    text: str


def lower(a: Stat, b: Stat, a_name: str, b_name: str, where: str, unit: str = "") -> Comparison:
    """Does ``a`` lie below ``b``? Decided only by non-overlapping 95 % intervals."""
    if a.n == 0 or b.n == 0:
        missing = " and ".join(nm for nm, s in ((a_name, a), (b_name, b)) if s.n == 0)
        return Comparison("unclear", f"no result for {missing} at {where}")
    if not (a.has_ci and b.has_ci):
        few = " and ".join(f"{nm} (n = {s.n})" for nm, s in ((a_name, a), (b_name, b)) if not s.has_ci)
        return Comparison("unclear", f"n < 2 for {few} at {where}, so no confidence interval")
    assert a.ci_low is not None and a.ci_high is not None and b.ci_low is not None and b.ci_high is not None
    shown = f"{a_name} {fmt_num(a.mean)}{unit} vs {b_name} {fmt_num(b.mean)}{unit} at {where}"
    if a.ci_high < b.ci_low:
        return Comparison("supports", f"{a_name} is lower: {shown}")
    if a.ci_low > b.ci_high:
        return Comparison("contradicts", f"{b_name} is lower: {shown}")
    return Comparison("unclear", f"the 95 % CIs overlap: {shown}")


def at_most(s: Stat, bound: float, name: str, where: str) -> Comparison:
    """Does the mean lie at or below ``bound``? Decided by the whole interval being on one side."""
    return _beside(s, bound, name, where, below=True)


def at_least(s: Stat, bound: float, name: str, where: str) -> Comparison:
    """Does the mean lie at or above ``bound``? Decided by the whole interval being on one side."""
    return _beside(s, bound, name, where, below=False)


def _beside(s: Stat, bound: float, name: str, where: str, below: bool) -> Comparison:
    if s.n == 0:
        return Comparison("unclear", f"no result for {name} at {where}")
    if not s.has_ci:
        return Comparison("unclear", f"n < 2 for {name} (n = {s.n}) at {where}, so no confidence interval")
    assert s.ci_low is not None and s.ci_high is not None
    shown = f"{name} {fmt_num(s.mean)} (CI {fmt_num(s.ci_low)}–{fmt_num(s.ci_high)}) at {where}"
    inside, outside = (
        (s.ci_high <= bound, s.ci_low > bound) if below else (s.ci_low >= bound, s.ci_high < bound)
    )
    if inside:
        return Comparison("supports", shown)
    if outside:
        return Comparison("contradicts", f"{'above' if below else 'below'} {fmt_num(bound)}: {shown}")
    return Comparison("unclear", f"the 95 % CI straddles {fmt_num(bound)}: {shown}")


def decide(comparisons: Sequence[Comparison], missing: Sequence[str] = ()) -> tuple[Verdict, str]:
    """One clear counter-example refutes; a claim holds only when every comparison supports it and
    nothing it needs is missing; anything else is inconclusive (the first reason is given)."""
    bad = [c for c in comparisons if c.outcome == "contradicts"]
    if bad:
        return FAILS, _sentence(bad[0].text, len(bad), "contradiction")
    if missing:
        return INCONCLUSIVE, _sentence(missing[0], len(missing), "gap")
    if not comparisons:
        return INCONCLUSIVE, "no comparable points"
    unclear = [c for c in comparisons if c.outcome == "unclear"]
    if unclear:
        return INCONCLUSIVE, _sentence(unclear[0].text, len(unclear), "undecided comparison")
    if len(comparisons) == 1:
        return HOLDS, comparisons[0].text
    return HOLDS, f"all {len(comparisons)} comparisons agree, e.g. {comparisons[0].text}"


def deciding(comparisons: Sequence[Comparison], missing: Sequence[str] = ()) -> str | None:
    """The text of the comparison that decided (``decide``'s order), with its numbers: the lab's
    value in a findings table. None when a gap decided or nothing was compared."""
    for outcome in ("contradicts", "unclear", "supports"):
        if outcome != "contradicts" and missing:
            return None
        found = [c for c in comparisons if c.outcome == outcome]
        if found:
            return found[0].text
    return None


def _sentence(text: str, count: int, what: str) -> str:
    more = count - 1
    return text + (f" (and {more} more {what}{'s' if more > 1 else ''})" if more else "")


# ---- formatting ---------------------------------------------------------------------------------


def fmt_num(v: float | None) -> str:
    if v is None:
        return "–"
    if v == 0 or 0.01 <= abs(v) < 1e5:
        return f"{v:.3g}" if abs(v) < 100 else f"{v:.0f}"
    return f"{v:.3g}"


def fmt_value(param: str, v: Any) -> str:
    """A resolved (SI) parameter value as a reader writes it: 1e6 -> '1 Mbit/s', 0.05 -> '50 ms'."""
    if v is None or (isinstance(v, float) and math.isinf(v)):
        return "unshaped" if param in ("rate", "up_rate") else "none"
    if isinstance(v, bool) or not isinstance(v, int | float):
        return str(v)
    if param in ("rate", "up_rate"):
        return f"{v / 1e6:g} Mbit/s"
    if param in ("delay", "up_delay", "jitter", "up_jitter"):
        return f"{v * 1e3:g} ms"
    if param in ("loss", "up_loss"):
        return f"{v:g} %"
    return f"{v:g}"


def where(**conds: Any) -> str:
    return ", ".join(f"{k} {fmt_value(k, v)}" for k, v in conds.items())


# ---- grouping -----------------------------------------------------------------------------------


def _hashable(v: Any) -> Any:
    return json.dumps(v, sort_keys=True) if isinstance(v, dict | list) else v


def as_number(v: Any) -> float:
    """An x or facet value as a number; an unshaped rate (None) counts as infinitely fast."""
    return math.inf if v is None else float(v)


def values_of(rows: Iterable[Mapping[str, Any]], param: str) -> list[Any]:
    """The distinct values ``param`` takes, numbers ascending."""
    seen = {_hashable(r["params"].get(param)) for r in rows}
    return sorted(
        seen, key=lambda v: (0, as_number(v), "") if v is None or isinstance(v, int | float) else (1, 0, v)
    )


def protocol_param(name: str) -> str | None:
    """'vnc_quality' -> 'vnc': a setting that belongs to one protocol."""
    head = name.split("_", 1)[0]
    return head if head in PROTOCOL_ORDER and "_" in name else None


@dataclass(frozen=True)
class Series:
    """A protocol, with its own settings when they vary (two X2Go packs are two series)."""

    protocol: str
    settings: tuple[tuple[str, Any], ...] = ()

    @property
    def label(self) -> str:
        name = {"vnc": "VNC", "spice": "SPICE", "x2go": "X2Go"}.get(self.protocol, self.protocol)
        return name + (f" ({', '.join(f'{k} = {v}' for k, v in self.settings)})" if self.settings else "")


class Scope:
    """The trials of one scope, grouped by series and condition, recording the numbers it shows."""

    def __init__(self, rows: Sequence[Mapping[str, Any]], scope: dict[str, Any]) -> None:
        self.rows = list(rows)
        self.scope = scope
        varying: dict[str, list[str]] = {}
        for proto in {r["params"].get("protocol") for r in self.rows} - {None}:
            own = [r for r in self.rows if r["params"].get("protocol") == proto]
            keys = {k for r in own for k in r["params"] if protocol_param(k) == proto}
            varying[proto] = sorted(k for k in keys if len(values_of(own, k)) > 1)
        self._varying = varying
        self.shown: dict[tuple[str, str, str], Row] = {}

    def series_of(self, row: Mapping[str, Any]) -> Series:
        p = row["params"]
        proto = p.get("protocol")
        return Series(str(proto), tuple((k, _hashable(p.get(k))) for k in self._varying.get(proto, [])))

    def series(self, protocol: str | None = None) -> list[Series]:
        found = {self.series_of(r) for r in self.rows}
        out = sorted(found, key=lambda s: (_proto_rank(s.protocol), str(s.settings)))
        return [s for s in out if protocol is None or s.protocol == protocol]

    @property
    def protocols(self) -> list[str]:
        return sorted({s.protocol for s in self.series()}, key=_proto_rank)

    def select_any(self, **conds: Any) -> list[Mapping[str, Any]]:
        """Rows of any series at ``conds``."""
        return [r for r in self.rows if all(_same(r["params"].get(k), v) for k, v in conds.items())]

    def select(self, series: Series, **conds: Any) -> list[Mapping[str, Any]]:
        return [
            r
            for r in self.rows
            if self.series_of(r) == series and all(_same(r["params"].get(k), v) for k, v in conds.items())
        ]

    def stat(self, series: Series, metric: str, quantity: str, scale: float = 1.0, **conds: Any) -> Stat:
        """Mean and CI of ``metric`` (per-trial summary value, divided by ``scale``) at ``conds``."""
        vals = [r["summary"].get(metric) for r in self.select(series, **conds)]
        s = mean_ci(v / scale for v in vals if v is not None)
        self.record(where(**conds), series, quantity, s)
        return s

    def derived(
        self, series: Series, fn: Callable[[Mapping[str, Any]], float | None], quantity: str, **conds: Any
    ) -> Stat:
        """Mean and CI of a per-trial value computed from the whole row (params and summary)."""
        s = mean_ci(v for v in (fn(r) for r in self.select(series, **conds)) if v is not None)
        self.record(where(**conds), series, quantity, s)
        return s

    def record(self, condition: str, series: Series, quantity: str, s: Stat) -> None:
        self.shown[(condition, series.label, quantity)] = Row(
            condition, series.label, quantity, s.n, s.mean, s.ci_low, s.ci_high
        )

    def table(self) -> tuple[Row, ...]:
        return tuple(self.shown.values())


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, int | float) and isinstance(b, int | float) and not isinstance(a, bool):
        return math.isclose(float(a), float(b), rel_tol=1e-9, abs_tol=1e-12)
    return _hashable(a) == _hashable(b)


def _proto_rank(p: str) -> tuple[int, str]:
    return (PROTOCOL_ORDER.index(p), p) if p in PROTOCOL_ORDER else (len(PROTOCOL_ORDER), p)


def scopes(rows: Sequence[Mapping[str, Any]], keep: Iterable[str]) -> list[tuple[dict[str, Any], list]]:
    """Split rows by every parameter that varies but is neither kept (x, facet, protocol), pooled
    (seed) nor a protocol's own setting (those make series): ``server`` vm vs namespace, a delay
    that varies in a rate sweep, ... Each split is judged on its own, never pooled.

    A row without a parameter (a job type dropped it as not applying, e.g. APT's ``n0`` in a
    one-session run) belongs to every split of that parameter."""
    keep = set(keep) | {"protocol"} | POOLED
    names = sorted({k for r in rows for k in r["params"]})
    split = [k for k in names if k not in keep and not protocol_param(k)
             and len(values_of([r for r in rows if k in r["params"]], k)) > 1]  # fmt: skip
    missing = object()

    def key_of(r: Mapping[str, Any]) -> tuple[Any, ...]:
        return tuple(_hashable(r["params"][k]) if k in r["params"] else missing for k in split)

    def matches(row_key: tuple[Any, ...], group: tuple[Any, ...]) -> bool:
        return all(a is missing or b is missing or a == b for a, b in zip(row_key, group, strict=True))

    keys = {key_of(r) for r in rows}
    # A group is a combination no other combination refines (fills in one of its missing values).
    groups = [k for k in keys if not any(o != k and matches(k, o) and sum(v is missing for v in o)
                                         < sum(v is missing for v in k) for o in keys)]  # fmt: skip
    out = []
    for g in sorted(groups, key=lambda k: tuple(str(v) if v is not missing else "" for v in k)):
        scope = {k: v for k, v in zip(split, g, strict=True) if v is not missing}
        out.append((scope, [r for r in rows if matches(key_of(r), g)]))
    return out


# The scope of trials whose row names no machine: never pooled with a named machine's.
UNRECORDED_HOST = "not recorded"


def machine(host: Mapping[str, Any] | None) -> str:
    """A row's machine: its CPU model and, when the row has it, its clock (BogoMIPS / 2, in GHz).

    The model alone pools different machines: two "AMD EPYC" hosts here ran at 2.45 and 2.60 GHz.
    """
    host = host or {}
    cpu = host.get("cpu")
    if not cpu:
        return UNRECORDED_HOST
    try:
        return f"{cpu} @ {float(host['bogomips']) / 2000:.2f} GHz"
    except (KeyError, TypeError, ValueError):
        return str(cpu)


def recorded_host(row: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The row's ``host`` record, or for a VOSE run made before rows carried one, the CPU model and
    TSC rate its provenance recorded (the TSC's ticks per ns, in GHz, is the clock BogoMIPS / 2 gives)."""
    if row.get("host"):
        return row["host"]
    prov = row.get("provenance") or {}
    cpu, clock = prov.get("cpu"), prov.get("clock")
    if not isinstance(cpu, Mapping) or not cpu.get("model"):
        return None
    ticks = clock.get("ticks_per_ns") if isinstance(clock, Mapping) else None
    return {"cpu": cpu["model"], **({"bogomips": float(ticks) * 2000} if ticks else {})}


def normalise(rows: Iterable[Mapping[str, Any]], per_host: bool = False) -> list[dict[str, Any]]:
    """Keep rows that have params and a summary; summary values as floats (None dropped).

    ``per_host``: the row's machine (:func:`machine`) becomes the parameter ``host``, so
    :func:`scopes` judges each machine's trials apart; rows that name no machine make a scope of
    their own (``host = not recorded``) rather than joining every machine's.

    A benchmark file's row that names its ``rep`` (and ``group``) keeps them as ``pair``: the runs
    of one repetition were made back to back, so a check may compare them pairwise (ch3)."""
    out = []
    for r in rows:
        params = dict(r.get("params") or r.get("resolved") or {})
        summary = {k: float(v) for k, v in (r.get("summary") or {}).items() if v is not None}
        if params:
            if per_host:
                params["host"] = machine(recorded_host(r))
            row: dict[str, Any] = {"params": params, "summary": summary}
            if r.get("rep") is not None:
                row["pair"] = f"{r.get('group', '')}#{r['rep']}"
            out.append(row)
    return out


@dataclass(frozen=True)
class Check:
    """One finding of the thesis as code: what it needs, and how it decides in one scope."""

    name: str
    title: str
    claim: str
    figure: str
    x: str | None  # the parameter that must be swept (two values or more); None: a claim at one point
    protocols: tuple[str, ...]  # must all be present for a decision (missing ones: inconclusive)
    run: Callable[[Scope], tuple[list[Comparison], list[str]]]
    facet: str | None = None
    # Parameters that make series rather than scopes (storage APT: mode and sessions).
    series_by: tuple[str, ...] = ()
    min_protocols: int = 1
    # The thesis' conditions of the figure, {param: (low, high)} inclusive: trials outside are left
    # out (T vs rate at 200 ms delay is not what Fig. 4.6 shows; finding 5 says it differs there).
    within: Mapping[str, tuple[float, float]] = field(default_factory=dict)
    # Categorical conditions, {param: allowed values} (vose: path app, device sha1_only). A trial
    # without the parameter (its job type dropped it as not applying) is not left out by it.
    among: Mapping[str, tuple[Any, ...]] = field(default_factory=dict)
    # Values some trial inside must have for the check to apply, {param: values}: rows that only give
    # context (vose: AES-only beside SHA1-only's knee) do not make a check apply on their own.
    requires: Mapping[str, tuple[Any, ...]] = field(default_factory=dict)
    # What a row is, for the reasons given: a trial, or one evaluator's answers on a condition.
    rows_are: str = "trials"

    def inside(self, params: Mapping[str, Any]) -> bool:
        for k, (lo, hi) in self.within.items():
            v = params.get(k)
            # Resolved parameters are SI numbers; anything else (an unresolved "1mbit") is not inside.
            if not isinstance(v, int | float) or isinstance(v, bool) or not lo - 1e-12 <= v <= hi + 1e-12:
                return False
        for k, allowed in self.among.items():
            if k in params and not any(_same(params[k], a) for a in allowed):
                return False
        return True

    @property
    def conditions(self) -> str:
        """The thesis' conditions as text, e.g. 'delay 0–20 ms, loss 0–0.1 %', 'mode vose or inf'."""
        ranges = [
            f"{k} {fmt_value(k, lo).split()[0]}–{fmt_value(k, hi)}" for k, (lo, hi) in self.within.items()
        ]
        kinds = [f"{k} {' or '.join(fmt_value(k, a) for a in allowed)}" for k, allowed in self.among.items()]
        return ", ".join(ranges + kinds)

    def applies(self, params: Iterable[Mapping[str, Any]]) -> str | None:
        """None when the check applies to trials with these parameters (resolved, SI), else why not:
        its x parameter takes two values or more inside the thesis' conditions, and one of the
        protocols it compares is present."""
        inside = [p for p in params if self.inside(p)]
        for k, wanted in self.requires.items():
            if not any(_same(p.get(k), w) for p in inside for w in wanted):
                return f"no trial with {k} {' or '.join(fmt_value(k, w) for w in wanted)}"
        if self.x is None:
            return None if inside else "no trial lies within " + (self.conditions or "the results")
        if len({_hashable(p.get(self.x)) for p in inside}) < 2:
            extra = f" within {self.conditions}" if self.conditions else ""
            return f"{self.x} is not swept{extra}"
        protos = {str(p.get("protocol")) for p in inside}
        if self.protocols and not protos & set(self.protocols):
            return f"none of {', '.join(self.protocols)} is in the results"
        return None

    def evaluate(self, rows: Sequence[Mapping[str, Any]]) -> list[Finding]:
        keep = {k for k in (self.x, self.facet, *self.series_by) if k}
        rows = [r for r in rows if self.inside(r["params"])]
        out = []
        for scope_values, scoped in scopes(rows, keep) or [({}, [])]:
            sc = Scope(scoped, scope_values)
            missing = [f"no {_label(p)} {self.rows_are}" for p in self.protocols if p not in sc.protocols]
            if len(sc.protocols) < self.min_protocols:
                missing.append(f"needs {self.min_protocols} protocols, the results have {len(sc.protocols)}")
            if not scoped:
                where_ = f" within {self.conditions}" if self.conditions else ""
                what = "succeeded trials" if self.rows_are == "trials" else self.rows_are
                missing = [f"no {what}{where_} yet"]
            comparisons, gaps = self.run(sc) if not missing else ([], [])
            verdict, reason = decide(comparisons, missing + gaps)
            lab = deciding(comparisons, missing + gaps)
            out.append(
                Finding(
                    self.name,
                    self.title,
                    self.claim,
                    self.figure,
                    verdict,
                    reason,
                    scope_values,
                    sc.table(),
                    trials=len(scoped),
                    lab=lab,
                )
            )
        return out


@dataclass(frozen=True)
class Report:
    """A paper's findings as code: its checks and their paper values, declared by the job type whose
    results it reads (``JobType.reports``). ``host_bound``: the measurements are the host CPU's (the
    storage client is a QEMU guest, as fast as the machine emulating it), so each host CPU's trials
    are judged apart rather than pooled."""

    name: str
    title: str
    checks: tuple[Check, ...]
    paper_values: Mapping[str, str]
    host_bound: bool = False
    # "trials": the job type's sweep results (the sweep page's findings); "ratings": its sessions'
    # DCR ratings, one row per evaluator and condition (a rating campaign's page).
    reads: Literal["trials", "ratings"] = "trials"


def _label(protocol: str) -> str:
    return Series(protocol).label
