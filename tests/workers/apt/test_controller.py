"""The APT controller against the papers' worked example, the discriminating bracket, every edge
case fixed in qoelab.apt.controller, and random unimodal curves (../shared/notes/seed-bdl-apt.md)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from qoelab.apt.controller import AptConfig, CurveError, gss_probe, nearest, read_curve, simulate
from qoelab.errors import ParameterError


def peak_at(p: float, left: float = 1.0, right: float = 1.0):
    """A unimodal goodput curve with its real maximum at p (slopes per session on each side)."""
    return lambda n: 1e9 - (left * (p - n) if n < p else right * (n - p)) * 1e6


def test_the_worked_example_of_figs_2_2_and_2_3():
    # n0 = 1, alpha = 2; maximum at N = 6 and G(8) < G(4) (the notes: -(N - 5.8)^2 reproduces it).
    ctl = simulate(lambda n: 1e9 - (n - 5.8) ** 2 * 1e6, AptConfig(n0=1, alpha=2, n_max=128))
    trace = [(s.n, s.phase, s.branch, (s.l, s.m, s.r)) for s in ctl.steps]
    assert trace == [
        (1, "bracket", "increase", (None, None, None)),
        (2, "bracket", "increase", (None, None, None)),
        (4, "bracket", "increase", (None, None, None)),
        (8, "bracket", "decrease", (2, 4, 8)),
        (6, "gss", "eq2.4", (4, 6, 8)),
        (7, "gss", "eq2.3", (4, 6, 7)),
        (5, "gss", "eq2.3", (5, 6, 7)),
    ]
    assert ctl.summary() == {"probes": [1, 2, 4, 8, 6, 7, 5], "n_star": 6, "steps": 7, "saturated": False,
                             "bracket": [5, 6, 7]}  # fmt: skip


def test_after_convergence_n_stays_at_m():
    ctl = simulate(lambda n: 1e9 - (n - 5.8) ** 2 * 1e6, AptConfig(n0=1, n_max=128))
    for g in (1.0, 5e9, 0.0):
        step = ctl.observe(g)
        assert (step.phase, step.branch, step.n, step.next_n) == ("fixed", "steady", 6, 6)
    assert ctl.search_steps == 7 and ctl.n_star == 6


def test_the_discriminating_bracket_paper_and_textbook():
    assert gss_probe(16, 32, 44, "paper") == 22
    assert gss_probe(16, 32, 44, "textbook") == 26
    # The right case is the same in both variants.
    assert gss_probe(2, 4, 8, "paper") == gss_probe(2, 4, 8, "textbook") == 6


def test_n0_4_converges_to_33_in_12_steps_as_in_fig_2_9():
    # Steep left of the peak, shallow right: G(37) > G(32) while the maximum is at 33.
    ctl = simulate(peak_at(33, left=3, right=0.3), AptConfig(n0=4, alpha=2, n_max=128))
    assert ctl.summary()["probes"] == [4, 8, 16, 32, 64, 44, 22, 37, 40, 34, 35, 33]
    assert (ctl.n_star, ctl.search_steps) == (33, 12)
    textbook = simulate(peak_at(33, left=3, right=0.3), AptConfig(n0=4, n_max=128, gss="textbook"))
    assert textbook.steps[6].n == 26 and textbook.n_star == 33


def test_a_decrease_at_the_first_increase_gives_the_fixed_bracket():
    ctl = simulate(peak_at(3.2), AptConfig(n0=4, alpha=2, n_max=64))
    assert ctl.steps[1].branch == "decrease" and (ctl.steps[1].l, ctl.steps[1].m, ctl.steps[1].r) == (2, 4, 8)
    assert ctl.n_star == 3
    one = simulate(peak_at(1), AptConfig(n0=1, alpha=2, n_max=64))
    assert one.summary() == {
        "probes": [1, 2],
        "n_star": 1,
        "steps": 2,
        "saturated": False,
        "bracket": [1, 1, 2],
    }


def test_reaching_n_max_without_a_decrease_saturates():
    ctl = simulate(lambda n: n * 1e7, AptConfig(n0=4, n_max=64))
    assert ctl.summary() == {"probes": [4, 8, 16, 32, 64], "n_star": 64, "steps": 5, "saturated": True,
                             "bracket": None}  # fmt: skip
    assert ctl.steps[-1].branch == "saturated"
    alone = simulate(lambda n: 1.0, AptConfig(n0=8, n_max=8))
    assert alone.summary()["probes"] == [8] and alone.saturated


def test_the_increase_is_clamped_to_n_max():
    ctl = simulate(lambda n: n * 1e7, AptConfig(n0=4, alpha=2, n_max=48))
    assert ctl.summary()["probes"] == [4, 8, 16, 32, 48] and ctl.n_star == 48
    # A decrease at the clamped step brackets with the clamped N as r and the N before m as l.
    dec = simulate(peak_at(36), AptConfig(n0=4, alpha=2, n_max=48))
    assert dec.steps[4].n == 48
    assert (dec.steps[4].branch, dec.steps[4].l, dec.steps[4].m, dec.steps[4].r) == ("decrease", 16, 32, 48)


def test_equal_goodput_is_not_a_decrease_and_a_tie_keeps_m():
    flat = simulate(lambda n: 5e8, AptConfig(n0=4, n_max=32))
    assert flat.saturated and flat.summary()["probes"] == [4, 8, 16, 32]
    # Bracket (2, 4, 8) after G(8) < G(4); G(6) == G(4) is no improvement: Eq. 2.3, m stays 4.
    ctl = simulate({4: 10.0, 8: 5.0, 6: 10.0, 5: 9.0, 3: 1.0}, AptConfig(n0=4, n_max=64))
    assert [(s.n, s.branch) for s in ctl.steps][2] == (6, "eq2.3")
    assert (ctl.steps[2].l, ctl.steps[2].m, ctl.steps[2].r) == (2, 4, 6)


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"n_max": 0}, "n_max"),
        ({"n0": 0}, "n0"),
        ({"n0": 65}, "n0"),
        ({"alpha": 1.0}, "alpha"),
        ({"alpha": 1.1}, "alpha"),
        ({"alpha": float("nan")}, "alpha"),
        ({"gss": "fibonacci"}, "gss"),
    ],  # fmt: skip
)
def test_bad_parameters_name_the_field(kwargs, field):
    with pytest.raises(ParameterError) as err:
        AptConfig(**kwargs)
    assert err.value.field == field


def test_a_curve_without_a_probed_n_says_which():
    with pytest.raises(CurveError, match=r"no goodput for N = 8 \(it gives N = 1-4\)"):
        simulate({1: 1.0, 2: 2.0, 3: 3.0, 4: 4.0}, AptConfig(n0=4))


def test_read_curve_skips_a_header_and_comments_and_names_bad_lines():
    assert read_curve(["N,goodput_bps", "# measured", "1, 5e8", "2,9e8  # two"]) == {1: 5e8, 2: 9e8}
    with pytest.raises(CurveError, match="line 2"):
        read_curve(["1,5e8", "two,9e8"])
    with pytest.raises(CurveError, match="given twice"):
        read_curve(["1,5e8", "1,6e8"])
    with pytest.raises(CurveError, match="no 'N,goodput_bps' lines"):
        read_curve(["# nothing"])


@st.composite
def unimodal(draw):
    """n_max, n0, alpha and a strictly unimodal curve over 1..n_max (its peak anywhere)."""
    n_max = draw(st.integers(1, 128))
    n0 = draw(st.integers(1, n_max))
    alpha = draw(st.sampled_from([1.5, 2.0, 2.5, 3.0, 4.0]))
    if n0 < n_max and nearest(alpha * n0) <= n0:
        alpha = 2.0
    peak = draw(st.integers(1, n_max))
    rises = draw(st.lists(st.integers(1, 1000), min_size=n_max, max_size=n_max))
    curve, g = {}, 0
    for n in range(1, n_max + 1):
        g += rises[n - 1] if n <= peak else -rises[n - 1]
        curve[n] = float(g + 200_000)
    gss = draw(st.sampled_from(["paper", "textbook"]))
    return AptConfig(n0=n0, alpha=alpha, n_max=n_max, gss=gss), curve, peak


@settings(max_examples=400, derandomize=True, database=None, deadline=None)
@given(unimodal())
def test_on_any_unimodal_curve_apt_stops_inside_its_bracket(case):
    config, curve, peak = case
    ctl = simulate(curve, config, max_steps=200)
    probes = [s.n for s in ctl.steps]
    assert all(1 <= n <= config.n_max for n in probes)
    assert len(set(probes)) == len(probes), "no N is measured twice"
    if ctl.saturated:
        assert ctl.n_star == config.n_max
        return
    l, m, r = ctl.bracket
    assert r - l <= 2 and l <= ctl.n_star == m <= r
    # Every GSS probe lay strictly inside the bracket it was drawn from.
    for before, step in zip(ctl.steps, ctl.steps[1:], strict=False):
        if step.phase == "gss":
            assert before.l < step.n < before.r
    # APT finds the peak unless it lies at or left of the bracket's assumed left end, n0 / alpha,
    # which is never measured (a decrease at the first increase).
    if peak >= config.n0 or peak > max(1, nearest(config.n0 / config.alpha)):
        assert ctl.n_star == peak
