"""Paper 002's findings as checks: hand-built thinclient_tcp results that hold, fail and stay undecided."""

from __future__ import annotations

from typing import Any

import pytest

from qoelab.findings import JOB_REPORTS, REPORT_TITLES, REPORTS, applicable, evaluate, render_markdown
from qoelab.findings.base import Finding
from qoelab.findings.tc002 import buffer_of, limit_bytes
from qoelab.jobs.thinclient_tcp import ThinclientParams, inapplicable
from qoelab.thinclient import experiments

LARGE, SMALL = experiments.BUFFERS["large"], experiments.BUFFERS["small"]
SPREAD = (-1.0, 0.0, 1.0)  # three seeds around a mean
NAMES = [
    "router_dominates_150",
    "server_dominates_1000",
    "prio_sack_lower_r150",
    "rto_without_loss",
    "separate_propagation",
    "bursty_drop_stall",
    "t_interval_vs_delay",
]


def resolved(**params: Any) -> dict[str, Any]:
    """A trial's parameters as the backend stores them (Trial.resolved): validated, SI, ``limit`` as
    written, and without the ones that do not apply (keystrokes_first on separate connections)."""
    valid = ThinclientParams(**params)
    out = valid.model_dump(mode="json")
    for name in inapplicable(valid):
        out.pop(name, None)
    return out


def runs(summary: dict[str, float], noise: dict[str, float] | None = None, spread: tuple[float, ...] = SPREAD,
         **params: Any) -> list[dict[str, Any]]:  # fmt: skip
    """One row per seed of one configuration: ``summary`` moved by ``off * noise`` per metric."""
    noise = noise or {}
    return [
        {
            "params": resolved(**params, seed=i + 1),
            "summary": {k: v + off * noise.get(k, 0.0) for k, v in summary.items()},
        }
        for i, off in enumerate(spread)
    ]


def shares(threshold: int, **by: float) -> dict[str, float]:
    """share_<component>_I<threshold>: the given ones, the rest of 1 split over the others."""
    rest = [c for c in ("server", "retransmission", "router", "propagation", "client") if c not in by]
    left = (1.0 - sum(by.values())) / len(rest)
    return {f"share_{c}_I{threshold}": by.get(c, left) for c in (*by, *rest)}


def named(found: list[Finding], name: str) -> list[Finding]:
    return [f for f in found if f.name == name]


def one(found: list[Finding], name: str) -> Finding:
    (f,) = named(found, name)
    return f


E1 = {**experiments.BASE, "experiment": "e1"}
E2 = {**experiments.EXISTING, "experiment": "e2"}
SHARE_NOISE = {k: 0.01 for k in shares(150, router=0.5)} | {k: 0.01 for k in shares(1000, router=0.5)}


def test_thinclient_results_are_read_by_the_paper_002_report():
    assert JOB_REPORTS["thinclient_tcp"] == "tc002"
    assert REPORT_TITLES["tc002"].startswith("Paper 002 (§3-§6)")
    assert [c.name for c in REPORTS["tc002"]] == NAMES


def test_the_buffer_is_read_from_limit_as_written():
    assert resolved(limit="25kb")["limit"] == "25kb"  # not SI: the check has to parse it
    assert buffer_of({"limit": LARGE}) == "large" and buffer_of({"limit": "25kb"}) == "small"
    assert buffer_of({"limit": SMALL}) == "small" and buffer_of({"limit": "100kb"}) is None
    assert limit_bytes({"limit": 1000, "mtu": 1500}) == 1_500_000  # a bare number is packets
    assert limit_bytes({"limit": "junk"}) is None and buffer_of({}) is None


# ---- router_dominates_150 / server_dominates_1000 ----------------------------------------------------


