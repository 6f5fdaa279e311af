"""linkemu's queue disciplines beside drop-tail: drop-head, CoDel (RFC 8289) and PIE (RFC 8033), on
real namespaces with real UDP datagrams (server -> client, the ``down`` direction).

Each decision is checked against its RFC from the per-packet records, in the emulator's virtual
time (a service's start, a packet's arrival), so the checks hold on a loaded host: CoDel's first
drop comes one interval after the sojourn time first exceeded the target, and its later drops
follow the control law t + interval / sqrt(count); PIE drops nothing during its burst allowance,
then drops arriving packets and holds the queueing delay far below what drop-tail gives; drop-head
keeps the newest packets.
"""

from __future__ import annotations

import math
import time
from pathlib import Path

import numpy as np
import pytest
from test_linkemu_prio import UDP_IP_OVERHEAD, Pair, burst, datagram, needs_tun, sockets

from qoelab.emulation import records, userspace
from qoelab.emulation.linkparams import LinkParams
from qoelab.emulation.profile import Direction, LinkProfile
from qoelab.emulation.userspace import UserspaceLink
from qoelab.errors import ParameterError, QoelabError

SIZE = 1000  # UDP payload bytes
PKT = SIZE + UDP_IP_OVERHEAD
RATE = 1e6
TX_NS = PKT * 8 * 10**9 // int(RATE)  # one packet's serialisation at RATE


def decided(pair: Pair, sent: int) -> np.ndarray:
    ours = pair.wait_decided(sent, timeout=60.0)
    return ours[np.argsort(ours["arrival_ns"], kind="stable")]


@pytest.mark.netns
@needs_tun
def test_drophead_drops_the_oldest_waiting_packet_never_the_arriving_one(tmp_path: Path) -> None:
    limit = 10
    with Pair(Direction(rate_bps=RATE, limit_pkts=limit, queue="drophead"), tmp_path) as pair:
        got = burst(pair, lows=60, highs=0, low_size=SIZE)
        ours = decided(pair, 60)
    final = pair.final["down"]
    fates = records.fate_counts(ours)
    assert fates["queue_drop"] == 0, "drop-head never drops the arriving packet while it can make room"
    assert fates["head_drop"] >= 1 and fates["head_drop"] + fates["forwarded"] == 60
    assert final["dropped_head"] >= fates["head_drop"] and final["qdisc"] == "drophead"
    numbers = [i for _c, i in got]
    assert numbers == sorted(numbers) and numbers[-1] == 59, "served in order, and the newest always"
    # Each head drop took the oldest packet waiting when an arrival found the queue full: no older
    # packet started service after it was dropped (however the sender's burst was spread in time).
    heads = ours[ours["fate"] == records.HEAD_DROP]
    fwd = ours[ours["fate"] == records.FORWARDED]
    for h in heads:
        older = fwd[fwd["arrival_ns"] < h["arrival_ns"]]
        assert np.all(older["start_ns"] <= h["start_ns"]), (
            "a newer packet was dropped while an older one waited"
        )
    assert np.all(ours["backlog_bytes"] <= limit * PKT)


