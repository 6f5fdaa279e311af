"""Thesis 001's named network scenarios: RTT/2 each way, loss and jitter on both directions."""

from __future__ import annotations

import pytest

from qoelab.errors import ParameterError
from qoelab.jobs.storage_bench import StorageBenchParams
from qoelab.storage.scenarios import SCENARIOS, scenario


def test_every_scenario_is_the_thesis_row_split_per_direction() -> None:
    for key, rtt, loss, jitter in (("ideal", 0, 0, 0), ("latency", 50, 0, 0), ("loss", 50, 0.1, 0),
                                   ("realistic", 50, 0.1, 10)):  # fmt: skip
        p = StorageBenchParams(**scenario(key).job_params("100mbit")).to_profile()
        for d in (p.up, p.down):
            assert d.rate_bps == 100e6 and d.delay_s == pytest.approx(rtt / 2e3)
            assert d.loss_pct == pytest.approx(loss) and d.jitter_s == pytest.approx(jitter / 1e3)
            assert d.reorder == bool(jitter) and (d.jitter_dist == "normal" or not jitter)
    assert StorageBenchParams(**SCENARIOS["realistic"].job_params("1gbit")).to_profile().down.rate_bps == 1e9


def test_unknown_names_are_refused_naming_the_field() -> None:
    with pytest.raises(ParameterError, match="scenario: must be one of ideal, latency, loss, realistic"):
        scenario("lan")
    with pytest.raises(ParameterError, match="rate: thesis scenarios run at 100mbit or 1gbit"):
        SCENARIOS["ideal"].job_params("10mbit")


def test_the_rounds_time_limit_is_not_the_links_queue() -> None:
    """``time_limit`` (the thesis' 90 s per round) once shared its name with the link's queue limit,
    which made a 45 s round a 45-packet queue; the queue stays at netem's 1000 packets."""
    from qoelab.emulation.profile import DEFAULT_LIMIT_PKTS

    p = StorageBenchParams(rtt="50ms", time_limit="45s").to_profile()
    for d in (p.up, p.down):
        assert d.limit_pkts is None and d.queue_limit_bytes(1500) == DEFAULT_LIMIT_PKTS * 1500
