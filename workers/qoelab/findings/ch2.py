"""The findings of the thesis' chapter 2 (BDL-APT, §2.6) as checks over ``storage_apt`` results.

Source: ../shared/notes/seed-bdl-apt.md §5. Every trial is one run; mode and fixed N make the
series (``APT``, ``vanilla``, ``N = 8``), and every other parameter that varies (transport, rate,
delay, ...) is a scope judged on its own. Numbers are the per-trial summaries of the steady-state
window (``goodput_steady_bps``, ``utilization``, ``cpu_ticks_per_bit_*``) and of the search
(``steps``), mean and 95 % Student-t CI over the runs. The thresholds are the issue's targets,
scaled from the paper's numbers (docs/storage-apt.md).
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
    Stat,
    at_least,
    at_most,
    fmt_num,
    fmt_value,
    lower,
    mean_ci,
)

# §2.6.2: "6-17 steps" over all the paper's experiments (mean 12.1). The range is checked per run;
# the mean depends on where N* lies (a search's length grows with log N*), so the paper's 12.1 is
# shown beside the lab's mean, not judged.
MIN_STEPS, MAX_STEPS = 6, 17
PAPER_MEAN_STEPS = 12.1
# Fig. 2.11 at 20 ms (NBD): APT and the best fixed N both ≈ 800 Mbit/s. "As good" is read as at
# least 90 % of the best fixed N's mean: a 5 s interval's noise moves a single step's G by a few %.
NEAR_BEST = 0.90
# Fig. 2.10: "fully utilizes the bottleneck link". 85 % of the rate: the paper's 828 of 900 Mbit/s
# is 92 %; a link emulated in userspace on the same two cores loses a little more.
LINK_SHARE = 0.85
# §2.6.6: the per-bit overhead of many sessions over one, client and storage.
PAPER_OVERHEAD = {"nbd": "≈ 20-30 %", "iscsi": "≈ 100 %"}

APT = Series("APT")
VANILLA = Series("vanilla")
STEADY = "steady state"


def _mode(sc: Scope, mode: str) -> list[Mapping[str, Any]]:
    return sc.select_any(mode=mode)


def _stat(sc: Scope, rows: list[Mapping[str, Any]], series: Series, metric: str, quantity: str,
          scale: float = 1.0) -> Stat:  # fmt: skip
    s = mean_ci(r["summary"][metric] / scale for r in rows if metric in r["summary"])
    sc.record(STEADY, series, quantity, s)
    return s


def _fixed_series(sc: Scope) -> dict[int, list[Mapping[str, Any]]]:
    out: dict[int, list[Mapping[str, Any]]] = {}
    for r in _mode(sc, "fixed"):
        out.setdefault(int(r["params"]["sessions"]), []).append(r)
    return dict(sorted(out.items()))


def _where(sc: Scope) -> str:
    return ", ".join(f"{k} {fmt_value(k, v)}" for k, v in sc.scope.items()) or "these runs"


# ---- 1: convergence ------------------------------------------------------------------------------


def _converges(sc: Scope) -> tuple[list[Comparison], list[str]]:
    apt = _mode(sc, "apt")
    if not apt:
        return [], ["no APT trials"]
    steps = _stat(sc, apt, APT, "steps", "steps to converge")
    _stat(sc, apt, APT, "n_star", "N*")
    saturated = sum(1 for r in apt if r["summary"].get("saturated"))
    where = _where(sc)
    paper = f"the paper: {MIN_STEPS}-{MAX_STEPS}, mean {PAPER_MEAN_STEPS:g}"
    comps = [
        Comparison(c.outcome, f"{c.text} ({paper})")
        for c in (
            at_least(steps, MIN_STEPS, "APT's steps", where),
            at_most(steps, MAX_STEPS, "APT's steps", where),
        )
    ]
    # Every run inside the range, not only the mean: one run of 21 steps is outside the paper's set.
    outside = sorted(v for r in apt if (v := r["summary"].get("steps")) is not None
                     and not MIN_STEPS <= v <= MAX_STEPS)  # fmt: skip
    if outside:
        listed = ", ".join(fmt_num(v) for v in outside)
        comps.append(Comparison("contradicts", f"{len(outside)} of {len(apt)} APT runs took {listed} steps, "
                                               f"outside {MIN_STEPS}-{MAX_STEPS} at {where}"))  # fmt: skip
    if saturated:
        text = f"{saturated} of {len(apt)} APT runs reached n_max without a decrease"
        comps.append(Comparison("unclear", text))
    return comps, []


# ---- 2: as good as the best fixed N ---------------------------------------------------------------


def _near_best_fixed(sc: Scope) -> tuple[list[Comparison], list[str]]:
    apt, fixed = _mode(sc, "apt"), _fixed_series(sc)
    gaps = (["no APT trials"] if not apt else []) + (["no fixed-N trials"] if not fixed else [])
    if gaps:
        return [], gaps
    means = {n: _stat(sc, rows, Series(f"N = {n}"), "goodput_steady_bps", "goodput (Mbit/s)", 1e6)
             for n, rows in fixed.items()}  # fmt: skip
    best_n = max(means, key=lambda n: means[n].mean or 0.0)
    best = means[best_n].mean or 0.0
    _stat(sc, apt, APT, "goodput_steady_bps", "goodput (Mbit/s)", 1e6)
    ratio = mean_ci(r["summary"]["goodput_steady_bps"] / 1e6 / best for r in apt if best > 0)
    sc.record(STEADY, APT, f"goodput / best fixed (N = {best_n})", ratio)
    return [at_least(ratio, NEAR_BEST, f"APT's goodput over N = {best_n}'s", _where(sc))], []


# ---- 3: fills the link ---------------------------------------------------------------------------


def _fills_link(sc: Scope) -> tuple[list[Comparison], list[str]]:
    apt = _mode(sc, "apt")
    if not apt:
        return [], ["no APT trials"]
    share = _stat(sc, apt, APT, "utilization", "goodput / link rate")
    return [at_least(share, LINK_SHARE, "APT's share of the link", _where(sc))], []


# ---- 4: one session does not ---------------------------------------------------------------------


def _vanilla_short(sc: Scope) -> tuple[list[Comparison], list[str]]:
    apt, vanilla = _mode(sc, "apt"), _mode(sc, "vanilla")
    gaps = (["no APT trials"] if not apt else []) + (["no vanilla trials"] if not vanilla else [])
    if gaps:
        return [], gaps
    v = _stat(sc, vanilla, VANILLA, "goodput_steady_bps", "goodput (Mbit/s)", 1e6)
    a = _stat(sc, apt, APT, "goodput_steady_bps", "goodput (Mbit/s)", 1e6)
    return [lower(v, a, "vanilla", "APT", _where(sc), " Mbit/s")], []


# ---- 5: CPU per bit ------------------------------------------------------------------------------


def _cpu_overhead(sc: Scope) -> tuple[list[Comparison], list[str]]:
    apt, vanilla = _mode(sc, "apt"), _mode(sc, "vanilla")
    gaps = (["no APT trials"] if not apt else []) + (["no vanilla trials"] if not vanilla else [])
    if gaps:
        return [], gaps
    transport = str(sc.scope.get("transport") or (apt[0]["params"].get("transport")))
    comps = []
    for side in ("client", "storage"):
        metric, quantity = f"cpu_ticks_per_bit_{side}", f"{side} ticks per Gbit"
        v = _stat(sc, vanilla, VANILLA, metric, quantity, 1e-9)
        a = _stat(sc, apt, APT, metric, quantity, 1e-9)
        c = lower(v, a, "vanilla", "APT", f"{_where(sc)} ({side})", " ticks/Gbit")
        if v.mean and a.mean:
            over = 100 * (a.mean / v.mean - 1)
            paper = PAPER_OVERHEAD.get(transport, "not stated")
            c = Comparison(c.outcome, f"{c.text}; overhead {fmt_num(over)} % (the paper: {paper})")
        if c.outcome == "contradicts":
            # The lab counts the client's and target's own processes; the paper's /proc/stat counted
            # the whole machine, with the kernel's TCP work in softirq, which only grows with the
            # number of connections. So a measured overhead supports the claim, a measured saving
            # cannot refute it (issue 32: a substitute that cannot express the claim is inconclusive).
            c = Comparison("unclear", f"{c.text}; {_PER_PROCESS}")
        comps.append(c)
    return comps, []


_PER_PROCESS = (
    "per-process CPU leaves out the kernel's TCP work that the paper's whole-machine count included "
    "and that grows with sessions, so a saving here cannot refute the claim"
)


KEEP = ("mode", "sessions")
CHECKS: tuple[Check, ...] = (
    Check(
        name="apt_converges",
        title="APT fixes the number of sessions within 6-17 steps",
        claim="Over all experiments the number of active sessions converged in 6-17 steps (mean 12.1); "
        "NBD at 900 Mbit/s, 40 ms: N* = 33 after 12 steps. Checked as every APT run within 6-17 steps "
        "and the mean's CI inside the range; the mean of 12.1 is shown, not judged (it depends on N*).",
        figure="§2.6.2, Fig. 2.9",
        x=None,
        protocols=(),
        run=_converges,
        series_by=KEEP,
    ),
    Check(
        name="apt_near_best_fixed",
        title="APT's goodput matches the best fixed number of sessions",
        claim="BDL-APT reaches the goodput of the best fixed N (NBD at 20 ms: APT and N = 32 both ≈ 800 "
        "Mbit/s); checked as at least 90 % of the best fixed N's mean.",
        figure="Figs. 2.8, 2.11",
        x=None,
        protocols=(),
        run=_near_best_fixed,
        series_by=KEEP,
    ),
    Check(
        name="apt_fills_link",
        title="APT fills the bottleneck link",
        claim="BDL-APT fully utilizes the bottleneck link bandwidth, regardless of IP-SAN protocol (NBD "
        "converged to 828 of 900 Mbit/s); checked as at least 85 % of the link rate.",
        figure="Fig. 2.10, §2.6.3",
        x=None,
        protocols=(),
        run=_fills_link,
        series_by=KEEP,
    ),
    Check(
        name="vanilla_falls_short",
        title="One session cannot use a long fat link",
        claim="Without BDL-APT the protocols cannot fully utilize the bandwidth (below 20 Mbit/s of "
        "900 at 100 ms): one session's window, not the link, limits it.",
        figure="Figs. 2.10, 2.11",
        x=None,
        protocols=(),
        run=_vanilla_short,
        series_by=KEEP,
    ),
    Check(
        name="session_cpu_overhead",
        title="Many sessions cost more CPU per bit than one",
        claim="Multiple IP-SAN sessions increase the CPU ticks per successfully transferred bit, client "
        "and storage: NBD ≈ +20-30 %, iSCSI ≈ +100 % over one session.",
        figure="Figs. 2.14, 2.15, §2.6.6",
        x=None,
        protocols=(),
        run=_cpu_overhead,
        series_by=KEEP,
    ),
)

# The paper's own number or statement per check (the findings table's "paper" column).
PAPER_VALUES: dict[str, str] = {
    "apt_converges": "6-17 steps over all experiments, mean 12.1 (NBD, 900 Mbit/s, 40 ms: N* = 33 in 12)",
    "apt_near_best_fixed": "APT ≈ best fixed N (NBD, 20 ms: both ≈ 800 Mbit/s)",
    "apt_fills_link": "828 of 900 Mbit/s (92 % of the link)",
    "vanilla_falls_short": "one session below 20 of 900 Mbit/s at 100 ms",
    "session_cpu_overhead": "CPU per bit over one session: NBD +20-30 %, iSCSI ≈ +100 %",
}

REPORT = Report(
    "ch2",
    "Thesis chapter 2 (§2.6): BDL-APT, parallel IP-SAN sessions tuned by APT",
    CHECKS,
    PAPER_VALUES,
)