@pytest.mark.netns
@needs_tun
def test_codel_drops_one_interval_after_the_target_then_by_its_control_law(tmp_path: Path) -> None:
    target_ns, interval_ns, n = 5_000_000, 100_000_000, 300
    down = Direction(rate_bps=RATE, queue="codel", queue_target_s=target_ns / 1e9,
                     queue_interval_s=interval_ns / 1e9)  # fmt: skip
    # One burst: every packet's sojourn grows with its place in the queue, whenever the sender
    # ran, so CoDel's state depends only on the emulator's virtual times.
    with Pair(down, tmp_path) as pair, sockets(pair) as (_rx, low, _high):
        for i in range(n):
            low.send(datagram(records.LOW, i, SIZE))
        ours = decided(pair, n)
    final = pair.final["down"]
    drops = ours[ours["fate"] == records.AQM_DROP]
    fwd = ours[ours["fate"] == records.FORWARDED]
    assert final["qdisc"] == "codel" and final["dropped_aqm"] >= len(drops) >= 10
    assert records.fate_counts(ours)["queue_drop"] == 0

    # A CoDel drop's record holds the time it was decided, at a dequeue (a service start).
    t = np.sort(drops["start_ns"])
    assert np.all(t - drops["arrival_ns"][np.argsort(drops["start_ns"])] >= target_ns)
    # First drop: one interval after the first dequeue whose sojourn reached the target.
    sojourn = fwd["start_ns"] - fwd["arrival_ns"]
    first_above = fwd["start_ns"][sojourn >= target_ns].min()
    assert interval_ns <= t[0] - first_above <= interval_ns + TX_NS + 1, (t[0] - first_above) / 1e6
    # Later drops at the first dequeue at or after D(k+1) = D(k) + interval / sqrt(k), D(1) the
    # first drop; dequeues come at least every packet time while the queue holds packets.
    due = float(t[0])
    for k in range(1, len(t)):
        due += interval_ns / math.sqrt(k)
        assert due - 1 <= t[k] <= due + TX_NS + 1, f"drop {k + 1} at {(t[k] - t[0]) / 1e6:.3f} ms"
        due = float(t[k]) if t[k] > due + TX_NS else due


@pytest.mark.netns
@needs_tun
def test_pie_waits_out_its_burst_allowance_then_holds_the_delay_down(tmp_path: Path) -> None:
    seconds, offered = 4.0, 2 * RATE  # twice the link's rate: drop-tail's queue would grow all along
    with Pair(Direction(rate_bps=RATE, queue="pie"), tmp_path) as pair, sockets(pair) as (_rx, low, _high):
        gap, start, i = PKT * 8 / offered, time.monotonic(), 0
        while i * gap < seconds:
            ahead = start + i * gap - time.monotonic()
            if ahead > 0:
                time.sleep(ahead)
            low.send(datagram(records.LOW, i, SIZE))
            i += 1
        ours = decided(pair, i)
    final = pair.final["down"]
    drops = ours[ours["fate"] == records.AQM_DROP]
    fwd = ours[ours["fate"] == records.FORWARDED]
    assert final["qdisc"] == "pie" and final["dropped_aqm"] >= len(drops) > 0
    assert np.all(drops["start_ns"] == -1), "PIE drops on arrival"
    # No drop while the 150 ms burst allowance lasts (it shrinks by one 15 ms update per update).
    first = ours["arrival_ns"].min()
    assert drops["arrival_ns"].min() - first >= 150_000_000 - 15_000_000
    # Drop-tail would hold about (offered - rate) x 4 s = 4 s of queue at the end; PIE holds the
    # delay near its 15 ms reference once its probability has grown (about a second here).
    late = fwd[fwd["arrival_ns"] >= first + int(2.5e9)]
    sojourn_ms = (late["start_ns"] - late["arrival_ns"]) / 1e6
    assert len(late) > 20 and float(np.median(sojourn_ms)) < 100, np.percentile(sojourn_ms, [50, 90])
    assert 0.2 < len(drops) / len(ours) < 0.8, "about half must go to bring twice the rate down"


@pytest.mark.netns
@needs_tun
def test_codel_on_a_trace_link(tmp_path: Path) -> None:
    """A served queue takes its service times from a trace as the FIFO does."""
    trace = tmp_path / "t.trace"
    trace.write_text("".join(f"{ms}\n" for ms in range(1, 101)))  # one opportunity per ms: 12 Mbit/s
    with Pair(Direction(trace=str(trace), queue="codel"), tmp_path) as pair:
        got = burst(pair, lows=50, highs=0, low_size=1500 - UDP_IP_OVERHEAD)
        ours = decided(pair, 50)
    fwd = ours[ours["fate"] == records.FORWARDED]
    assert len(got) == len(fwd) == 50, "50 ms of queue is within CoDel's first interval"
    # Each 1500-byte packet takes one whole opportunity: it starts when it arrives or when the one
    # before it left, and leaves at the next opportunity on the trace's 1 ms grid.
    order = np.argsort(fwd["start_ns"])
    arrivals, starts, departs = (
        fwd[k][order].astype(np.int64) for k in ("arrival_ns", "start_ns", "depart_ns")
    )
    assert np.array_equal(starts[1:], np.maximum(arrivals[1:], departs[:-1]))
    assert np.all((departs - starts > 0) & (departs - starts <= 1_000_000 + 1_000))
    off_grid = (departs - departs[0] + 500) % 1_000_000
    assert np.all(off_grid <= 1_000), "departures off the trace's millisecond grid"


