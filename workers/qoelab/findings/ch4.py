"""The findings of the thesis' chapter 4 (§4.6, Figs. 4.6-4.8) as checks over ``rd_qoe`` results.

Source: ../shared/notes/seed-rd-qoe.md, "Sweeps (§4.6)". Every comparison is made on the per-trial
summary values (``T_ms``, ``bytes_down``, ``rate_bps``: each a trial's mean over its updates) with
mean and 95 % Student-t CI over the repetitions; two points differ only when their intervals do not
overlap. The thresholds and why they were chosen are in docs/findings.md.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from qoelab.findings.base import (
    Check,
    Comparison,
    Report,
    Scope,
    Series,
    as_number,
    at_least,
    at_most,
    fmt_num,
    fmt_value,
    lower,
    slope_ci,
    values_of,
    where,
)

# "A few Mbit/s or less" (finding 1, 3): the thesis' Fig. 4.3 puts SPICE's QoE knee at ≈3 Mbit/s of
# TCP throughput, and below it the link, not the protocol, sets T.
LOW_RATE_BPS = 3e6
# "Above 10 Mbit/s" (finding 1): strictly above, SPICE 0.10.1 switches behaviour at 10 Mbit/s.
HIGH_RATE_BPS = 10e6
# Finding 3: a link-bound update moves its bytes at close to the link's TCP goodput. 0.7 leaves 30 %
# of T for the per-update overhead the link does not explain (the request's round trip, slow start).
MIN_UTILISATION = 0.7
# Finding 5 (Fig. 4.7a): the crossing between X2Go and SPICE at 1 Mbit/s.
PANEL_47A_BPS = 1e6
CROSS_DELAY_S = 0.050
# Finding 6 (Fig. 4.8): SPICE best below 3 % loss, X2Go best above 5 % (3-5 % is not claimed).
LOW_LOSS_PCT = 3.0
HIGH_LOSS_PCT = 5.0
EPS = 1e-9
# The thesis' conditions of Figs. 4.6 (delay 10 ms) and 4.7 (no loss), with room for a testbed's
# own small base delay; trials outside are left out of those checks.
FIG46 = {"delay": (0.0, 0.020), "loss": (0.0, 0.1)}
FIG47 = {"loss": (0.0, 0.1)}
# Fig. 4.8 is at 100 ms one way (notes, "Sweeps"), with the same 20 ms of room: without it a scope of
# another figure's trials (one loss value, 10 ms) would be judged on Fig. 4.8's claims (issue 32).
FIG48 = {"delay": (0.080, 0.120)}
# §4.6.2: "a transfer data size is almost constant regardless of a delay and loss rate": each
# condition's X within 0.8-1.25 x the series' X at its smallest delay (or loss), both ways 20 %.
ALMOST_CONSTANT = (0.8, 1.25)
# The thesis' SPICE 0.10.1 switched behaviour at a 10 Mbit/s bandwidth estimate, a jump in X near
# 10 Mbit/s: X just below and just above (within a factor 2 of 10 Mbit/s) differ by more than 20 %.
JUMP_RATES = (5e6, 20e6)
JUMP_SHARE = 0.2
# §4.7: LTE is "around 10 Mbit/s, around 50 ms, less than 1 % loss".
LTE = {"rate": (8e6, 12.5e6), "delay": (0.040, 0.060), "loss": (0.0, 1.0)}
IMAGE_TRANSFER = ("vnc", "spice")

T = ("T_ms", "T (ms)", 1.0, " ms")
X = ("bytes_down", "X (kB)", 1e3, " kB")
XT = ("rate_bps", "X/T (Mbit/s)", 1e6, " Mbit/s")


def _best(sc: Scope, protocol: str, metric: tuple[str, str, float, str], **conds: Any) -> list[Comparison]:
    """Every series of ``protocol`` below every other series at ``conds`` (lower is better)."""
    name, quantity, scale, unit = metric
    out = []
    for mine in sc.series(protocol):
        a = sc.stat(mine, name, quantity, scale, **conds)
        for other in sc.series():
            if other.protocol == protocol:
                continue
            b = sc.stat(other, name, quantity, scale, **conds)
            out.append(lower(a, b, mine.label, other.label, where(**conds), unit))
    return out


def _points(sc: Scope, param: str, keep: Any) -> list[Any]:
    return [v for v in values_of(sc.rows, param) if keep(as_number(v))]


# ---- 1: best T by rate ---------------------------------------------------------------------------


def _x2go_best_low_rate(sc: Scope) -> tuple[list[Comparison], list[str]]:
    rates = _points(sc, "rate", lambda r: r <= LOW_RATE_BPS + EPS)
    comps = [c for r in rates for c in _best(sc, "x2go", T, rate=r)]
    return comps, [] if rates else [f"no rate at or below {fmt_value('rate', LOW_RATE_BPS)}"]


def _spice_best_high_rate(sc: Scope) -> tuple[list[Comparison], list[str]]:
    rates = _points(sc, "rate", lambda r: r > HIGH_RATE_BPS + EPS)
    comps = [c for r in rates for c in _best(sc, "spice", T, rate=r)]
    return comps, [] if rates else [f"no rate above {fmt_value('rate', HIGH_RATE_BPS)}"]


# ---- 2: X2Go's X and X/T smallest ------------------------------------------------------------------


def _x2go_smallest_x(sc: Scope) -> tuple[list[Comparison], list[str]]:
    rates = values_of(sc.rows, "rate")
    return [c for r in rates for metric in (X, XT) for c in _best(sc, "x2go", metric, rate=r)], []


# ---- 3: T proportional to X below a few Mbit/s -----------------------------------------------------


def utilisation(row: Mapping[str, Any]) -> float | None:
    """X/T of the trial over the link's capacity: its measured TCP goodput when the trial verified the
    link (``link_tcp_down_bps``), else the configured rate."""
    xt = row["summary"].get("rate_bps")
    capacity = row["summary"].get("link_tcp_down_bps") or row["params"].get("rate")
    if xt is None or not capacity:
        return None
    return xt / float(capacity)


def _t_proportional_to_x(sc: Scope) -> tuple[list[Comparison], list[str]]:
    rates = _points(sc, "rate", lambda r: r <= LOW_RATE_BPS + EPS)
    comps = []
    for r in rates:
        for s in sc.series():
            u = sc.derived(s, utilisation, "X/T ÷ link goodput", rate=r)
            comps.append(at_least(u, MIN_UTILISATION, f"{s.label}'s X/T ÷ link goodput", where(rate=r)))
    return comps, [] if rates else [f"no rate at or below {fmt_value('rate', LOW_RATE_BPS)}"]


# ---- 4: X2Go's T grows most with delay ------------------------------------------------------------


def _slope(sc: Scope, s: Series, rate: Any) -> Any:
    rows = sc.select(s, rate=rate)
    pts = [(r["params"]["delay"] * 1e3, r["summary"]["T_ms"]) for r in rows if "T_ms" in r["summary"]]
    st = slope_ci([x for x, _ in pts], [y for _, y in pts])
    sc.record(where(rate=rate), s, "slope of T vs one-way delay (ms/ms)", st)
    return st


def _x2go_grows_most_with_delay(sc: Scope) -> tuple[list[Comparison], list[str]]:
    comps = []
    for rate in values_of(sc.rows, "rate"):
        if len({r["params"].get("delay") for r in sc.rows if r["params"].get("rate") == rate}) < 2:
            continue  # one delay at this rate (e.g. a Fig. 4.6 point pooled in): no slope to compare
        for mine in sc.series("x2go"):
            a = _slope(sc, mine, rate)
            for other in sc.series():
                if other.protocol != "x2go":
                    b = _slope(sc, other, rate)
                    comps.append(
                        lower(b, a, f"{other.label}'s slope", f"{mine.label}'s slope", where(rate=rate))
                    )
    return comps, []


# ---- 5: X2Go vs SPICE at 1 Mbit/s over delay -------------------------------------------------------


def _x2go_better_short_delay(sc: Scope) -> tuple[list[Comparison], list[str]]:
    panel = [r for r in values_of(sc.rows, "rate") if r is not None and abs(r - PANEL_47A_BPS) < 1]
    if not panel:
        return [], [f"no trials at rate {fmt_value('rate', PANEL_47A_BPS)}"]
    rate = panel[0]
    delays = values_of(sc.select_any(rate=rate), "delay")
    short = [d for d in delays if d <= CROSS_DELAY_S + EPS]
    long_ = [d for d in delays if d > CROSS_DELAY_S + EPS]
    comps = []
    for xs in sc.series("x2go"):
        for sp in sc.series("spice"):
            for d in delays:
                cond = {"rate": rate, "delay": d}
                a = sc.stat(xs, *T[:3], **cond)
                b = sc.stat(sp, *T[:3], **cond)
                first, second = (a, b) if d in short else (b, a)
                names = (xs.label, sp.label) if d in short else (sp.label, xs.label)
                comps.append(lower(first, second, *names, where(**cond), T[3]))
    gaps = []
    limit = fmt_value("delay", CROSS_DELAY_S)
    if not short:
        gaps.append(f"no delay at or below {limit} at {where(rate=rate)}")
    if not long_:
        gaps.append(f"no delay above {limit} at {where(rate=rate)}")
    return comps, gaps


# ---- 6: SPICE best at low loss, X2Go at high loss --------------------------------------------------


def _best_by_loss(sc: Scope) -> tuple[list[Comparison], list[str]]:
    comps, gaps = [], []
    for rate in values_of(sc.rows, "rate"):
        losses = values_of(sc.select_any(rate=rate), "loss")
        low = [v for v in losses if v < LOW_LOSS_PCT - EPS]
        high = [v for v in losses if v > HIGH_LOSS_PCT + EPS]
        comps += [c for v in low for c in _best(sc, "spice", T, rate=rate, loss=v)]
        comps += [c for v in high for c in _best(sc, "x2go", T, rate=rate, loss=v)]
        if not low:
            gaps.append(f"no loss below {LOW_LOSS_PCT:g} % at {where(rate=rate)}")
        if not high:
            gaps.append(f"no loss above {HIGH_LOSS_PCT:g} % at {where(rate=rate)}")
    return comps, gaps


# ---- 7: SPICE best in the other cases of Fig. 4.7 ---------------------------------------------------


def _spice_best_other_cases(sc: Scope) -> tuple[list[Comparison], list[str]]:
    """Fig. 4.7: SPICE lowest T everywhere except at 1 Mbit/s with delay ≤ 50 ms (X2Go's case)."""
    comps = []
    for rate in values_of(sc.rows, "rate"):
        for d in values_of(sc.select_any(rate=rate), "delay"):
            x2go_case = rate is not None and abs(rate - PANEL_47A_BPS) < 1 and d <= CROSS_DELAY_S + EPS
            if not x2go_case:
                comps += _best(sc, "spice", T, rate=rate, delay=d)
    return comps, [] if comps else ["no condition outside X2Go's case (1 Mbit/s, delay ≤ 50 ms)"]


# ---- 8: T rises with delay for every protocol -------------------------------------------------------


def _t_rises_with_delay(sc: Scope) -> tuple[list[Comparison], list[str]]:
    comps = []
    for rate in values_of(sc.rows, "rate"):
        if len(values_of(sc.select_any(rate=rate), "delay")) < 2:
            continue
        for s in sc.series():
            slope = _slope(sc, s, rate)
            comps.append(at_least(slope, 0.0, f"{s.label}'s slope of T over delay", where(rate=rate)))
    return comps, [] if comps else ["no rate with two delays or more"]


# ---- 9: X almost constant with delay and with loss ----------------------------------------------------


def _x_constant(param: str) -> Any:
    def run(sc: Scope) -> tuple[list[Comparison], list[str]]:
        comps = []
        lo_f, hi_f = ALMOST_CONSTANT
        for rate in values_of(sc.rows, "rate"):
            for s in sc.series():
                xs = sorted(values_of(sc.select(s, rate=rate), param), key=as_number)
                if len(xs) < 2:
                    continue
                base = sc.stat(s, *X[:3], rate=rate, **{param: xs[0]})
                if base.mean is None:
                    continue
                at0 = f"{s.label}'s X at {where(**{param: xs[0]})} ({fmt_num(base.mean)} kB)"
                for v in xs[1:]:
                    got = sc.stat(s, *X[:3], rate=rate, **{param: v})
                    w = where(rate=rate, **{param: v})
                    name = f"{s.label}'s X (kB) over {at0}"
                    comps += [
                        at_least(got, lo_f * base.mean, name, w),
                        at_most(got, hi_f * base.mean, name, w),
                    ]
        return comps, [] if comps else [f"no series with two {param} values or more"]

    return run


# ---- 10: SPICE's jump near 10 Mbit/s ---------------------------------------------------------------


def _spice_jump_near_10(sc: Scope) -> tuple[list[Comparison], list[str]]:
    rates = sorted(
        r for r in values_of(sc.rows, "rate") if r is not None and JUMP_RATES[0] <= r <= JUMP_RATES[1]
    )
    below = [r for r in rates if r < HIGH_RATE_BPS - EPS]
    above = [r for r in rates if r >= HIGH_RATE_BPS - EPS]
    if not below or not above:
        return [], [f"needs rates on both sides of 10 Mbit/s within {fmt_value('rate', JUMP_RATES[0])}-"
                    f"{fmt_value('rate', JUMP_RATES[1])}"]  # fmt: skip
    comps = []
    for s in sc.series("spice"):
        a = sc.stat(s, *X[:3], rate=below[-1])
        b = sc.stat(s, *X[:3], rate=above[0])
        if a.mean is None:
            continue
        name, w = f"{s.label}'s X (kB)", f"{where(rate=above[0])} against {where(rate=below[-1])}"
        lo, hi = (1 - JUMP_SHARE) * a.mean, (1 + JUMP_SHARE) * a.mean
        up, down = at_least(b, hi, name, w), at_most(b, lo, name, w)
        inside_lo, inside_hi = at_least(b, lo, name, w), at_most(b, hi, name, w)
        if "supports" in (up.outcome, down.outcome):
            comps.append(up if up.outcome == "supports" else down)
        elif inside_lo.outcome == inside_hi.outcome == "supports":
            comps.append(Comparison("contradicts", f"no jump: {inside_hi.text} (within ±{JUMP_SHARE:.0%})"))
        else:
            comps.append(Comparison("unclear", f"the interval straddles ±{JUMP_SHARE:.0%}: {inside_hi.text}"))
    return comps, []


# ---- 11: image transfer better under LTE-like conditions -----------------------------------------------


def _image_transfer_lte(sc: Scope) -> tuple[list[Comparison], list[str]]:
    comps = []
    conds = {(r["params"].get("rate"), r["params"].get("delay"), r["params"].get("loss")) for r in sc.rows}
    for rate, delay, loss in sorted(conds, key=lambda c: tuple(as_number(v) for v in c)):
        at = {"rate": rate, "delay": delay, "loss": loss}
        for xs in sc.series("x2go"):
            b = sc.stat(xs, *T[:3], **at)
            for img in (s for s in sc.series() if s.protocol in IMAGE_TRANSFER):
                a = sc.stat(img, *T[:3], **at)
                comps.append(lower(a, b, img.label, xs.label, where(**at), T[3]))
    return comps, []


def _x_constant_check(param: str, figure: str, within: dict[str, tuple[float, float]]) -> Check:
    """``x_constant_with_delay`` / ``_with_loss``: one claim of §4.6.2, over each swept parameter."""
    lo, hi = ALMOST_CONSTANT
    what = "a delay" if param == "delay" else "a ... loss rate"
    return Check(
        name=f"x_constant_with_{param}",
        title=f"X is almost constant with {param}",
        claim=f'"A transfer data size is almost constant regardless of {what}": every series\' X at each '
        f"{param} within {lo:g}-{hi:g} × its X at the smallest {param}.",
        figure=figure,
        x=param,
        facet="rate",
        protocols=(),
        within=within,
        run=_x_constant(param),
    )


CHECKS: tuple[Check, ...] = (
    Check(
        name="x2go_best_t_low_rate",
        title="X2Go has the lowest T at a few Mbit/s or less",
        claim="At a few Mbit/s or less X2Go has the best (lowest) response time T "
        f"(checked at every rate ≤ {fmt_value('rate', LOW_RATE_BPS)}).",
        figure="Fig. 4.6 (a)",
        x="rate",
        protocols=("x2go", "spice"),
        within=FIG46,
        run=_x2go_best_low_rate,
    ),
    Check(
        name="spice_best_t_high_rate",
        title="SPICE has the lowest T above 10 Mbit/s",
        claim="Above 10 Mbit/s SPICE has the best (lowest) response time T "
        f"(checked at every rate > {fmt_value('rate', HIGH_RATE_BPS)}).",
        figure="Fig. 4.6 (a)",
        x="rate",
        protocols=("x2go", "spice"),
        within=FIG46,
        run=_spice_best_high_rate,
    ),
    Check(
        name="x2go_smallest_x_and_rate",
        title="X2Go's X and X/T are always the smallest",
        claim="At every bandwidth X2Go transfers the fewest bytes per update (X) at the lowest rate (X/T).",
        figure="Fig. 4.6 (b), (c)",
        x="rate",
        protocols=("x2go",),
        min_protocols=2,
        within=FIG46,
        run=_x2go_smallest_x,
    ),
    Check(
        name="t_proportional_to_x_low_rate",
        title="Below a few Mbit/s T is proportional to X (the link is the bottleneck)",
        claim="Below a few Mbit/s the response time is proportional to the transfer size: every protocol "
        f"moves its update at close to the link's rate (X/T ≥ {MIN_UTILISATION:g} × the measured TCP "
        f"goodput at every rate ≤ {fmt_value('rate', LOW_RATE_BPS)}).",
        figure="Fig. 4.6 (a)-(c)",
        x="rate",
        protocols=(),
        within=FIG46,
        run=_t_proportional_to_x,
    ),
    Check(
        name="x2go_t_grows_most_with_delay",
        title="X2Go's T grows most with delay",
        claim="X2Go's response time grows most with the one-way delay (synchronous event round trips): "
        "its slope of T over delay is the steepest in every rate panel.",
        figure="Fig. 4.7 (a), (b)",
        x="delay",
        facet="rate",
        protocols=("x2go",),
        min_protocols=2,
        within=FIG47,
        run=_x2go_grows_most_with_delay,
    ),
    Check(
        name="x2go_better_short_delay_1mbit",
        title="At 1 Mbit/s X2Go is better up to 50 ms delay, SPICE beyond",
        claim="At 1 Mbit/s X2Go has a lower T than SPICE with one-way delay ≤ 50 ms, SPICE a lower T "
        "than X2Go above 50 ms.",
        figure="Fig. 4.7 (a)",
        x="delay",
        facet="rate",
        protocols=("x2go", "spice"),
        within=FIG47,
        run=_x2go_better_short_delay,
    ),
    Check(
        name="best_t_by_loss",
        title="SPICE is best below 3 % loss, X2Go above 5 %",
        claim="SPICE has the lowest T at loss < 3 %, X2Go the lowest at loss > 5 % "
        "(thesis: 1 and 10 Mbit/s, 100 ms delay; every rate panel is checked).",
        figure="Fig. 4.8 (a), (b)",
        x="loss",
        facet="rate",
        protocols=("x2go", "spice"),
        within=FIG48,
        run=_best_by_loss,
    ),
    Check(
        name="spice_best_other_delay_cases",
        title="SPICE has the lowest T in the other cases of Fig. 4.7",
        claim='Over delays of 10-200 ms, X2Go is best only at 1 Mbit/s with delay ≤ 50 ms; "in other '
        "cases, SPICE provides better response time than others\": SPICE's T below every other series' "
        "at every other rate and delay (10 Mbit/s panel: every delay).",
        figure="Fig. 4.7 (a), (b), §4.6.2",
        x="delay",
        facet="rate",
        protocols=("spice",),
        min_protocols=2,
        within=FIG47,
        run=_spice_best_other_cases,
    ),
    Check(
        name="t_rises_with_delay",
        title="T rises with delay for every protocol",
        claim='"The response time increases according to an increase of the network delay regardless of '
        "protocols\": every series' slope of T over delay above 0 in every rate panel.",
        figure="Fig. 4.7 (a), (b), §4.6.2",
        x="delay",
        facet="rate",
        protocols=(),
        within=FIG47,
        run=_t_rises_with_delay,
    ),
    _x_constant_check("delay", "§4.6.2 (Fig. 4.7's X)", FIG47),
    _x_constant_check("loss", "§4.6.2 (Fig. 4.8's X)", FIG48),
    Check(
        name="spice_x_jump_near_10mbit",
        title="SPICE's X jumps near 10 Mbit/s",
        claim="SPICE 0.10.1 switches behaviour at a fixed 10 Mbit/s bandwidth estimate, visible as a jump "
        "in bytes near 10 Mbit/s: SPICE's X at the first rate ≥ 10 Mbit/s differs by more than "
        f"{JUMP_SHARE:.0%} from its X at the last rate below (both within "
        f"{fmt_value('rate', JUMP_RATES[0])}-{fmt_value('rate', JUMP_RATES[1])}). "
        "The lab runs a newer SPICE.",
        figure="Fig. 4.6 (b), (c)",
        x="rate",
        protocols=("spice",),
        within=FIG46,
        run=_spice_jump_near_10,
    ),
    Check(
        name="image_transfer_better_lte",
        title="Image transfer beats event transfer under LTE-like conditions",
        claim="In LTE (around 10 Mbit/s, 50 ms, loss < 1 %) image transfer (VNC, SPICE) is better than "
        "event transfer (X2Go): every VNC and SPICE series' T below X2Go's at "
        f"{fmt_value('rate', LTE['rate'][0])}-{fmt_value('rate', LTE['rate'][1])}, "
        "delay 40-60 ms, loss ≤ 1 %.",
        figure="§4.7",
        x=None,
        protocols=("x2go",),
        min_protocols=2,
        within=LTE,
        run=_image_transfer_lte,
    ),
)

# The thesis' own number or statement per check (the findings table's "paper" column).
PAPER_VALUES: dict[str, str] = {
    "x2go_best_t_low_rate": "X2Go lowest T at a few Mbit/s or less (Fig. 4.6a)",
    "spice_best_t_high_rate": "SPICE lowest T above 10 Mbit/s (Fig. 4.6a)",
    "x2go_smallest_x_and_rate": "X2Go's X and X/T the smallest at every bandwidth (Fig. 4.6b, c)",
    "t_proportional_to_x_low_rate": "T proportional to X below a few Mbit/s",
    "x2go_t_grows_most_with_delay": "X2Go's T grows most with delay (Fig. 4.7)",
    "x2go_better_short_delay_1mbit": "at 1 Mbit/s X2Go better up to 50 ms, SPICE beyond (Fig. 4.7a)",
    "best_t_by_loss": "SPICE best below 3 % loss, X2Go above 5 % (Fig. 4.8)",
    "spice_best_other_delay_cases": "SPICE best in every other case of Fig. 4.7",
    "t_rises_with_delay": "T rises with delay for every protocol",
    "x_constant_with_delay": "X almost constant with delay",
    "x_constant_with_loss": "X almost constant with loss",
    "spice_x_jump_near_10mbit": "SPICE 0.10.1 switches at a 10 Mbit/s estimate: a jump in X",
    "image_transfer_better_lte": "image transfer better under LTE (≈ 10 Mbit/s, 50 ms, < 1 % loss)",
}

REPORT = Report(
    "ch4",
    "Thesis chapter 4 (§4.6): remote-desktop protocols compared",
    CHECKS,
    PAPER_VALUES,
    # Above a few Mbit/s T is the time the host takes to draw and encode the page (the namespace
    # desktop or a TCG guest, docs/reproduction/ch4.md), so each machine's trials are judged apart.
    host_bound=True,
)
