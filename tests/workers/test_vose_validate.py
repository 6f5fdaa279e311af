"""`qoelab vose validate`'s statistics: paired errors, their CI against the thesis' bounds, ABBA order.

The runs themselves are real streams (tests/workers/test_vose_trial.py, benchmarks/vose); these
summaries are hand-built so each verdict is seen deciding.
"""

from __future__ import annotations

import pytest

from qoelab.vose.validate import BOUNDS_PCT, DEFAULT_REPS, case_order, paired_error


def runs(throughputs: list[float], cpu: float = 0.9) -> list[dict[str, float]]:
    return [{"throughput_bps": t, "cpu_sender": cpu, "cpu_receiver": cpu} for t in throughputs]


def test_cases_alternate_order_so_drift_hits_both_sides():
    names = ["software", "hardware", "vose", "vose_stream"]
    assert case_order(names, 0) == names and case_order(names, 1) == names[::-1]
    assert [case_order(names, r)[0] for r in range(4)] == ["software", "vose_stream"] * 2
    assert DEFAULT_REPS >= 5


def test_errors_are_paired_repetition_by_repetition():
    # A host twice as fast in repetition 2 moves both sides: the paired error stays +1 %.
    hw = runs([100.0, 200.0, 100.0, 200.0, 100.0])
    vose = runs([101.0, 202.0, 101.0, 202.0, 101.0])
    p = paired_error(vose, hw)["throughput"]
    assert p["mean"] == pytest.approx(1.0) and p["ci_low"] == pytest.approx(1.0)
    assert (p["n"], p["bound"], p["verdict"]) == (5, BOUNDS_PCT["throughput"], "inside")


def test_a_ci_straddling_the_bound_is_undecided_and_one_beyond_it_outside():
    hw = runs([100.0] * 5)
    spread = paired_error(runs([96.0, 104.0, 99.0, 101.0, 103.0]), hw)["throughput"]
    assert spread["verdict"] == "undecided" and spread["ci_low"] < -3.0 < spread["mean"]
    far = paired_error(runs([110.0, 111.0, 109.0, 110.0, 110.5]), hw)["throughput"]
    assert far["verdict"] == "outside" and far["ci_low"] > 3.0
    one = paired_error(runs([100.5]), runs([100.0]))["throughput"]
    assert (one["ci_low"], one["verdict"]) == (None, "undecided")  # n = 1: no interval
