"""linkemu's two-class priority queue (``prio=1``) and its per-packet records, on real namespaces.

UDP datagrams go server -> client (the ``down`` direction) over a 1 Mbit/s link so that a queue
builds; the high class is marked DSCP EF (TOS 0xb8) per socket. Every wait is for a condition
(linkemu's counters, records on disk, datagrams received), and the assertions are about orders
and counts, never durations, so a loaded 2-core host only makes the tests slower.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import socket
import struct
import subprocess
import time
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from pyroute2 import IPRoute

from qoelab.emulation import netem, records, userspace
from qoelab.emulation.profile import Direction, LinkProfile
from qoelab.emulation.system import in_netns
from qoelab.emulation.userspace import UserspaceLink
from qoelab.errors import ParameterError, QoelabError

CLIENT_IP, SERVER_IP = "198.18.0.1", "198.18.0.2"
RX_PORT, LOW_PORT, HIGH_PORT = 6000, 6001, 6002
TOS_EF = 0xB8
UDP_IP_OVERHEAD = 28

Prof = partial(LinkProfile, up=Direction(), down=Direction(), seed=7)


needs_tun = pytest.mark.usefixtures("linkemu_ok")
_counter = itertools.count()


class Pair:
    """A client/server namespace pair joined by linkemu, recording the down direction."""

    def __init__(self, down: Direction, rec_dir: Path) -> None:
        self.prefix = f"qlq{next(_counter)}{os.getpid() % 100000}"
        self.cns, self.sns = self.prefix + "c", self.prefix + "s"
        self.records_path = rec_dir / f"{self.prefix}.down.rec"
        self.link = UserspaceLink(
            self.cns,
            self.sns,
            self.prefix + "t0",
            self.prefix + "t1",
            Prof(down=down),
            records_down=self.records_path,
        )
        self.final: dict[str, Any] = {}

    def __enter__(self) -> Pair:
        # `ip netns` rather than pyroute2's netns helpers, which fork.
        for ns in (self.cns, self.sns):
            subprocess.run(["ip", "netns", "add", ns], check=True, capture_output=True)
        try:
            self.link.start()
            sides = ((self.cns, self.prefix + "t0", CLIENT_IP), (self.sns, self.prefix + "t1", SERVER_IP))
            for ns, ifname, addr in sides:
                with in_netns(ns), IPRoute() as ipr:
                    ipr.link("set", index=ipr.link_lookup(ifname="lo")[0], state="up")
                    ipr.addr("add", index=ipr.link_lookup(ifname=ifname)[0], address=addr, prefixlen=30)
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.final = self.link.stop()
        for ns in (self.cns, self.sns):
            subprocess.run(["ip", "netns", "delete", ns], check=False, capture_output=True)

    def ours(self) -> np.ndarray:
        """The records of this test's datagrams (IPv6 housekeeping packets cross the link too)."""
        recs = records.read(self.records_path)
        return recs[recs["dport"] == RX_PORT]

    def wait_decided(self, sent: int, timeout: float = 30.0) -> np.ndarray:
        """Wait until every sent datagram has a record and nothing is left on the delay line.

        stats() makes linkemu flush its records first, so the file is current when it returns.
        """
        deadline = time.monotonic() + timeout
        while True:
            st = self.link.stats()["down"]
            ours = self.ours()
            if len(ours) >= sent and st["queued"] == 0 and st["waiting_high"] + st["waiting_low"] == 0:
                return ours
            if time.monotonic() > deadline:
                raise AssertionError(f"{len(ours)} of {sent} datagrams decided after {timeout} s: {st}")
            time.sleep(0.02)


