"""Paper 002's findings (§3-§6) as checks over ``thinclient_tcp`` results, on Linux TCP.

Source: ../shared/notes/seed-thinclient-tcp.md §3-§5 (what the paper states, from ns-2) and §7.3-7.5
(what Linux changes: a 200 ms RTO floor, RACK, F-RTO, the CA_Loss state). Every trial is one 300 s
(or shorter) replay of N pairs; the seed is pooled (repetitions), and every other parameter that
varies (buffer ``limit``, ``queue``, ``tcp_sack``, ``delay``, ``rto_min``, ...) is a scope judged on
its own unless a check compares it (``series_by``). Numbers are the per-trial summaries of
``qoelab.thinclient.trial`` (``r_I150``, ``share_<component>_I150``, ``rto_per_conn_300s``, ...).

The paper's claims are per buffer: "large" is 2,500 KB, "small" 25 KB (the BDP). ``limit`` is
stored as given (``"2500000b"``, ``"25kb"``, a packet count), so a check reads it in bytes and
counts a size within 5 % of the paper's as that buffer (``qoelab.thinclient.experiments``). A
difference from the ns-2 numbers is a finding about Linux, not a failure of the lab (notes §7.5).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from qoelab.errors import QoelabError
from qoelab.findings.base import (
    Check,
    Comparison,
    Report,
    Scope,
    Series,
    Stat,
    at_least,
    at_most,
    fmt_num,
    fmt_value,
    lower,
    mean_ci,
    slope_ci,
)
from qoelab.thinclient.experiments import EXPERIMENTS, PAPER_BUFFER_BYTES, paper_buffer

BUFFER_BYTES = PAPER_BUFFER_BYTES
BUFFER_LABEL = {"large": "large buffer (2,500 KB)", "small": "small buffer (25 KB)"}
DEFAULT_MTU = 1500  # a bare limit is packets; a packet counts as a full-size one (the emulator's rule)
COMPONENTS = ("server", "retransmission", "router", "propagation", "client")
# §5.4: separate connections leave "almost entirely propagation delay". The margin covers a full
# packet's serialisation at 10 Mbit/s (1.2 ms), waiting behind one bulk packet being sent under
# priority queueing (another 1.2 ms) and the replay's own timer and wake-up jitter.
PROPAGATION_MARGIN_MS = 10.0
# Fig. 9: a stall "of several seconds". Two seconds is the least that phrase can mean; one second is
# not a stall but Linux's ordinary recovery by timer: an RTO (at least srtt + 200 ms) and one backoff
# take 0.6-1.1 s on these paths, and a 1,045 ms write with lost retransmissions was exactly that.
STALL_MS = 2000.0
E1 = Series("E1: FIFO, no SACK")
E2 = Series("E2: priority queue + SACK")


def buffer_of(params: Mapping[str, Any]) -> str | None:
    """``large`` / ``small`` when the trial's ``limit`` is the paper's 2,500 KB / 25 KB, else None."""
    n = limit_bytes(params)
    return None if n is None else paper_buffer(n)


def limit_bytes(params: Mapping[str, Any]) -> int | None:
    """The router buffer in bytes: ``limit`` is kept as written in ``resolved``, not in SI."""
    from qoelab.emulation.profile import parse_limit

    value = params.get("limit")
    if value is None or isinstance(value, bool):
        return None
    try:
        parsed = parse_limit(value)
    except (QoelabError, ValueError):
        return None
    if parsed["limit_bytes"] is not None:
        return parsed["limit_bytes"]
    pkts = parsed["limit_pkts"]
    return None if pkts is None else pkts * int(params.get("mtu") or DEFAULT_MTU)


@dataclass(frozen=True)
class BufferCheck(Check):
    """A check whose claim the paper makes for one buffer only: trials at other buffers are left
    out before scoping, as ``within`` leaves out trials outside a figure's conditions."""

    buffer: str | None = None
    # Configurations the claim compares, each {param: value}: the check applies only when some trial
    # inside its conditions is each of them (E1 vs E2 says nothing about a sweep of E2 alone).
    needs: tuple[Mapping[str, Any], ...] = ()

    def inside(self, params: Mapping[str, Any]) -> bool:
        return super().inside(params) and (self.buffer is None or buffer_of(params) == self.buffer)

    def applies(self, params: Iterable[Mapping[str, Any]]) -> str | None:
        given = list(params)
        why = super().applies(given)
        if why is not None:
            return why
        inside = [p for p in given if self.inside(p)]
        for config in self.needs:
            if not any(all(p.get(k) == v for k, v in config.items()) for p in inside):
                return "no trial with " + ", ".join(f"{k} {fmt_value(k, v)}" for k, v in config.items())
        return None

    @property
    def conditions(self) -> str:
        base = super().conditions
        if self.buffer is None:
            return base
        return ", ".join(x for x in (BUFFER_LABEL[self.buffer], base) if x)


