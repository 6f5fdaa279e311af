"""Quick ground-truth check: real TCP server and client in two namespaces, captured by dumpcap.

The full benchmark with more cases is benchmarks/rd_analysis/run.py; this runs two small cases.
"""

from __future__ import annotations

import importlib.util
import pathlib
import sys

import pytest

_RUN = pathlib.Path(__file__).resolve().parents[3] / "benchmarks" / "rd_analysis" / "run.py"
_spec = importlib.util.spec_from_file_location("rd_analysis_benchmark", _RUN)
bench = sys.modules.setdefault("rd_analysis_benchmark", importlib.util.module_from_spec(_spec))
_spec.loader.exec_module(bench)


@pytest.fixture(autouse=True)
def capable_host():
    try:
        bench.check_host()
    except bench.HostNotCapable as err:
        pytest.skip(f"ground-truth benchmark cannot run here: {err}")


@pytest.mark.netns
@pytest.mark.slow
@pytest.mark.parametrize(
    "case",
    [
        bench.Case("2 conns, 200 kB, 15 ms", 0.015, 200_000, writes=5, conns=2),
        bench.Case("5 Mbit/s tbf, 80 kB, IPv6", 0.010, 80_000, writes=3, rate="5mbit", ipv6=True),
    ],
    ids=lambda c: c.name,
)
def test_the_analysis_matches_a_real_server_within_a_millisecond_and_to_the_byte(case, tmp_path):
    results = bench.run_case(case, updates=3)
    for r in results:
        assert r.updates == 3 and r.timed_out == 0, r
        assert r.unique_bytes_err_max == 0, r
        # The reference is the client application's clock: on a loaded host one update's can lag
        # by a scheduling delay (5.3 ms seen in a fresh-clone run, 2026-11-29). An analysis error
        # (a wrong packet: the write bursts are 2 ms apart) shows in every update, so the median
        # holds the millisecond; the max only a bound a loaded host meets. The accuracy itself is
        # measured in benchmarks/rd_analysis/.
        assert r.t_err_ms_median <= 1.0 and r.t_err_ms_max <= 10.0, r
        assert r.connections == case.conns, r
