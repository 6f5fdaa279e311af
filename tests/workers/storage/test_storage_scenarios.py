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


def test_the_tables_name_a_trials_row_and_column_as_the_thesis_does() -> None:
    from qoelab.storage import thesis_tables as tt

    def resolved(**kw: object) -> dict:
        return StorageBenchParams(**kw).model_dump(mode="json")

    assert tt.network_label(resolved()) == "100 Mbit/s ideal"
    assert tt.network_label(resolved(rate="1gbit", rtt="50ms", loss="0.1%")) == "1 Gbit/s +50 ms, 0.1 %"
    assert tt.network_label(resolved(**SCENARIOS["realistic"].job_params())) == "100 Mbit/s realistic"
    assert tt.network_label(resolved(rtt="20ms", loss="1%")) == "100 Mbit/s 20 ms RTT, 1 %"
    assert tt.system_label(resolved(target="iscsi", scheduler="bfq")) == "iSCSI bfq (CFQ)"
    assert tt.system_label({"target": "iscsi"}) == "iSCSI mq-deadline (deadline)"
    assert tt.system_label(resolved(target="swift")) == "Swift"
    # Table 6.2, 1 Gbit/s realistic, iSCSI CFQ: 196 IOPS (notes §5.11)
    assert tt.reference("varmail")[("1 Gbit/s realistic", "iSCSI bfq (CFQ)")] == 196
    assert len(tt.reference("postmark_s")) == 8 * 4