# ---- helpers --------------------------------------------------------------------------------------


def _sci(v: float | None) -> str:
    """A ratio as the paper prints it: 3.6e-2."""
    if v is None:
        return "–"
    if v == 0:
        return "0"
    mantissa, exp = f"{v:.1e}".split("e")
    return f"{mantissa}e{int(exp)}"


def _where(sc: Scope) -> str:
    """The scope in words, with the buffer named when it is the paper's."""
    buffers = {buffer_of(r["params"]) for r in sc.rows}
    parts = [f"{k} {fmt_value(k, v)}" for k, v in sc.scope.items() if k != "limit"]
    if len(buffers) == 1 and None not in buffers:
        parts.insert(0, BUFFER_LABEL[next(iter(buffers))])
    elif "limit" in sc.scope:
        parts.insert(0, f"limit {sc.scope['limit']}")
    return ", ".join(parts) or "these trials"


def _buffer(sc: Scope) -> str | None:
    buffers = {buffer_of(r["params"]) for r in sc.rows}
    return next(iter(buffers)) if len(buffers) == 1 else None


def _values(rows: Sequence[Mapping[str, Any]], metric: str, scale: float = 1.0) -> list[float]:
    return [r["summary"][metric] / scale for r in rows if metric in r["summary"]]


def _stat(sc: Scope, rows: Sequence[Mapping[str, Any]], condition: str, series: Series, metric: str,
          quantity: str, scale: float = 1.0) -> Stat:  # fmt: skip
    s = mean_ci(_values(rows, metric, scale))
    sc.record(condition, series, quantity, s)
    return s


def _shares(sc: Scope, threshold: int, condition: str) -> tuple[list[Mapping[str, Any]], dict[str, Stat]]:
    """The trials with an interactive tail above ``threshold`` - t0 ms, and each component's share
    of that tail's total delay (mean and CI over those trials); a trial without the tail has no
    share_* values (``decompose.dominant`` returns nothing) and is not one of them."""
    tail = [r for r in sc.rows if f"share_router_I{threshold}" in r["summary"]]
    out = {
        c: _stat(sc, tail, condition, Series(c), f"share_{c}_I{threshold}", "share of the tail's delay")
        for c in COMPONENTS
    }
    return tail, out


def _dominates(sc: Scope, threshold: int, top: str) -> tuple[list[Comparison], list[str]]:
    """Is ``top`` the largest component of the tail? Per other component, the paired per-trial
    difference (the shares of one trial sum to 1, so they are not independent samples) must have its
    whole 95 % CI above 0; a CI wholly below 0 is a counter-example."""
    # t0 (the request's one-way time) is one per sweep in practice; the text names the lowest threshold.
    t0_ms = max(float(r["params"].get("t0", 0.02)) * 1e3 for r in sc.rows)
    above = f"{fmt_num(threshold - t0_ms)} ms"
    tail, shares = _shares(sc, threshold, f"interactive writes above {above}")
    where_ = _where(sc)
    if not tail:
        return [], [f"no interactive write exceeded {above} in {len(sc.rows)} trials at {where_}"]
    largest = max(COMPONENTS, key=lambda c: shares[c].mean or 0.0)
    shown = ", ".join(f"{c} {fmt_num(shares[c].mean)}" for c in COMPONENTS)
    comps = []
    for other in COMPONENTS:
        if other == top:
            continue
        diff = mean_ci(
            r["summary"].get(f"share_{top}_I{threshold}", 0.0)
            - r["summary"].get(f"share_{other}_I{threshold}", 0.0)
            for r in tail
        )
        c = at_least(diff, 0.0, f"{top} share − {other} share", where_)
        comps.append(Comparison(c.outcome, f"{c.text}; mean shares {shown}; largest: {largest}"))
    return comps, []


# ---- 1, 2: what the tail is made of (§3.2, Fig. 6a) ------------------------------------------------


