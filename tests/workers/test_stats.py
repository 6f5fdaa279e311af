"""The lab's one confidence interval (qoelab.stats), checked against Student-t table values."""

from __future__ import annotations

import math

import pytest

from qoelab.stats import Stat, mean_ci, t_half_width


def test_the_half_width_is_the_t_table_value_times_the_standard_error() -> None:
    # t(0.975, 4) = 2.776 and t(0.975, 9) = 2.262 (any t table).
    assert t_half_width(1.0, 5) == pytest.approx(2.776 / math.sqrt(5), abs=1e-3)
    assert t_half_width(2.0, 10) == pytest.approx(2.0 * 2.262 / math.sqrt(10), abs=1e-3)
    assert t_half_width(1.0, 10, confidence=0.99) > t_half_width(1.0, 10)
    with pytest.raises(ValueError, match="n >= 2 values, got n = 1"):
        t_half_width(1.0, 1)


def test_mean_ci_leaves_out_missing_values_and_gives_no_interval_below_two() -> None:
    s = mean_ci([1.0, None, 2.0, float("nan"), 3.0])
    assert (s.n, s.mean) == (3, 2.0)
    assert s.half_width == pytest.approx(4.303 * 1.0 / math.sqrt(3), abs=1e-3)  # t(0.975, 2) = 4.303
    assert s.ci_low == pytest.approx(2.0 - s.half_width) and s.has_ci
    assert mean_ci([7.0]) == Stat(1, 7.0, None, None) and mean_ci([7.0]).half_width is None
    assert mean_ci([]) == Stat(0, None, None, None)