def test_router_dominates_the_130_ms_tail_holds_does_not_hold_and_needs_two_trials():
    held = runs(shares(150, router=0.6, server=0.2), SHARE_NOISE, limit=LARGE, **E1)
    f = one(evaluate("tc002", held), "router_dominates_150")
    assert f.verdict == "holds", f.reason
    assert f.reason.startswith("all 4 comparisons agree, e.g. router share − server share 0.4 (CI 0.4–0.4)")
    assert "mean shares server 0.2, retransmission 0.0667, router 0.6" in f.reason
    assert {(r.protocol, round(r.mean or 0, 3)) for r in f.rows} >= {("router", 0.6), ("server", 0.2)}

    failed = runs(shares(150, router=0.2, server=0.6), SHARE_NOISE, limit=LARGE, **E1)
    f = one(evaluate("tc002", failed), "router_dominates_150")
    assert f.verdict == "does not hold"
    assert f.reason.startswith("below 0: router share − server share -0.4 (CI -0.4–-0.4)")
    assert f.reason.endswith("largest: server")

    single = runs(shares(150, router=0.6), spread=(0.0,), limit=LARGE, **E1)
    f = one(evaluate("tc002", single), "router_dominates_150")
    assert f.verdict == "inconclusive"
    assert f.reason.startswith("n < 2 for router share − server share (n = 1) at large buffer (2,500 KB)")


def test_router_dominates_is_the_large_buffers_fifo_claim_only():
    small = runs(shares(150, router=0.6), SHARE_NOISE, limit=SMALL, **E1)
    prio = runs(shares(150, router=0.6), SHARE_NOISE, limit=LARGE, **E2)
    assert not named(evaluate("tc002", small + prio), "router_dominates_150")
    check = REPORTS["tc002"][0]
    assert check.applies([r["params"] for r in small]) == (
        "no trial lies within large buffer (2,500 KB), queue fifo, connections shared"
    )


def test_server_dominates_the_980_ms_tail_or_no_write_got_there():
    tail = runs({**shares(150, router=0.6), **shares(1000, server=0.7)}, SHARE_NOISE, limit=LARGE, **E1)
    assert one(evaluate("tc002", tail), "server_dominates_1000").verdict == "holds"
    no_tail = runs({**shares(150, router=0.6), "r_I1000": 0.0}, SHARE_NOISE, limit=LARGE, **E1)
    f = one(evaluate("tc002", no_tail), "server_dominates_1000")
    assert (f.verdict, f.reason) == (
        "inconclusive",
        "no interactive write exceeded 980 ms in 3 trials at large buffer (2,500 KB)",
    )
    # Under priority queueing too (the paper: Fig. 7a), each queue its own scope.
    router = runs(shares(1000, router=0.7), SHARE_NOISE, limit=LARGE, **E2)
    found = {f.scope_label: f for f in named(evaluate("tc002", tail + router), "server_dominates_1000")}
    assert found["experiment = e1, queue = fifo, tcp_sack = False"].verdict == "holds"
    assert found["experiment = e2, queue = prio, tcp_sack = True"].verdict == "does not hold"


# ---- prio_sack_lower_r150 ---------------------------------------------------------------------------


def r150(value: float, noise: float = 1e-4, **params: Any) -> list[dict[str, Any]]:
    return runs({"r_I150": value}, {"r_I150": noise}, **params)


def test_prio_sack_lowers_r150_per_buffer_with_the_papers_numbers():
    rows = r150(3.6e-2, limit=LARGE, **E1) + r150(6.1e-3, limit=LARGE, **E2)
    rows += r150(1.2e-2, limit=SMALL, **E1) + r150(1.5e-2, limit=SMALL, **E2)
    found = {f.scope_label: f for f in named(evaluate("tc002", rows), "prio_sack_lower_r150")}
    large, small = found[f"limit = {LARGE}"], found[f"limit = {SMALL}"]
    assert large.verdict == "holds"
    assert large.reason == (
        "prio + SACK is lower: prio + SACK 6.1 ×10⁻³ vs FIFO without SACK 36 ×10⁻³ at large buffer "
        "(2,500 KB) (the paper: 6.1e-3 vs 3.6e-2)"
    )
    assert small.verdict == "does not hold"
    assert small.reason == (
        "FIFO without SACK is lower: prio + SACK 15 ×10⁻³ vs FIFO without SACK 12 ×10⁻³ at small buffer "
        "(25 KB) (the paper: 6.4e-3 vs 1.2e-2)"
    )