def _router_dominates_150(sc: Scope) -> tuple[list[Comparison], list[str]]:
    return _dominates(sc, 150, "router")


def _server_dominates_1000(sc: Scope) -> tuple[list[Comparison], list[str]]:
    return _dominates(sc, 1000, "server")


# ---- 3: priority queueing + SACK lower r_I150 (§4.2) -----------------------------------------------


def _is(row: Mapping[str, Any], queue: str, sack: bool) -> bool:
    return row["params"].get("queue") == queue and bool(row["params"].get("tcp_sack")) is sack


def _prio_sack_lower(sc: Scope) -> tuple[list[Comparison], list[str]]:
    e1 = [r for r in sc.rows if _is(r, "fifo", False)]
    e2 = [r for r in sc.rows if _is(r, "prio", True)]
    gaps = (["no trials with queue fifo and tcp_sack false (E1)"] if not e1 else []) + (
        ["no trials with queue prio and tcp_sack true (E2)"] if not e2 else []
    )
    if gaps:
        return [], gaps
    where_ = _where(sc)
    quantity = "r_I150 (×10⁻³)"
    a = _stat(sc, e2, where_, E2, "r_I150", quantity, 1e-3)
    b = _stat(sc, e1, where_, E1, "r_I150", quantity, 1e-3)
    c = lower(a, b, "prio + SACK", "FIFO without SACK", where_, " ×10⁻³")
    buffer = _buffer(sc)
    paper_a = EXPERIMENTS["e2"].paper.get(buffer or "", {}).get("r_I150")
    paper_b = EXPERIMENTS["e1"].paper.get(buffer or "", {}).get("r_I150")
    if paper_a is not None and paper_b is not None:
        paper = f"the paper: {_sci(paper_a)} vs {_sci(paper_b)}"
    else:
        paper = "the paper gives numbers for 2,500 KB and 25 KB only"
    return [Comparison(c.outcome, f"{c.text} ({paper})")], []


# ---- 4: Problem A, RTOs without loss (§4.3, Fig. 8) ------------------------------------------------


def _rto_without_loss(sc: Scope) -> tuple[list[Comparison], list[str]]:
    """An existence claim: an RTO in a trial whose router dropped nothing cannot be loss recovery.
    Trials with drops say nothing either way and are left out."""
    where_ = _where(sc)
    known = [r for r in sc.rows if "router_drops" in r["summary"] and "rto_per_conn_300s" in r["summary"]]
    clean = [r for r in known if r["summary"]["router_drops"] == 0]
    rto = _stat(
        sc,
        clean,
        "trials without a router drop",
        Series("drop-free"),
        "rto_per_conn_300s",
        "RTOs per connection per 300 s",
    )
    _stat(
        sc,
        clean,
        "trials without a router drop",
        Series("drop-free"),
        "spurious_rto_per_conn_300s",
        "spurious RTOs (F-RTO) per connection per 300 s",
    )
    if not known:
        return [], [f"no trial reports router_drops and rto_per_conn_300s at {where_}"]
    dropped = len(known) - len(clean)
    if not clean:
        drops = [r["summary"]["router_drops"] for r in known]
        span = f"{fmt_num(min(drops))}-{fmt_num(max(drops))}"
        why = f"every one of {len(known)} trials at {where_} dropped packets at the router ({span} drops)"
        return [], [f"{why}, so their RTOs may be loss recovery"]
    with_rto = sum(1 for r in clean if r["summary"]["rto_per_conn_300s"] > 0)
    left = f"; {dropped} trials with router drops left out" if dropped else ""
    ci = f" (CI {fmt_num(rto.ci_low)}–{fmt_num(rto.ci_high)})" if rto.has_ci else ""
    numbers = f"rto_per_conn_300s {fmt_num(rto.mean)}{ci} over {len(clean)} trials without a router drop"
    paper = "the paper: 3.1 per connection per 300 s with no packet dropped"
    if with_rto:
        text = f"RTOs in {with_rto} of {len(clean)} drop-free trials at {where_}: {numbers}{left} ({paper})"
        return [Comparison("supports", text)], []
    text = f"no RTO in {len(clean)} drop-free trials at {where_}: {numbers}{left} ({paper})"
    return [Comparison("contradicts", text)], []


# ---- 5: separate connections leave propagation only (§5.4, Fig. 13) --------------------------------