@contextlib.contextmanager
def sockets(pair: Pair) -> Iterator[tuple[socket.socket, socket.socket, socket.socket]]:
    """(rx in the client namespace, low and high senders in the server namespace)."""
    with in_netns(pair.cns):
        rx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        rx.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
        rx.bind((CLIENT_IP, RX_PORT))
    with in_netns(pair.sns):
        low = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        high = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        high.setsockopt(socket.IPPROTO_IP, socket.IP_TOS, TOS_EF)
        for sock, port in ((low, LOW_PORT), (high, HIGH_PORT)):
            sock.bind((SERVER_IP, port))
            sock.connect((CLIENT_IP, RX_PORT))
    with rx, low, high:
        yield rx, low, high


def datagram(cls: int, i: int, size: int) -> bytes:
    return struct.pack("!BI", cls, i) + b"\0" * (size - 5)


def receive(rx: socket.socket, count: int, timeout: float = 10.0) -> list[tuple[int, int]]:
    """(class, number) of `count` datagrams in receive order (fewer only if the deadline passes)."""
    got: list[tuple[int, int]] = []
    deadline = time.monotonic() + timeout
    while len(got) < count and time.monotonic() < deadline:
        rx.settimeout(max(0.01, deadline - time.monotonic()))
        with contextlib.suppress(TimeoutError):
            got.append(struct.unpack("!BI", rx.recv(65536)[:5]))
    return got


def burst(
    pair: Pair, lows: int, highs: int, low_size: int = 1000, high_size: int = 1000
) -> list[tuple[int, int]]:
    """Send `lows` low datagrams then `highs` high ones as fast as possible; return what arrived."""
    with sockets(pair) as (rx, low, high):
        for i in range(lows):
            low.send(datagram(records.LOW, i, low_size))
        for i in range(highs):
            high.send(datagram(records.HIGH, i, high_size))
        ours = pair.wait_decided(lows + highs)
        forwarded = int(np.sum(ours["fate"] == records.FORWARDED))
        return receive(rx, forwarded)


def check_forwarded_times(recs: np.ndarray) -> None:
    fwd = recs[recs["fate"] == records.FORWARDED]
    assert np.all(fwd["arrival_ns"] <= fwd["start_ns"]), "serialisation started before arrival"
    assert np.all(fwd["start_ns"] < fwd["depart_ns"]), "departed before serialisation ended"
    dropped = recs[recs["fate"] != records.FORWARDED]
    assert np.all(dropped["start_ns"] == -1) and np.all(dropped["depart_ns"] == -1)


# --- priority order ------------------------------------------------------------------------------


@pytest.mark.netns
@needs_tun
def test_high_packets_overtake_queued_low_packets(tmp_path: Path) -> None:
    rate = 1e6
    with Pair(Direction(rate_bps=rate, queue="prio"), tmp_path) as pair:
        got = burst(pair, lows=30, highs=5)
        ours = pair.ours()
    assert len(got) == 35, f"{len(got)} of 35 delivered with no limit reached"
    lows = [i for c, i in got if c == records.LOW]
    highs = [i for c, i in got if c == records.HIGH]
    assert lows == list(range(30)) and highs == list(range(5)), "each class keeps its own order"
    last_high = max(k for k, (c, _i) in enumerate(got) if c == records.HIGH)
    lows_after = sum(1 for c, _i in got[last_high:] if c == records.LOW)
    assert lows_after >= 1, f"no low packet queued behind the highs was overtaken: {got}"

    check_forwarded_times(ours)
    assert np.all(ours["cls"][ours["sport"] == HIGH_PORT] == records.HIGH)
    assert np.all(ours["cls"][ours["sport"] == LOW_PORT] == records.LOW)
    # Strict priority, non-preemptive: no low packet starts while a high one is waiting.
    hi, lo = ours[ours["cls"] == records.HIGH], ours[ours["cls"] == records.LOW]
    for h in hi:
        started_later = lo[lo["start_ns"] >= h["arrival_ns"]]
        assert np.all(started_later["start_ns"] > h["start_ns"]), "a low packet went before a waiting high"
    # Non-preemptive: a high packet starts no earlier than the end of the low one in service.
    for h in hi:
        in_service = lo[lo["start_ns"] < h["arrival_ns"]]
        if len(in_service):
            tx_end = in_service["start_ns"] + in_service["ip_len"].astype(np.int64) * 8 * 10**9 // int(rate)
            assert h["start_ns"] >= tx_end.max() - 1
    assert pair.final["down"]["tx_high_packets"] == 5 and pair.final["down"]["prio"] == 1


