"""tc-replay between two namespaces over the emulated link (paper 002's bottleneck: 10 Mbit/s, 20 ms)."""

from __future__ import annotations

import os
import secrets
from pathlib import Path

import pytest

from qoelab.thinclient import replay
from qoelab.thinclient.model import BULK, INTERACTIVE

pytestmark = pytest.mark.netns


@pytest.fixture
def paper_link():
    if os.geteuid() != 0:
        pytest.skip("needs root to create network namespaces")
    if not replay.binary().exists():
        pytest.fail(replay.NOT_BUILT)
    from qoelab.emulation import LinkProfile, emulated_link

    with emulated_link(
        LinkProfile.parse(rate="10mbit", delay="20ms"), prefix="tcr" + secrets.token_hex(3)
    ) as link:
        yield link


def test_every_write_arrives_once_no_sooner_than_the_propagation_delay(paper_link, tmp_path: Path) -> None:
    rows = replay.schedule(pairs=5, duration=4.0, seed=1)
    records = replay.run(rows, paper_link.server_ns, paper_link.client_ns, paper_link.client_ip, tmp_path)
    assert len(records) == len(rows)
    assert sorted((r["conn"], r["kind"], r["nbytes"]) for r in records) == sorted(
        (p.conn, p.kind, p.nbytes) for p in rows
    )
    delays = [r["delay_ms"] for r in records]
    assert None not in delays
    # One way: 20 ms on the emulated WAN; the host's own stack adds little at 40 kbit/s per pair.
    assert min(delays) >= 20.0, min(delays)
    s = replay.summary(records, t0_ms=20.0)
    assert s[INTERACTIVE]["lost"] == 0 and s[BULK]["lost"] == 0
    assert s[INTERACTIVE]["writes"] > 50 and s[BULK]["writes"] > 50
    assert 20.0 <= s[INTERACTIVE]["p50_ms"] < 100.0, s  # 5 pairs use ~2 % of 10 Mbit/s: no queue to speak of
    assert not list(tmp_path.glob("core*"))


def test_separate_connections_put_each_kind_on_its_own_and_a_failing_side_says_why(
    paper_link, tmp_path: Path
) -> None:
    rows = replay.schedule(pairs=2, duration=2.0, seed=2, connections="separate")
    assert {p.conn % 2 for p in rows if p.kind == INTERACTIVE} == {0}
    assert {p.conn % 2 for p in rows if p.kind == BULK} == {1}
    records = replay.run(
        rows, paper_link.server_ns, paper_link.client_ns, paper_link.client_ip, tmp_path / "a"
    )
    assert all(r["delay_ms"] is not None for r in records)
    # Nothing listens at this address: the sender's own sentence, and no process left behind.
    with pytest.raises(replay.ReplayError, match="receiver did not start|bind"):
        replay.run(rows, paper_link.server_ns, paper_link.client_ns, "10.255.255.1", tmp_path / "b")
