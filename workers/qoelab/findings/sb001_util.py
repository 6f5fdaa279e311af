"""Row helpers for the ``sb001`` report (``storage_bench`` results): network rows, series, bands.

Kept apart from the checks (``sb001.py``) so each stays short. Rows are the plain dicts of
``qoelab.findings.base`` (``{"params": resolved SI values, "summary": {metric: float}}``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from qoelab.findings.base import (
    Check,
    Comparison,
    Scope,
    Series,
    Stat,
    at_least,
    at_most,
    fmt_num,
    lower,
    mean_ci,
    slope_ci,
)

KIB = 1024
MIB = 1024 * 1024
LABEL = {"nfs": "NFS", "iscsi": "iSCSI", "swift": "Swift"}
FILE_FAMILIES = ("batch", "single", "unit")
# Repetition knobs: pooled, never a scope (base already pools ``seed``).
REPS = ("repetition", "rep", "seed")
# A trial is guest-bound when it ran within 80 % of the client guest's own ceiling; when more than this
# share of a group's trials are, the group may measure the guest rather than the storage system.
GUEST_MAJORITY = 0.5
# The thesis' named network rows (§2 of the notes): RTT, loss (%), jitter (s).
RTT_50, LOSS_01, JITTER_10 = 0.05, 0.1, 0.01
NET_ROWS = {
    "ideal": (0.0, 0.0, 0.0),
    "+50 ms": (RTT_50, 0.0, 0.0),
    "+0.1 % loss": (RTT_50, LOSS_01, 0.0),
    "realistic": (RTT_50, LOSS_01, JITTER_10),
}


# ---- parameters -----------------------------------------------------------------------------------


def num(p: Mapping[str, Any], key: str, default: float = 0.0) -> float:
    """A numeric parameter; absent (or not a number) counts as ``default`` (no impairment)."""
    v = p.get(key)
    if v is None or isinstance(v, bool) or not isinstance(v, int | float):
        return default
    return float(v)


def close(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=1e-6, abs_tol=1e-9)


def rtt(p: Mapping[str, Any]) -> float:
    return num(p, "rtt")


def ideal(p: Mapping[str, Any]) -> bool:
    return rtt(p) == 0 and num(p, "loss") == 0 and num(p, "jitter") == 0


def net_row(p: Mapping[str, Any]) -> str | None:
    """The thesis' row name (ideal, +50 ms, +0.1 % loss, realistic) the trial's network is, if any."""
    for name, (r, loss, jitter) in NET_ROWS.items():
        if close(rtt(p), r) and close(num(p, "loss"), loss) and close(num(p, "jitter"), jitter):
            return name
    return None


def net(p: Mapping[str, Any]) -> str:
    """The trial's network in words: 'ideal network' or 'RTT 50 ms, loss 0.1 %, jitter 10 ms'."""
    if ideal(p):
        return "ideal network"
    parts = [f"RTT {rtt(p) * 1e3:g} ms"]
    if num(p, "loss"):
        parts.append(f"loss {num(p, 'loss'):g} %")
    if num(p, "jitter"):
        parts.append(f"jitter {num(p, 'jitter') * 1e3:g} ms")
    return ", ".join(parts)


def size(b: float | None) -> str:
    if b is None:
        return "?"
    return f"{b / MIB:g} MiB" if b >= MIB else f"{b / KIB:g} KiB"


def clean(params: Mapping[str, Any]) -> dict[str, Any]:
    """The scheduler only for iSCSI, no form for Swift (a FUSE client has only the default form),
    and NFS/iSCSI file trials without a form at the job type's default (direct). ``swift_client``
    only for Swift, in the guest where a row predates it: a host-client Swift is then a scope of
    its own, which the NFS and iSCSI rows (none, or a benchmark file's dump of every field) join."""
    p = dict(params)
    target = p.get("target")
    if target != "iscsi":
        p.pop("scheduler", None)
    if target == "swift":
        p.pop("form", None)
        p.setdefault("swift_client", "guest")
    else:
        p.pop("swift_client", None)
        if p.get("family") in FILE_FAMILIES and p.get("form") is None:
            p["form"] = "direct"
    return p