@pytest.mark.netns
@needs_tun
def test_fifo_keeps_send_order_for_the_same_burst(tmp_path: Path) -> None:
    with Pair(Direction(rate_bps=1e6), tmp_path) as pair:
        got = burst(pair, lows=30, highs=5)
        ours = pair.ours()
    assert got == [(records.LOW, i) for i in range(30)] + [(records.HIGH, i) for i in range(5)]
    check_forwarded_times(ours)
    ordered = ours[np.argsort(ours["arrival_ns"], kind="stable")]
    assert np.all(np.diff(ordered["start_ns"]) > 0), "FIFO serialises in arrival order"
    assert pair.final["down"]["prio"] == 0 and pair.final["down"]["pushed_out"] == 0
    assert int(np.sum(ours["cls"] == records.HIGH)) == 5  # classified (recorded) even without prio


# --- the shared limit ----------------------------------------------------------------------------


@pytest.mark.netns
@needs_tun
def test_the_byte_limit_is_shared_and_a_high_packet_pushes_low_ones_out(tmp_path: Path) -> None:
    limit = 20_000
    # Low datagrams of 428 IP bytes fill the buffer to within 428 bytes; the high one is 1428
    # bytes, so it fits only by pushing out lows unless three services end between the last
    # low and the high (a 10 ms stall of the sender).
    low_size, high_size = 400, 1400
    with Pair(Direction(rate_bps=1e6, limit_bytes=limit, queue="prio"), tmp_path) as pair:
        got = burst(pair, lows=120, highs=1, low_size=low_size, high_size=high_size)
    final = pair.final["down"]
    recs = records.read(pair.records_path)
    ours = recs[recs["dport"] == RX_PORT]

    # The records and the counters tell the same story, exactly.
    assert len(recs) == final["rx_packets"] == final["records"]
    fates = records.fate_counts(recs)
    assert fates["queue_drop"] == final["dropped_queue"]
    assert fates["pushed_out"] == final["pushed_out"]
    assert fates["loss"] == final["dropped_loss"] == 0
    assert fates["forwarded"] == final["tx_high_packets"] + final["tx_low_packets"] == final["packets"]
    assert final["dropped_queue_high"] == 0
    assert final["max_backlog_bytes"] <= limit
    assert np.all(recs["backlog_bytes"] <= limit)

    (high,) = ours[ours["cls"] == records.HIGH]
    assert high["fate"] == records.FORWARDED
    assert (records.HIGH, 0) in got, "the high packet was not delivered"
    assert high["backlog_bytes"] + high_size + UDP_IP_OVERHEAD > limit, "the buffer was not full"
    pushed = ours[ours["fate"] == records.PUSHED_OUT]
    assert len(pushed) >= 1 and np.all(pushed["cls"] == records.LOW)
    # Pushed out from the tail: every pushed-out low arrived after every low that was served.
    served_lows = ours[(ours["cls"] == records.LOW) & (ours["fate"] == records.FORWARDED)]
    before_high = served_lows[served_lows["arrival_ns"] < high["arrival_ns"]]
    assert pushed["arrival_ns"].min() > before_high["arrival_ns"].max()
    # Enough pushed out to make room, not more.
    freed = int(np.sum(pushed["ip_len"]))
    size = high_size + UDP_IP_OVERHEAD
    assert high["backlog_bytes"] - freed + size <= limit
    assert high["backlog_bytes"] - (freed - (low_size + UDP_IP_OVERHEAD)) + size > limit
    assert int(np.sum(ours["fate"] == records.QUEUE_DROP)) >= 1, "the lows never met a full buffer"
    delivered_lows = sum(1 for c, _i in got if c == records.LOW)
    assert delivered_lows == int(np.sum(served_lows["fate"] == records.FORWARDED))

    t, backlog = records.backlog_series(recs)
    assert len(t) == len(recs) and np.all(np.diff(t) >= 0) and backlog.max() <= limit