def test_prio_sack_overlapping_intervals_are_inconclusive_and_one_side_alone_does_not_apply():
    rows = r150(1.0e-2, 2e-3, limit=LARGE, **E1) + r150(0.9e-2, 2e-3, limit=LARGE, **E2)
    f = one(evaluate("tc002", rows), "prio_sack_lower_r150")
    assert f.verdict == "inconclusive"
    assert f.reason.startswith("the 95 % CIs overlap: prio + SACK 9 ×10⁻³ vs FIFO without SACK 10 ×10⁻³")
    e2_only = r150(6.1e-3, limit=LARGE, **E2)
    assert not named(evaluate("tc002", e2_only), "prio_sack_lower_r150")
    check = next(c for c in REPORTS["tc002"] if c.name == "prio_sack_lower_r150")
    assert check.applies([r["params"] for r in e2_only]) == "no trial with queue fifo, tcp_sack False"


# ---- rto_without_loss -------------------------------------------------------------------------------


def test_rto_without_loss_holds_fails_and_needs_a_drop_free_trial():
    held = runs({"rto_per_conn_300s": 0.5, "router_drops": 0.0, "spurious_rto_per_conn_300s": 0.1},
                {"rto_per_conn_300s": 0.1}, limit=LARGE, **E2)  # fmt: skip
    f = one(evaluate("tc002", held), "rto_without_loss")
    assert (f.verdict, f.reason) == (
        "holds",
        "RTOs in 3 of 3 drop-free trials at large buffer (2,500 KB): rto_per_conn_300s 0.5 "
        "(CI 0.252–0.748) over 3 trials without a router drop (the paper: 3.1 per connection per 300 s "
        "with no packet dropped)",
    )
    none = runs({"rto_per_conn_300s": 0.0, "router_drops": 0.0}, limit=LARGE, **E2)
    none += runs({"rto_per_conn_300s": 2.0, "router_drops": 40.0}, spread=(0.0,), limit=LARGE, **E2)
    f = one(evaluate("tc002", none), "rto_without_loss")
    assert (f.verdict, f.reason) == (
        "does not hold",
        "no RTO in 3 drop-free trials at large buffer (2,500 KB): rto_per_conn_300s 0 (CI 0–0) over 3 trials "
        "without a router drop; 1 trials with router drops left out (the paper: 3.1 per connection per "
        "300 s with no packet dropped)",
    )
    lossy = runs({"rto_per_conn_300s": 2.0, "router_drops": 40.0}, {"router_drops": 10.0}, limit=LARGE, **E2)
    f = one(evaluate("tc002", lossy), "rto_without_loss")
    assert (f.verdict, f.reason) == (
        "inconclusive",
        "every one of 3 trials at large buffer (2,500 KB) dropped packets at the router (30-50 drops), "
        "so their RTOs may be loss recovery",
    )
    fifo = runs({"rto_per_conn_300s": 0.5, "router_drops": 0.0}, limit=LARGE, **E1)
    assert not named(evaluate("tc002", fifo), "rto_without_loss")


# ---- separate_propagation ---------------------------------------------------------------------------


E7 = {**experiments.EXPERIMENTS["e7"].params, "experiment": "e7"}


def test_separate_connections_leave_propagation_only():
    # 20 ms WAN + 2 x 1 ms LAN = 22 ms one way: p99 25 ms is within 10 ms of it.
    held = runs({"p99_I_ms": 25.0}, {"p99_I_ms": 0.5}, limit=SMALL, **E7)
    f = one(evaluate("tc002", held), "separate_propagation")
    assert f.verdict == "holds", f.reason
    assert f.reason == (
        "all 2 comparisons agree, e.g. p99 − propagation (ms) 3 (CI 1.76–4.24) at small buffer (25 KB); "
        "propagation 22 ms, bound 10 ms above it (the paper: almost entirely propagation delay)"
    )
    far = runs({"p99_I_ms": 60.0}, {"p99_I_ms": 0.5}, limit=SMALL, **E7)
    f = one(evaluate("tc002", far), "separate_propagation")
    assert f.verdict == "does not hold"
    assert f.reason.startswith("above 10: p99 − propagation (ms) 38 (CI 36.8–39.2) at small buffer (25 KB)")
    one_run = runs({"p99_I_ms": 25.0}, spread=(0.0,), limit=SMALL, **E7)
    f = one(evaluate("tc002", one_run), "separate_propagation")
    assert f.verdict == "inconclusive"
    assert f.reason.startswith("n < 2 for p99 − propagation (ms) (n = 1) at small buffer (25 KB)")