def series_label(p: Mapping[str, Any]) -> str:
    """'NFS (sync)', 'iSCSI (direct, mq-deadline)', 'Swift'."""
    extra = [str(p[k]) for k in ("form", "scheduler") if p.get(k) is not None]
    name = LABEL.get(str(p.get("target")), str(p.get("target")))
    return name + (f" ({', '.join(extra)})" if extra else "")


# ---- grouping -------------------------------------------------------------------------------------


def _order(v: Any) -> tuple[int, float, str]:
    if v is None:
        return (0, 0.0, "")
    if isinstance(v, int | float) and not isinstance(v, bool):
        return (1, float(v), "")
    return (2, 0.0, str(v))


def groups(rows: Iterable[Mapping[str, Any]], *keys: str) -> dict[tuple[Any, ...], list[Mapping[str, Any]]]:
    """Rows by the values of ``keys`` (ascending; a missing parameter is None)."""
    out: dict[tuple[Any, ...], list[Mapping[str, Any]]] = {}
    for r in rows:
        out.setdefault(tuple(r["params"].get(k) for k in keys), []).append(r)
    return dict(sorted(out.items(), key=lambda kv: tuple(_order(v) for v in kv[0])))


def of(rows: Iterable[Mapping[str, Any]], **conds: Any) -> list[Mapping[str, Any]]:
    return [r for r in rows if all(r["params"].get(k) == v for k, v in conds.items())]


def by_series(rows: Iterable[Mapping[str, Any]], target: str) -> dict[str, list[Mapping[str, Any]]]:
    """One target's rows by series label (iSCSI's forms and schedulers apart)."""
    out: dict[str, list[Mapping[str, Any]]] = {}
    for r in of(rows, target=target):
        out.setdefault(series_label(r["params"]), []).append(r)
    return dict(sorted(out.items()))


