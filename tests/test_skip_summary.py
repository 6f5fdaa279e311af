"""The run ends with one line counting skips by reason (tests/fixtures/skip_summary.py), and an
unregistered marker is an error (--strict-markers), in a real inner pytest run."""

from __future__ import annotations

from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent


@pytest.fixture
def inner(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    """An inner pytest in its own process (pytest-django set up this one), with the summary plugin."""
    monkeypatch.setenv("PYTHONPATH", str(TESTS))
    pytester.makeconftest("pytest_plugins = ['fixtures.skip_summary']")
    return pytester


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest_subprocess("-p", "no:django", "-p", "no:cacheprovider", *args)


def test_the_last_line_counts_skips_by_reason(inner: pytest.Pytester) -> None:
    inner.makepyfile(
        """
        import pytest

        @pytest.mark.parametrize("n", [1, 2])
        def test_a(n):
            pytest.skip("no sch_netem in this kernel")

        def test_b():
            pytest.skip("needs Linux 6.15")

        def test_c():
            pass
        """
    )
    result = run(inner)
    result.assert_outcomes(passed=1, skipped=3)
    lines = [line for line in result.outlines if line.startswith("skips:")]
    assert lines == ["skips: 3 — 2 × no sch_netem in this kernel; 1 × needs Linux 6.15"], result.outlines


def test_a_run_without_skips_says_so(inner: pytest.Pytester) -> None:
    inner.makepyfile("def test_c():\n    pass\n")
    assert "skips: none" in run(inner).outlines


def test_an_unregistered_marker_is_an_error(inner: pytest.Pytester) -> None:
    inner.makepyfile("import pytest\n\n@pytest.mark.slwo\ndef test_c():\n    pass\n")
    result = run(inner, "--strict-markers")
    assert result.ret != 0 and any("'slwo' not found in `markers`" in line for line in result.outlines)