# --- parameters and bad input --------------------------------------------------------------------


def test_queue_parameters_reach_linkemu_and_round_trip() -> None:
    prof = LinkProfile.parse(rate="10mbit", queue="pie", queue_target="20ms", queue_max_burst="100ms")
    assert prof.up.queue == prof.down.queue == "pie"
    spec = userspace.direction_spec(prof.down, "down")
    assert "qdisc=pie" in spec and "target=0.02" in spec and "max_burst=0.1" in spec
    assert "interval=" not in spec, "unset parameters stay the RFC's defaults, chosen by linkemu"
    assert LinkProfile.from_json(prof.to_json()) == prof
    assert "queue pie, target 20ms, max_burst 100ms" in prof.down.describe()
    assert prof.needs_userspace.startswith("the pie queue")
    assert "qdisc" not in userspace.direction_spec(LinkProfile.parse(rate="10mbit").down, "down")


def test_bad_queue_parameters_name_the_field() -> None:
    with pytest.raises(ParameterError, match="needs a rate, a trace or an outage") as err:
        LinkProfile.parse(queue="codel")
    assert err.value.field == "queue"
    with pytest.raises(ParameterError, match="applies to the pie queue only") as err:
        LinkProfile.parse(rate="1mbit", queue="codel", queue_max_burst="1s")
    assert err.value.field == "queue_max_burst"
    with pytest.raises(ParameterError, match="codel or pie queue only") as err:
        LinkProfile.parse(rate="1mbit", queue_target="5ms")
    assert err.value.field == "queue_target"
    with pytest.raises(ParameterError, match="between 100us and 60s") as err:
        Direction(rate_bps=1e6, queue="codel", queue_interval_s=120.0).validate("up_")
    assert err.value.field == "up_queue_interval"


def test_link_params_check_the_queue_at_submit() -> None:
    ok = LinkParams(rate="5mbit", queue="codel", queue_target="10ms")
    assert ok.to_profile().down.queue_target_s == pytest.approx(0.01)
    assert LinkParams(link_trace="Verizon-LTE-short.down", queue="pie").to_profile().down.queue == "pie"
    with pytest.raises(ValueError, match="codel needs a rate, a link_trace or an outage"):
        LinkParams(queue="codel")
    with pytest.raises(ValueError, match="applies to the pie queue only"):
        LinkParams(rate="5mbit", queue="codel", queue_max_burst="1s")
    with pytest.raises(ValueError, match="queue"):
        LinkParams(rate="5mbit", queue="red")


@needs_tun  # builds linkemu when it is missing; skips, saying why, without root or TUN
@pytest.mark.parametrize(
    ("down", "message"),
    [
        (Direction(queue="codel"), "qdisc=codel needs a rate, a trace or an outage"),
        (Direction(rate_bps=1e6, queue="prio", queue_target_s=0.01), "target= and interval= need qdisc"),
    ],
)
def test_linkemu_refuses_what_the_profile_would(down: Direction, message: str) -> None:
    # Unvalidated on purpose: linkemu itself must refuse, naming the key, before any namespace.
    link = UserspaceLink("qla-none-c", "qla-none-s", "x0", "x1", LinkProfile(up=Direction(), down=down))
    with pytest.raises(QoelabError, match=f"rejected its arguments .*{message}"):
        link.start()
