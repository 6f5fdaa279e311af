"""Statistics of rating campaigns against hand-computed values and Krippendorff's published example."""

from __future__ import annotations

import math

import numpy as np
import pytest

from ratings import stats

NAN = np.nan

# Krippendorff (2011), "Computing Krippendorff's Alpha-Reliability", the reliability data with
# 4 observers (A-D) x 12 units and missing values (section C); published values: nominal .743,
# ordinal .815, interval .849, ratio .797.
KRIPPENDORFF_2011 = {
    "A": [1, 2, 3, 3, 2, 1, 4, 1, 2, NAN, NAN, NAN],
    "B": [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, NAN, 3],
    "C": [NAN, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, NAN],
    "D": [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, NAN],
}


def _matrix(data: dict[str, list[float]]) -> dict[str, dict[int, float]]:
    return {r: {u: v for u, v in enumerate(row) if not math.isnan(v)} for r, row in data.items()}


def test_dmos_is_the_mean_with_a_student_t_interval_as_computed_by_hand() -> None:
    # scores 2,3,3,4,5: mean 3.4; s^2 = (1.96+0.16+0.16+0.36+2.56)/4 = 1.3; t(0.975, 4) = 2.776445
    s = stats.dmos([2, 3, 3, 4, 5])
    assert s.n == 5
    assert s.mean == pytest.approx(3.4)
    assert s.sd == pytest.approx(math.sqrt(1.3))
    half = 2.776445 * math.sqrt(1.3) / math.sqrt(5)
    assert s.ci_low == pytest.approx(3.4 - half, abs=1e-5)
    assert s.ci_high == pytest.approx(3.4 + half, abs=1e-5)
    assert s.half_width == pytest.approx(1.415714, abs=1e-5)


def test_dmos_of_four_scores_uses_three_degrees_of_freedom() -> None:
    # 5,5,4,4: mean 4.5, s = sqrt(1/3), t(0.975, 3) = 3.182446 -> half width 0.918693
    s = stats.dmos([5, 5, 4, 4])
    assert s.mean == pytest.approx(4.5)
    assert s.half_width == pytest.approx(0.918693, abs=1e-5)


def test_dmos_of_one_score_has_no_interval_and_of_none_has_no_mean() -> None:
    one = stats.dmos([3])
    assert (one.n, one.mean, one.ci_low, one.ci_high) == (1, 3.0, None, None)
    none = stats.dmos([])
    assert (none.n, none.mean) == (0, None)


def test_identical_scores_give_a_zero_width_interval() -> None:
    s = stats.dmos([4, 4, 4])
    assert s.ci_low == s.ci_high == 4.0


def test_a_thesis_table_4_2_cell_is_reproduced_from_five_evaluators() -> None:
    # Table 4.2, VNC, screen response time, 10 ms: 2.2 from five evaluators (e.g. 2, 2, 2, 3, 2).
    assert stats.dmos([2, 2, 2, 3, 2]).mean == pytest.approx(2.2)


@pytest.mark.parametrize(
    ("level", "published"),
    [("nominal", 0.743), ("ordinal", 0.815), ("interval", 0.849), ("ratio", 0.797)],
)
def test_alpha_matches_krippendorffs_published_example(level: str, published: float) -> None:
    a = stats.alpha(_matrix(KRIPPENDORFF_2011), level)
    assert a.value is not None
    assert round(a.value, 3) == published
    assert (a.raters, a.units) == (4, 12)
    assert a.pairable == 11  # unit 12 has a single value and cannot be paired


def test_alpha_is_one_for_perfect_agreement_and_undefined_without_variation() -> None:
    perfect = {"a": {1: 1, 2: 3, 3: 5}, "b": {1: 1, 2: 3, 3: 5}}
    assert stats.alpha(perfect, "ordinal").value == pytest.approx(1.0)
    flat = {"a": {1: 4, 2: 4}, "b": {1: 4, 2: 4}}
    result = stats.alpha(flat, "interval")
    assert result.value is None
    assert "identical" in result.reason


def test_alpha_needs_a_unit_rated_by_two_evaluators() -> None:
    result = stats.alpha({"a": {1: 1}, "b": {2: 5}}, "ordinal")
    assert result.value is None
    assert "two or more" in result.reason