def _propagation_ms(params: Mapping[str, Any]) -> float:
    """WAN delay plus both LAN legs, one way (the job type's defaults when a trial lacks them)."""
    return (float(params.get("delay", 0.02)) + 2 * float(params.get("lan_delay", 0.001))) * 1e3


def _separate_propagation(sc: Scope) -> tuple[list[Comparison], list[str]]:
    rows = [r for r in sc.rows if "p99_I_ms" in r["summary"]]
    where_ = _where(sc)
    if not rows:
        return [], [f"no interactive delay (p99_I_ms) at {where_}"]
    series = Series("interactive, separate connection")
    excess = mean_ci(r["summary"]["p99_I_ms"] - _propagation_ms(r["params"]) for r in rows)
    sc.record(where_, series, "p99 one-way delay − propagation (ms)", excess)
    p99 = _stat(sc, rows, where_, series, "p99_I_ms", "p99 one-way delay (ms)")
    props = sorted({round(_propagation_ms(r["params"]), 3) for r in rows})
    prop = "/".join(fmt_num(p) for p in props)
    threshold = min(150.0 - float(r["params"].get("t0", 0.02)) * 1e3 for r in rows)
    near = at_most(excess, PROPAGATION_MARGIN_MS, "p99 − propagation (ms)", where_)
    below = at_most(p99, threshold, "p99 (ms)", where_)
    near_text = (
        f"{near.text}; propagation {prop} ms, bound {fmt_num(PROPAGATION_MARGIN_MS)} ms above it "
        "(the paper: almost entirely propagation delay)"
    )
    below_text = f"{below.text}; bound {fmt_num(threshold)} ms (the paper: much lower than 130 ms)"
    return [Comparison(near.outcome, near_text), Comparison(below.outcome, below_text)], []


# ---- 6: Fig. 9's multi-second stall after bursty drops (§4.4) -------------------------------------


def _bursty_drop_stall(sc: Scope) -> tuple[list[Comparison], list[str]]:
    """Expected not to hold on Linux (notes §7.3: RACK detects lost retransmissions, CA_Loss does not
    re-enter SACK recovery). A trial stalls when an interactive write or the bulk p99 took more than
    a second while a retransmission was lost too; the ns-2 stall needs bursty drops to start from."""
    where_ = _where(sc)
    rows = [r for r in sc.rows if "max_I_ms" in r["summary"] or "p99_B_ms" in r["summary"]]
    if not rows:
        return [], [f"no delays (max_I_ms, p99_B_ms) at {where_}"]
    for metric, quantity in (
        ("max_I_ms", "largest interactive delay (ms)"),
        ("p99_B_ms", "bulk p99 (ms)"),
        ("TcpExtTCPLostRetransmit", "lost retransmissions"),
        ("router_drops", "router drops"),
        ("rto_per_conn_300s", "RTOs per conn per 300 s"),
    ):
        _stat(sc, rows, where_, Series("per trial"), metric, quantity)
    drops = [r["summary"].get("router_drops", 0.0) for r in rows]
    if any("router_drops" in r["summary"] for r in rows) and not any(drops):
        return [], [
            f"no packet was dropped at the router in {len(rows)} trials at {where_}, so there was "
            "no bursty drop to recover from"
        ]

    def stalled(r: Mapping[str, Any]) -> bool:
        s = r["summary"]
        slow = max(s.get("max_I_ms", 0.0), s.get("p99_B_ms", 0.0)) > STALL_MS
        return slow and s.get("TcpExtTCPLostRetransmit", 0.0) > 0

    hit = [r for r in rows if stalled(r)]

    def top(metric: str) -> str:
        vals = _values(rows, metric)
        return fmt_num(max(vals)) if vals else "–"

    lost = sum(_values(rows, "TcpExtTCPLostRetransmit"))
    counters = (
        f"largest max_I_ms {top('max_I_ms')} ms, largest p99_B_ms {top('p99_B_ms')} ms, "
        f"TcpExtTCPLostRetransmit {fmt_num(lost)} in all, router drops {fmt_num(sum(drops))}, "
        f"TcpExtTCPSackRecovery {fmt_num(sum(_values(rows, 'TcpExtTCPSackRecovery')))}"
    )
    paper = "the paper (ns-2 FullTCP SACK): stalls of several seconds after hundreds of drops"
    if hit:
        text = (
            f"{len(hit)} of {len(rows)} trials at {where_} had a delay above {fmt_num(STALL_MS)} ms with "
            f"lost retransmissions: {counters} ({paper})"
        )
        return [Comparison("supports", text)], []
    text = (
        f"no trial of {len(rows)} at {where_} had a delay above {fmt_num(STALL_MS)} ms together with a "
        f"lost retransmission: {counters} ({paper}; Linux recovers with RACK and CA_Loss)"
    )
    return [Comparison("contradicts", text)], []