@pytest.mark.netns
@needs_tun
def test_a_high_packet_is_dropped_only_when_pushing_out_cannot_make_room(tmp_path: Path) -> None:
    limit = 5000
    # 3 lows of 428 bytes (one goes into service at once), then 10 highs of 1428: the buffer
    # fills with highs, the two waiting lows are pushed out, and later highs find no low to push.
    with Pair(Direction(rate_bps=1e6, limit_bytes=limit, queue="prio"), tmp_path) as pair:
        got = burst(pair, lows=3, highs=10, low_size=400, high_size=1400)
    final = pair.final["down"]
    recs = records.read(pair.records_path)
    ours = recs[recs["dport"] == RX_PORT]
    high_drops = ours[(ours["cls"] == records.HIGH) & (ours["fate"] == records.QUEUE_DROP)]
    assert len(high_drops) >= 1 and final["dropped_queue_high"] == len(high_drops)
    assert np.all(high_drops["backlog_bytes"] + 1400 + UDP_IP_OVERHEAD > limit)
    pushed = ours[ours["fate"] == records.PUSHED_OUT]
    assert 1 <= len(pushed) <= 2 and np.all(pushed["cls"] == records.LOW)
    # Lows are sacrificed before any high is dropped (records are written in decision order).
    order = np.flatnonzero(recs["dport"] == RX_PORT)
    assert (
        order[ours["fate"] == records.PUSHED_OUT].max()
        < order[(ours["cls"] == records.HIGH) & (ours["fate"] == records.QUEUE_DROP)].min()
    )
    first_low = ours[ours["sport"] == LOW_PORT][np.argmin(ours[ours["sport"] == LOW_PORT]["arrival_ns"])]
    assert first_low["fate"] == records.FORWARDED, "the packet in service is never pushed out"
    assert sum(1 for c, _i in got if c == records.HIGH) == 10 - len(high_drops)


# --- records of a TCP connection -----------------------------------------------------------------


@pytest.mark.netns
@needs_tun
def test_records_parse_a_tcp_connection_through_emulated_link(
    tmp_path: Path, prefix: str, userspace_ok: None
) -> None:
    from qoelab.emulation.topology import emulated_link, records_paths

    path = tmp_path / "link.rec"
    profile = LinkProfile.parse(rate="10mbit", delay="2ms", queue="prio")
    payload = b"x" * 1000
    with emulated_link(profile, prefix=prefix, backend="userspace", packet_records=path) as link:
        with in_netns(link.server_ns):
            server = socket.create_server((link.server_ip, 5601))
        with in_netns(link.client_ns):
            client = socket.create_connection((link.server_ip, 5601), timeout=10)
        with server, client:
            conn, _ = server.accept()
            with conn:
                client.sendall(payload)
                conn.settimeout(10)
                got = b""
                while len(got) < len(payload):
                    chunk = conn.recv(65536)
                    assert chunk, "connection closed early"
                    got += chunk
    up_path, down_path = records_paths(path)
    assert down_path == path and up_path.name == "link.up.rec"
    up, down = records.read(up_path), records.read(down_path)
    check_forwarded_times(up)
    check_forwarded_times(down)

    syn_flags = records.TCP_SYN | records.TCP_ACK
    up_tcp = up[up["dport"] == 5601]
    syns = up_tcp[(up_tcp["tcp_flags"] & syn_flags) == records.TCP_SYN]
    assert len(syns) >= 1 and syns[0]["payload_len"] == 0 and syns[0]["fate"] == records.FORWARDED
    data = up_tcp[up_tcp["payload_len"] > 0]
    assert int(data["payload_len"].sum()) >= len(payload)
    first = data[0]
    assert first["payload_len"] == len(payload) and first["sport"] == syns[0]["sport"]
    assert first["seq"] == (int(syns[0]["seq"]) + 1) % 2**32
    assert first["ip_len"] == first["payload_len"] + 20 + 32  # IPv4 + TCP with timestamps
    synacks = down[(down["sport"] == 5601) & ((down["tcp_flags"] & syn_flags) == syn_flags)]
    assert len(synacks) >= 1 and synacks[0]["dport"] == syns[0]["sport"]


