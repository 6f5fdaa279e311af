"""A running link changes its conditions (the storage benchmark's reheat over an unimpaired path):
the next packets follow the new profile, the change is recorded, bad changes are refused."""

from __future__ import annotations

import re
import statistics
from pathlib import Path

import pytest

from qoelab.emulation import records
from qoelab.emulation.profile import LinkProfile
from qoelab.emulation.topology import EmulatedLink, LinkError, emulated_link
from qoelab.errors import ParameterError

pytestmark = [pytest.mark.netns, pytest.mark.usefixtures("linkemu_ok")]


def rtts_ms(link: EmulatedLink, count: int = 4) -> list[float]:
    out = link.run_in("client", ["ping", "-n", "-c", str(count), "-i", "0.05", link.server_ip], check=True)
    return [float(x) for x in re.findall(r"time=([0-9.]+) ms", out.stdout)]


def test_a_link_switches_to_unimpaired_and_back_and_records_when(prefix: str, tmp_path: Path) -> None:
    wan = LinkProfile.parse(rate="20mbit", delay="40ms", loss="0%")
    rec = tmp_path / "down.rec"
    with emulated_link(wan, prefix=prefix, backend="userspace", packet_records=rec) as link:
        pid = link.emulator.pid
        assert min(rtts_ms(link)) >= 80.0  # 40 ms each way: never earlier
        with link.switched(link.profile.unimpaired(), "reheat") as entry:
            # The median: one ping a loaded host delayed must not fail this. That no packet in
            # this phase waited the 40 ms is checked below from the emulator's own records.
            assert statistics.median(rtts_ms(link)) < 40.0
            assert entry["reason"] == "reheat" and entry["profile"]["rtt_ms"] == 0.0
        assert min(rtts_ms(link)) >= 80.0
        assert link.emulator.pid == pid  # the same emulator: nothing restarted, no packet lost
        switches = link.describe()["switches"]
        assert [s["reason"] for s in switches] == ["reheat", "end of reheat"]
        assert switches[0]["t_mono_s"] < switches[1]["t_mono_s"]
        assert link.profile.down.delay_s == pytest.approx(0.04)
    # The records' clock is the switches' clock: what reached the rate stage before the first
    # switch or after the second took the 40 ms (an unlimited rate has no rate stage to record).
    recs = records.read(rec)
    fwd = recs[recs["fate"] == records.FORWARDED]
    start, end = (round(s["t_mono_s"] * 1e9) for s in switches)
    waited = (fwd["depart_ns"] - fwd["arrival_ns"]) / 1e6
    before, after = fwd["arrival_ns"] < start, fwd["arrival_ns"] > end
    assert before.any() and after.any()
    assert (waited[before] >= 40).all() and (waited[after] >= 40).all()
    assert not ((fwd["arrival_ns"] > start) & (fwd["depart_ns"] < end) & (waited >= 40)).any()


def test_bad_changes_are_refused_and_the_link_keeps_its_profile(prefix: str) -> None:
    base = LinkProfile.parse(rate="10mbit", delay="5ms", queue="prio", limit="25000b")
    with emulated_link(base, prefix=prefix, backend="userspace") as link:
        with pytest.raises(ParameterError, match="prio cannot change"):
            link.set_profile(LinkProfile.parse(rate="10mbit", delay="5ms"))
        with pytest.raises(ParameterError, match="mtu"):
            link.set_profile(LinkProfile.parse(rate="10mbit", delay="5ms", queue="prio", mtu=9000))
        with pytest.raises(ParameterError, match="loss"):
            link.set_profile(LinkProfile.parse(rate="10mbit", delay="5ms", queue="prio", loss="150%"))
        assert link.profile == base and not link.switches
        assert min(rtts_ms(link, 2)) >= 10.0  # still forwarding, still 5 ms each way
        # A prio link's unimpaired form keeps the rate its queue needs.
        calm = link.profile.unimpaired()
        assert calm.down.rate_bps == 10e6 and calm.down.delay_s == 0 and calm.down.queue == "prio"
        link.set_profile(calm, "calm")
        assert statistics.median(rtts_ms(link)) < 10.0  # the delay is gone (the median: see above)


def test_only_the_userspace_backend_changes_while_running() -> None:
    link = EmulatedLink(prefix="qltx", profile=LinkProfile.parse(delay="5ms"), backend="netem", client_ns="a",
                        server_ns="b", client_if="c", server_if="s")  # fmt: skip
    with pytest.raises(LinkError, match="needs the userspace backend"):
        link.set_profile(LinkProfile.parse())