def largest_n(rows: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """Metadata trials at their largest ``meta_n`` (the thesis' latency plots use 1000)."""
    ns = [r["params"].get("meta_n") for r in rows if r["params"].get("meta_n") is not None]
    return [r for r in rows if r["params"].get("meta_n") == max(ns)] if ns else list(rows)


def per_op_ms(r: Mapping[str, Any], kind: str) -> float | None:
    s = r["summary"]
    if f"{kind}_ms_per_op" in s:
        return s[f"{kind}_ms_per_op"]
    n = s.get("meta_n") or r["params"].get("meta_n")
    return s[f"{kind}_s"] * 1e3 / n if f"{kind}_s" in s and n else None


# ---- statistics and comparisons -------------------------------------------------------------------


def stat(sc: Scope, rows: Iterable[Mapping[str, Any]], condition: str, label: str, quantity: str,
         fn: Callable[[Mapping[str, Any]], float | None]) -> Stat:  # fmt: skip
    """Mean and CI of a per-trial value, recorded in the finding's table."""
    s = mean_ci(v for v in (fn(r) for r in rows) if v is not None)
    sc.record(condition, Series(label), quantity, s)
    return s


def metric(name: str, scale: float = 1.0) -> Callable[[Mapping[str, Any]], float | None]:
    return lambda r: r["summary"][name] / scale if name in r["summary"] else None


def times(s: Stat, k: float) -> Stat:
    """``k · s`` (k > 0): a bound scaled from a measured mean and its interval."""

    def f(v: float | None) -> float | None:
        return None if v is None else k * v

    return Stat(s.n, f(s.mean), f(s.ci_low), f(s.ci_high))


def band(s: Stat, lo: float, hi: float, name: str, where: str) -> Comparison:
    """Is the mean within [lo, hi]? The whole CI inside supports, wholly outside one side refutes."""
    low, high = at_least(s, lo, name, where), at_most(s, hi, name, where)
    for c in (low, high):
        if c.outcome == "contradicts":
            return Comparison("contradicts", f"{c.text} (band {fmt_num(lo)}–{fmt_num(hi)})")
    if low.outcome == high.outcome == "supports":
        return Comparison("supports", f"{low.text}, within {fmt_num(lo)}–{fmt_num(hi)}")
    c = low if low.outcome == "unclear" else high
    return Comparison("unclear", f"{c.text} (band {fmt_num(lo)}–{fmt_num(hi)})")


def guest_bound(rows: Sequence[Mapping[str, Any]], label: str, where: str) -> Comparison | None:
    """An undecided comparison when most of a group's trials ran near the client guest's own ceiling."""
    flagged = [r for r in rows if r["summary"].get("guest_bound", 0.0) >= 0.5]
    if not rows or len(flagged) <= GUEST_MAJORITY * len(rows):
        return None
    ceil = mean_ci(r["summary"].get("ceiling_mib_s") for r in flagged)
    at = f" of {fmt_num(ceil.mean)} MiB/s" if ceil.mean is not None else ""
    return Comparison(
        "unclear",
        f"{len(flagged)} of {len(rows)} {label} trials at {where} are guest-bound (within 80 % of the client "
        f"guest's own ceiling{at} with no emulator in the way), so they may measure the guest, not {label}",
    )


def guarded(c: Comparison, *sides: tuple[Sequence[Mapping[str, Any]], str, str]) -> Comparison:
    """``c``, unless one of its sides (rows, label, where) is dominated by guest-bound trials."""
    for rows, label, where in sides:
        g = guest_bound(rows, label, where)
        if g is not None:
            return g
    return c


# ---- per-check helpers ---------------------------------------------------------------------------


def where_of(sc: Scope, *more: str) -> str:
    parts = [f"{k} {v / 1e6:g} Mbit/s" if k == "rate" and isinstance(v, int | float) else f"{k} {v}"
             for k, v in sc.scope.items()]  # fmt: skip
    return ", ".join([*more, *parts]) or "these trials"


def family(*names: str, target: str | None = None) -> Any:
    def keep(p: Mapping[str, Any]) -> bool:
        return p.get("family") in names and (target is None or p.get("target") == target)

    return keep


def no_loss(p: Mapping[str, Any]) -> bool:
    return num(p, "loss") == 0 and num(p, "jitter") == 0


def all_of(*tests: Any) -> Any:
    return lambda p: all(t(p) for t in tests)


def is_(key: str, *values: Any) -> Any:
    return lambda p: p.get(key) in values


def rtt_slope(sc: Scope, rows: Sequence[Mapping[str, Any]], label: str, kind: str) -> Any:
    """Least-squares slope of ms per operation over RTT in ms: round trips per operation."""
    pts = [(rtt(r["params"]) * 1e3, per_op_ms(r, kind)) for r in rows]
    pts = [(x, y) for x, y in pts if y is not None]
    s = slope_ci([x for x, _ in pts], [y for _, y in pts])
    rtts = sorted({x for x, _ in pts})
    sc.record(
        f"RTT {'/'.join(fmt_num(x) for x in rtts)} ms", Series(label), f"{kind}: RTTs per op (slope)", s
    )
    return s


def per_rtt(sc: Scope, rows: Sequence[Mapping[str, Any]], label: str, kind: str) -> None:
    for here in groups(rows, "rtt").values():
        stat(sc, here, net(here[0]["params"]), label, f"{kind}: ms per op", lambda r, k=kind: per_op_ms(r, k))


def answered_locally(rows: Sequence[Mapping[str, Any]], kind: str) -> str | None:
    """Why a kind measured the client rather than the server, or None: at an RTT of 20 ms or more its
    mean time per operation stayed below one RTT (the call returned before any reply could come), or,
    at any RTT, it put less than one packet per operation on the link (no request went out). rclone
    does both for Swift: it keeps directories to itself and answers a new file's close before the
    upload's reply."""
    for here in groups(rows, "rtt").values():
        ms = [v for r in here if (v := per_op_ms(r, kind)) is not None]
        n = here[0]["params"].get("meta_n") or here[0]["summary"].get("meta_n") or 0
        packets = [r["summary"][f"{kind}_packets"] for r in here if f"{kind}_packets" in r["summary"]]
        at = rtt(here[0]["params"]) * 1e3
        mean = sum(ms) / len(ms) if ms else None
        if at >= 20 and mean is not None and mean < at:
            return f"{kind} took {mean:.3g} ms per operation at RTT {at:g} ms, under one round trip"
        if packets and n and sum(packets) / len(packets) < n:
            return f"{kind} put {sum(packets) / len(packets) / n:.2g} packets per operation on the link"
    return None


def n_of(rows: Sequence[Mapping[str, Any]]) -> str:
    n = rows[0]["params"].get("meta_n") if rows else None
    return f"n = {n}" if n is not None else "n not given"


def amplification(r: Mapping[str, Any]) -> float | None:
    s = r["summary"]
    if "amplification" in s:
        return s["amplification"]
    return s["link_bytes"] / s["bytes"] if s.get("bytes") and "link_bytes" in s else None


def line_share(r: Mapping[str, Any]) -> float | None:
    rate = num(r["params"], "rate", 0.0)
    return r["summary"]["mib_s"] * MIB * 8 / rate if rate > 0 and "mib_s" in r["summary"] else None


def above(sc: Scope, rows_hi: Sequence[Mapping[str, Any]], hi: str, rows_lo: Sequence[Mapping[str, Any]],
           lo: str, cond: str, w: str) -> Comparison:  # fmt: skip
    """Is ``hi``'s MiB/s above ``lo``'s (non-overlapping CIs)? Guest-bound groups stay undecided."""
    a = stat(sc, rows_hi, cond, hi, "MiB/s", metric("mib_s"))
    b = stat(sc, rows_lo, cond, lo, "MiB/s", metric("mib_s"))
    return guarded(lower(b, a, lo, hi, w, " MiB/s"), (rows_hi, hi, w), (rows_lo, lo, w))


def swift_ceiling(sc: Scope, unimpaired: list[Mapping[str, Any]], cond: str, need: float, quantity: str,
                  fn: Any, what: str) -> Comparison | None:  # fmt: skip
    """None when Swift's unimpaired rows (same condition, ideal network) show this client can reach
    ``need`` (their CI above it); else an undecided comparison saying why. An impaired Swift below
    ``need`` refutes the claim only if the client can reach it without the impairment: otherwise it
    measures this lab's client (a TCG guest's rclone), not the WAN."""
    ceiling = stat(sc, unimpaired, f"{cond}, ideal network", "Swift", quantity, fn)
    if ceiling.has_ci and ceiling.ci_low is not None and ceiling.ci_low >= need:
        return None
    if ceiling.mean is None:
        return Comparison("unclear", f"no unimpaired Swift trials at {cond} show that this client can reach "
                                     f"the {fmt_num(need)} {what}")  # fmt: skip
    ci = f"CI {fmt_num(ceiling.ci_low)}–{fmt_num(ceiling.ci_high)}" if ceiling.has_ci else "no CI"
    below = ceiling.has_ci and ceiling.ci_high is not None and ceiling.ci_high < need
    return Comparison(
        "unclear",
        f"Swift's unimpaired ceiling in this lab is {fmt_num(ceiling.mean)} {quantity} ({ci}, ideal network, "
        f"n = {ceiling.n}) at {cond}, {'below' if below else 'not shown above'} the {fmt_num(need)} {what}: "
        "the impaired runs cannot refute the claim here",
    )


def by_row(sc: Scope) -> dict[str, list[Mapping[str, Any]]]:
    out: dict[str, list[Mapping[str, Any]]] = {}
    for r in sc.rows:
        out.setdefault(net_row(r["params"]) or "?", []).append(r)
    order = ("ideal", "+50 ms", "+0.1 % loss", "realistic")
    return {k: out[k] for k in order if k in out}


def missing(rows: Sequence[Mapping[str, Any]], w: str, bench: str) -> list[str]:
    return [
        f"no {LABEL[t]} {bench} trials at {w}" for t in ("nfs", "iscsi", "swift") if not of(rows, target=t)
    ]


# ---- the check type -------------------------------------------------------------------------------


@dataclass(frozen=True)
class StorageCheck(Check):
    """A check over ``storage_bench`` rows: ``keep_if`` (on the cleaned parameters, see ``clean``)
    leaves out trials outside the thesis' conditions before scoping, ``describe`` names them."""

    keep_if: Callable[[Mapping[str, Any]], bool] | None = None
    describe: str = ""

    def inside(self, params: Mapping[str, Any]) -> bool:
        p = clean(params)
        return super().inside(p) and (self.keep_if is None or self.keep_if(p))

    @property
    def conditions(self) -> str:
        return self.describe or super().conditions

    def evaluate(self, rows: Sequence[Mapping[str, Any]]) -> list[Any]:
        return super().evaluate([{"params": clean(r["params"]), "summary": r["summary"]} for r in rows])