@pytest.mark.netns
def test_packet_records_need_the_userspace_backend(tmp_path: Path, prefix: str, netns_ok: None) -> None:
    from qoelab.emulation.topology import LinkError, emulated_link

    with (
        pytest.raises(LinkError, match="packet records need the userspace backend"),
        emulated_link(
            LinkProfile.parse(rate="10mbit"), prefix=prefix, backend="veth", packet_records=tmp_path / "r"
        ),
    ):
        pass


# --- bad input -----------------------------------------------------------------------------------


def test_bad_queue_values_name_the_field() -> None:
    with pytest.raises(ParameterError, match="must be one of fifo, prio") as err:
        LinkProfile.parse(rate="1mbit", queue="bogus")
    assert err.value.field == "queue"
    with pytest.raises(ParameterError, match="prio needs a rate") as err:
        LinkProfile.parse(queue="prio")
    assert err.value.field == "queue"
    with pytest.raises(ParameterError) as err:
        Direction(rate_bps=1e6, queue="wfq").validate("up_")
    assert err.value.field == "up_queue"
    with pytest.raises(ParameterError, match="needs the userspace backend") as err:
        netem.netem_options(Direction(rate_bps=1e6, queue="prio"), 1)
    assert err.value.field == "queue"


def test_queue_round_trips_through_json_and_old_json_still_loads() -> None:
    prof = LinkProfile.parse(rate="10mbit", limit="25000b", queue="prio")
    assert prof.up.queue == prof.down.queue == "prio"
    assert LinkProfile.from_json(prof.to_json()) == prof
    old = prof.to_json()
    for d in ("up", "down"):
        old[d].pop("queue")
    assert LinkProfile.from_json(old).down.queue == "fifo"
    assert "queue prio" in prof.down.describe()
    assert "prio=1" in userspace.direction_spec(prof.down, "down")
    assert "prio" not in userspace.direction_spec(LinkProfile.parse(rate="10mbit").down, "down")


@pytest.mark.skipif(not userspace.binary_path().exists(), reason="linkemu is not built")
def test_linkemu_refuses_prio_without_a_rate() -> None:
    # Unvalidated on purpose: linkemu itself must refuse, naming the key, before any namespace.
    link = UserspaceLink("qlq-none-c", "qlq-none-s", "x0", "x1", Prof(down=Direction(queue="prio")))
    with pytest.raises(QoelabError, match=r"rejected its arguments .*prio=1 needs rate>0"):
        link.start()


def test_records_reader_ignores_a_partial_tail_and_orders_the_backlog(tmp_path: Path) -> None:
    recs = np.zeros(3, dtype=records.DTYPE)
    recs["arrival_ns"] = [3_000_000_000, 1_000_000_000, 2_000_000_000]
    recs["backlog_bytes"] = [30, 10, 20]
    recs["fate"] = [records.FORWARDED, records.PUSHED_OUT, records.QUEUE_DROP]
    path = tmp_path / "r.rec"
    path.write_bytes(recs.tobytes() + b"\1\2\3")
    back = records.read(path)
    assert len(back) == 3 and back.dtype.itemsize == 48
    t, backlog = records.backlog_series(back)
    assert t.tolist() == [0.0, 1.0, 2.0] and backlog.tolist() == [10, 20, 30]
    assert records.fate_counts(back) == {
        "forwarded": 1,
        "queue_drop": 1,
        "loss": 0,
        "pushed_out": 1,
        "other_drop": 0,
        "head_drop": 0,
        "aqm_drop": 0,
    }
