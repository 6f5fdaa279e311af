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
    Scope,
    Series,
    as_number,
    at_least,
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
        run=_best_by_loss,
    ),
)