def test_separate_propagation_follows_the_wan_delay_and_each_buffer_is_its_own_scope():
    rows = runs({"p99_I_ms": 75.0}, {"p99_I_ms": 0.5}, limit=LARGE, **{**E7, "delay": "70ms"})
    rows += runs({"p99_I_ms": 75.0}, {"p99_I_ms": 0.5}, limit=SMALL, **{**E7, "delay": "20ms"})
    found = {f.scope_label: f for f in named(evaluate("tc002", rows), "separate_propagation")}
    assert found[f"delay = 70 ms, limit = {LARGE}"].verdict == "holds"  # 72 ms propagation
    assert found[f"delay = 20 ms, limit = {SMALL}"].verdict == "does not hold"
    shared = runs({"p99_I_ms": 25.0}, limit=SMALL, **E2)
    assert not named(evaluate("tc002", shared), "separate_propagation")


# ---- bursty_drop_stall ------------------------------------------------------------------------------

LINUX = {"max_I_ms": 420.0, "p99_B_ms": 310.0, "TcpExtTCPLostRetransmit": 3.0, "router_drops": 900.0,
         "TcpExtTCPSackRecovery": 50.0, "rto_per_conn_300s": 0.2}  # fmt: skip


def test_the_fig_9_stall_does_not_hold_on_linux_and_the_counters_say_why():
    f = one(evaluate("tc002", runs(LINUX, limit=SMALL, **E2)), "bursty_drop_stall")
    assert (f.verdict, f.reason) == (
        "does not hold",
        "no trial of 3 at small buffer (25 KB) had a delay above 2000 ms together with a lost "
        "retransmission: largest max_I_ms 420 ms, largest p99_B_ms 310 ms, TcpExtTCPLostRetransmit 9 "
        "in all, router drops 2700, TcpExtTCPSackRecovery 150 (the paper (ns-2 FullTCP SACK): stalls of "
        "several seconds after hundreds of drops; Linux recovers with RACK and CA_Loss)",
    )


def test_the_fig_9_stall_holds_with_a_long_delay_and_lost_retransmissions():
    rows = runs(LINUX, limit=SMALL, **E2)
    rows[1]["summary"] |= {"max_I_ms": 2500.0}
    f = one(evaluate("tc002", rows), "bursty_drop_stall")
    assert f.verdict == "holds"
    assert f.reason.startswith(
        "1 of 3 trials at small buffer (25 KB) had a delay above 2000 ms with lost retransmissions: "
        "largest max_I_ms 2500 ms"
    )
    # About one second with lost retransmissions is an RTO and one backoff, Linux's ordinary timer
    # recovery (the 1,045 ms write of E2's seed 6), not "several seconds".
    rows = runs(LINUX, limit=SMALL, **E2)
    rows[1]["summary"] |= {"max_I_ms": 1045.0, "TcpExtTCPLostRetransmit": 45.0}
    f = one(evaluate("tc002", rows), "bursty_drop_stall")
    assert f.verdict == "does not hold" and "largest max_I_ms 1045 ms" in f.reason
    # A long delay without a lost retransmission is server buffering, not Fig. 9's stall.
    rows = runs({**LINUX, "p99_B_ms": 2500.0, "TcpExtTCPLostRetransmit": 0.0}, limit=SMALL, **E2)
    assert one(evaluate("tc002", rows), "bursty_drop_stall").verdict == "does not hold"


def test_the_fig_9_stall_needs_drops_sack_and_the_small_buffer():
    calm = runs({**LINUX, "router_drops": 0.0, "TcpExtTCPLostRetransmit": 0.0}, limit=SMALL, **E2)
    f = one(evaluate("tc002", calm), "bursty_drop_stall")
    assert (f.verdict, f.reason) == (
        "inconclusive",
        "no packet was dropped at the router in 3 trials at small buffer (25 KB), so there was no bursty "
        "drop to recover from",
    )
    no_sack = runs(LINUX, limit=SMALL, **E1)
    large = runs(LINUX, limit=LARGE, **E2)
    assert not named(evaluate("tc002", no_sack + large), "bursty_drop_stall")


# ---- t_interval_vs_delay ----------------------------------------------------------------------------

E8 = {**experiments.EXISTING, "experiment": "e8"}