def test_screening_excludes_an_evaluator_who_disagrees_with_the_others() -> None:
    base = [5, 4, 3, 2, 1, 4]
    matrix = {
        "e1": dict(enumerate(base)),
        "e2": dict(enumerate([5, 4, 3, 2, 2, 4])),
        "e3": dict(enumerate([4, 4, 3, 1, 1, 5])),
        "flipped": dict(enumerate([1, 2, 3, 4, 5, 2])),  # the scale read backwards
    }
    result = stats.screen(matrix)
    assert result["flipped"].excluded
    assert result["flipped"].correlation < 0
    assert "correlation" in result["flipped"].reasons[0]
    assert not any(result[e].excluded for e in ("e1", "e2", "e3"))
    # Leave-one-out: e1's r is computed against the mean of e2, e3 and flipped only.
    others = [np.mean([matrix[o][u] for o in ("e2", "e3", "flipped")]) for u in range(6)]
    assert result["e1"].correlation == pytest.approx(float(np.corrcoef(base, others)[0, 1]))


def test_screening_threshold_is_0_75_exclusive() -> None:
    assert stats.MIN_CORRELATION == 0.75
    m = {"a": {1: 1, 2: 2, 3: 3}, "b": {1: 1, 2: 2, 3: 3}}
    assert not stats.screen(m)["a"].excluded


def test_screening_flags_gold_traps_rated_3_or_lower_and_inconsistent_repeats() -> None:
    matrix = {"a": {1: 5, 2: 3, 3: 1}, "b": {1: 5, 2: 3, 3: 1}}
    gold = {"a": [("gold/screen", 5), ("gold/mouse", 4)], "b": [("gold/screen", 3)]}
    repeats = {"a": [("c1/screen", 4, 5)], "b": [("c1/screen", 2, 4)]}
    result = stats.screen(matrix, gold, repeats)
    assert not result["a"].excluded  # 4 on a trap and a difference of 1 are tolerated
    assert result["b"].excluded
    assert len(result["b"].gold_failures) == 1
    assert result["b"].consistency_failures == [{"unit": "c1/screen", "first": 2, "repeat": 4}]
    assert len(result["b"].reasons) == 2


def test_correlation_is_not_computed_on_too_few_units_or_constant_answers() -> None:
    result = stats.screen({"a": {1: 5, 2: 4}, "b": {1: 5, 2: 3}})
    assert result["a"].correlation is None
    assert "only 2 stimulus/stimuli shared" in result["a"].correlation_note
    assert not result["a"].excluded
    flat = stats.screen({"a": {1: 5, 2: 5, 3: 5}, "b": {1: 5, 2: 3, 3: 1}})
    assert flat["a"].correlation is None
    assert "this rater's votes do not vary" in flat["a"].correlation_note


def test_a_single_outlier_vote_is_left_out_by_the_cleansing_rule_and_counted() -> None:
    # Ten evaluators agree on unit 1 (4), one answers 1: |z| = 3.0 with the sample SD of 11 votes.
    matrix = {f"e{i}": {1: 4, 2: 3} for i in range(10)} | {"odd": {1: 1, 2: 3}}
    kept, removed = stats.without_outlier_votes(matrix, 2.9)
    assert removed == 1 and kept["odd"] == {2: 3} and kept["e0"] == {1: 4, 2: 3}
    assert stats.without_outlier_votes(matrix, 3.29) == (matrix, 0)  # P.910's bound keeps it


def test_the_settings_turn_rules_on_and_off_and_set_their_bounds() -> None:
    from ratings.screening import Screening, parse

    matrix = {"a": {1: 5, 2: 3, 3: 1}, "b": {1: 5, 2: 3, 3: 1}, "flat": {1: 4, 2: 4, 3: 4}}
    gold = {"b": [("gold/screen", 3)]}
    default = stats.screen(matrix, gold, settings=Screening())
    assert [k for k, s in default.items() if s.excluded] == ["b"]  # the trap rated 3
    lenient = stats.screen(matrix, gold, settings=parse({"gold": {"fail_at_or_below": 2}}))
    assert not any(s.excluded for s in lenient.values()) and lenient["flat"].correlation is None
    strict = stats.screen(
        matrix, gold, settings=parse({"gold": {"on": False}, "vote_variance": {"on": True}})
    )
    assert {k: s.reasons for k, s in strict.items() if s.excluded} == {
        "flat": ["vote variance 0.000 < 0.15 (nearly the same score every time)"]
    }
    assert strict["b"].gold_failures  # shown, though the rule is off