# ---- 7: Fig. 14, T_I150 against WAN delay at the small buffer (§6) --------------------------------


def _t_interval_vs_delay(sc: Scope) -> tuple[list[Comparison], list[str]]:
    """Least-squares slope of the per-trial T_I150 over the WAN delay (s per ms), with its Student-t
    CI. A trial with r_I150 = 0 has no T (the interval is longer than the run) and is left out."""
    where_ = _where(sc)
    with_t = [r for r in sc.rows if "T_I150_s" in r["summary"] and r["params"].get("delay") is not None]
    without = len(sc.rows) - len(with_t)
    series = Series("T_I150")
    delays = sorted({float(r["params"]["delay"]) for r in with_t})
    for d in delays:
        here = [r for r in with_t if math.isclose(float(r["params"]["delay"]), d)]
        _stat(sc, here, f"delay {fmt_value('delay', d)}", series, "T_I150_s", "T_I150 (s)")
    if not with_t:
        if any("r_I150" in r["summary"] for r in sc.rows):
            return [], [f"r_I150 = 0 in all {len(sc.rows)} trials at {where_}: no interval to compare"]
        return [], [f"no T_I150_s in {len(sc.rows)} trials at {where_}"]
    if len(delays) < 3:
        return [], [f"T_I150 at {len(delays)} delays only at {where_} (r_I150 > 0 needed): a slope needs 3"]
    s = slope_ci(
        [float(r["params"]["delay"]) * 1e3 for r in with_t], [r["summary"]["T_I150_s"] for r in with_t]
    )
    sc.record(where_, series, "slope of T_I150 over delay (s per ms)", s)
    left = f"; {without} trials with r_I150 = 0 left out" if without else ""
    shown = (
        f"slope {fmt_num(s.mean)} s per ms (CI {fmt_num(s.ci_low)} to {fmt_num(s.ci_high)}) over "
        f"{s.n} trials at {len(delays)} delays, {where_}{left} (the paper: intervals shrink as the "
        "delay grows, 67 s on average with its proposal)"
    )
    if not s.has_ci:
        return [Comparison("unclear", f"no confidence interval: {shown}")], []
    assert s.ci_low is not None and s.ci_high is not None
    if s.ci_high < 0:
        return [Comparison("supports", f"T_I150 shrinks with delay: {shown}")], []
    if s.ci_low > 0:
        return [Comparison("contradicts", f"T_I150 grows with delay: {shown}")], []
    return [Comparison("unclear", f"the 95 % CI of the slope includes 0: {shown}")], []