def fig14(t_by_delay_ms: dict[int, float | None], limit: str = SMALL) -> list[dict[str, Any]]:
    """Three seeds per delay; None: r_I150 = 0, so the trial has no T_I150 (as the job stores it)."""
    rows = []
    for d, t in t_by_delay_ms.items():
        summary = {"r_I150": 0.0} if t is None else {"r_I150": 0.27 / t, "T_I150_s": t}
        rows += runs(summary, {"T_I150_s": 1.0} if t else {}, limit=limit, **{**E8, "delay": f"{d}ms"})
    return rows


def test_t_i150_shrinks_with_delay_at_the_small_buffer():
    f = one(evaluate("tc002", fig14({7: 90.0, 20: 70.0, 70: 40.0})), "t_interval_vs_delay")
    assert f.verdict == "holds", f.reason
    # polyfit and its t(0.975, 7) interval, worked separately: -0.7397 (-0.8845 to -0.5949).
    assert f.reason.startswith("T_I150 shrinks with delay: slope -0.74 s per ms (CI -0.884 to -0.595) over")
    assert f.reason.endswith(
        " 9 trials at 3 delays, small buffer (25 KB) (the paper: intervals shrink as the delay grows, "
        "67 s on average with its proposal)"
    )
    assert [r.condition for r in f.rows][:3] == ["delay 7 ms", "delay 20 ms", "delay 70 ms"]


def test_t_i150_growing_with_delay_does_not_hold_and_too_few_delays_are_inconclusive():
    f = one(evaluate("tc002", fig14({7: 40.0, 20: 70.0, 70: 90.0})), "t_interval_vs_delay")
    assert f.verdict == "does not hold"
    assert f.reason.startswith("T_I150 grows with delay: slope 0.684 s per ms (CI 0.394 to 0.974)")
    two = one(evaluate("tc002", fig14({7: 90.0, 70: 40.0})), "t_interval_vs_delay")
    assert (two.verdict, two.reason) == (
        "inconclusive",
        "T_I150 at 2 delays only at small buffer (25 KB) (r_I150 > 0 needed): a slope needs 3",
    )
    # r = 0 at one delay leaves two delays with an interval: still too few.
    gap = one(evaluate("tc002", fig14({7: None, 20: 70.0, 70: 40.0})), "t_interval_vs_delay")
    assert gap.verdict == "inconclusive" and gap.reason.startswith("T_I150 at 2 delays only")
    never = one(evaluate("tc002", fig14({7: None, 20: None, 70: None})), "t_interval_vs_delay")
    assert (never.verdict, never.reason) == (
        "inconclusive",
        "r_I150 = 0 in all 9 trials at small buffer (25 KB): no interval to compare",
    )


def test_t_i150_is_not_judged_at_the_large_buffer():
    assert not named(evaluate("tc002", fig14({7: 90.0, 20: 70.0, 70: 40.0}, LARGE)), "t_interval_vs_delay")


# ---- the report -------------------------------------------------------------------------------------


def test_a_whole_run_renders_as_markdown_with_every_check():
    rows = runs({**shares(150, router=0.6), **shares(1000, server=0.7), "r_I150": 3.6e-2}, SHARE_NOISE,
                limit=LARGE, **E1)  # fmt: skip
    e2 = {"r_I150": 6.1e-3, "rto_per_conn_300s": 0.5, "router_drops": 0.0}
    rows += runs(e2, {"rto_per_conn_300s": 0.1}, limit=LARGE, **E2)
    rows += runs(LINUX, limit=SMALL, **E2)
    rows += runs({"p99_I_ms": 25.0}, {"p99_I_ms": 0.5}, limit=SMALL, **E7)
    rows += fig14({7: 90.0, 20: 70.0, 70: 40.0})
    assert {c.name for c in applicable("tc002", rows)} == set(NAMES)
    text = render_markdown(evaluate("tc002", rows), REPORT_TITLES["tc002"])
    assert text.startswith("## Paper 002 (§3-§6)")
    for name in NAMES:
        assert f"- check: `{name}`" in text


@pytest.mark.parametrize("key", sorted(experiments.EXPERIMENTS))
def test_every_experiments_parameters_are_a_valid_trial(key):
    for buffer in ("large", "small"):
        assert resolved(**experiments.preset(key, buffer))["limit"] == experiments.BUFFERS[buffer]