SHARED = {"connections": ("shared",)}
CHECKS: tuple[Check, ...] = (
    BufferCheck(
        name="router_dominates_150",
        title="Router queueing makes most of the >130 ms interactive tail (large buffer, FIFO)",
        claim="With no modification and the 2,500 KB buffer, the end-to-end delay of interactive writes "
        "above 130 ms (150 - t0) is mainly router queueing delay (r_I150 = 3.6e-2); checked as the "
        "router's share of the tail's total delay above every other component's.",
        figure="§3.2, Fig. 6a",
        x=None,
        protocols=(),
        run=_router_dominates_150,
        among={"queue": ("fifo",), **SHARED},
        buffer="large",
    ),
    BufferCheck(
        name="server_dominates_1000",
        title="Server buffering makes most of the >980 ms interactive tail (large buffer)",
        claim="Around 980 ms (1000 - t0) server buffering delay is predominant (r_I1000 = 1.7e-3 with no "
        "modification, 5.5e-4 with priority queueing + SACK); checked as the server's share of the tail's "
        "total delay above every other component's.",
        figure="§3.2, §4.2, Figs. 6a, 7a",
        x=None,
        protocols=(),
        run=_server_dominates_1000,
        among=SHARED,
        buffer="large",
    ),
    BufferCheck(
        name="prio_sack_lower_r150",
        title="Priority queueing + SACK lower r_I150 (per buffer)",
        claim="Two priority classes at the router and SACK at the server lower r_I150 from 3.6e-2 to "
        "6.1e-3 (2,500 KB) and from 1.2e-2 to 6.4e-3 (25 KB).",
        figure="§4.2, Fig. 7",
        x=None,
        protocols=(),
        run=_prio_sack_lower,
        series_by=("queue", "tcp_sack", "experiment"),
        among=SHARED,
        needs=({"queue": "fifo", "tcp_sack": False}, {"queue": "prio", "tcp_sack": True}),
    ),
    BufferCheck(
        name="rto_without_loss",
        title="RTOs fire without any packet dropped (priority queueing, large buffer)",
        claim="Problem A: with priority queueing (+ SACK) at 2,500 KB the retransmission timer expires "
        "although no packet was dropped, 3.1 times per connection per 300 s: srtt does not follow the "
        "queue up and the RTO collapses when the sender switches to interactive data.",
        figure="§4.3, Fig. 8",
        x=None,
        protocols=(),
        run=_rto_without_loss,
        among={"queue": ("prio",), **SHARED},
        buffer="large",
    ),
    BufferCheck(
        name="separate_propagation",
        title="Separate connections leave interactive data with propagation delay only",
        claim="With interactive and bulk data on separate TCP connections (Case 2) the interactive "
        "end-to-end delay is almost entirely propagation delay, much lower than 130 ms, at both buffers; "
        f"checked as p99 at most {PROPAGATION_MARGIN_MS:g} ms above the one-way propagation (WAN delay + "
        "2 LAN legs) and below 150 - t0 ms.",
        figure="§5.4, Fig. 13",
        x=None,
        protocols=(),
        run=_separate_propagation,
        among={"connections": ("separate",), "queue": ("prio",)},
    ),
    BufferCheck(
        name="bursty_drop_stall",
        title="SACK recovery stalls for seconds after bursty drops (small buffer) - expected not on Linux",
        claim="With SACK at 25 KB, bursty drops of hundreds of packets lose retransmissions too, and only "
        "RTOs recover them: stalls of several seconds (ns-2 FullTCP). Checked as a trial with an "
        f"interactive delay or a bulk p99 above {STALL_MS:g} ms and TcpExtTCPLostRetransmit > 0; Linux's "
        "RACK and CA_Loss are expected to avoid it (notes §7.3).",
        figure="§4.4, Fig. 9",
        x=None,
        protocols=(),
        run=_bursty_drop_stall,
        among={"tcp_sack": (True,), **SHARED},
        buffer="small",
    ),
    BufferCheck(
        name="t_interval_vs_delay",
        title="T_I150 shrinks as the WAN delay grows (small buffer)",
        claim="Over WAN delays of 7-70 ms at 25 KB the mean interval between interactive delays above "
        "130 ms (T_I150, Eq. 4) shrinks as the delay grows (67 s on average with the paper's proposal); "
        "checked as the least-squares slope of T_I150 over delay with its 95 % CI below 0.",
        figure="§6, Fig. 14",
        x="delay",
        protocols=(),
        run=_t_interval_vs_delay,
        among=SHARED,
        buffer="small",
    ),
)

# The paper's own number or statement per check (the findings table's "paper" column).
PAPER_VALUES: dict[str, str] = {
    "router_dominates_150": "r_I150 = 3.6e-2 at 2,500 KB, mainly router queueing",
    "server_dominates_1000": "r_I1000 = 1.7e-3 (5.5e-4 with priority + SACK), mainly server buffering",
    "prio_sack_lower_r150": "r_I150 3.6e-2 → 6.1e-3 (2,500 KB), 1.2e-2 → 6.4e-3 (25 KB)",
    "rto_without_loss": "3.1 RTOs per connection per 300 s without a drop (priority + SACK, 2,500 KB)",
    "separate_propagation": "interactive delay almost entirely propagation, well below 130 ms (Case 2)",
    "bursty_drop_stall": "SACK recovery stalls of several seconds after bursty drops (ns-2, Fig. 9)",
    "t_interval_vs_delay": "T_I150 shrinks as the delay grows over 7-70 ms (Fig. 14)",
}

REPORT = Report(
    "tc002",
    "Paper 002 (§3-§6): thin-client traffic over a shared bottleneck, on Linux TCP",
    CHECKS,
    PAPER_VALUES,
)
