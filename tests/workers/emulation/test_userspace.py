"""The userspace link emulator (linkemu + UserspaceLink) on real namespaces, TUN devices and traffic.

Every test builds its own client/server namespace pair named ``qlu<n><pid>``, starts the real
linkemu between them and removes both namespaces afterwards. Tolerances are wide enough for a
loaded 2-core VM; the accuracy grid is in benchmarks/link_accuracy.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import re
import signal
import socket
import statistics
import struct
import subprocess
import sys
import textwrap
import time
from functools import partial
from pathlib import Path

import psutil
import pytest
from pyroute2 import IPRoute
from scipy.stats import binomtest

from qoelab.emulation import userspace
from qoelab.emulation.profile import Direction, LinkProfile
from qoelab.emulation.system import in_netns
from qoelab.emulation.userspace import UserspaceLink
from qoelab.errors import ParameterError, QoelabError

CLIENT_IP, SERVER_IP = "198.18.0.1", "198.18.0.2"


# The real profile types, with defaults so a test names only what it sets (no validation on
# construction: UserspaceLink.start() validates, which one test relies on).
Dir = Direction
Prof = partial(LinkProfile, up=Direction(), down=Direction(), seed=7)


pytestmark = [pytest.mark.netns, pytest.mark.usefixtures("linkemu_ok")]

_counter = itertools.count()


class Pair:
    """A client/server namespace pair joined by a running UserspaceLink."""

    def __init__(self, profile: LinkProfile) -> None:
        n = next(_counter)
        self.prefix = f"qlu{n}{os.getpid() % 100000}"
        self.cns, self.sns = self.prefix + "c", self.prefix + "s"
        self.cif, self.sif = self.prefix + "t0", self.prefix + "t1"
        self.link = UserspaceLink(self.cns, self.sns, self.cif, self.sif, profile)

    def __enter__(self) -> Pair:
        # `ip netns` rather than pyroute2's netns/NetNS, which fork (unsafe in a threaded process).
        for ns in (self.cns, self.sns):
            subprocess.run(["ip", "netns", "add", ns], check=True, capture_output=True)
        try:
            self.link.start()
            for ns, ifname, addr in ((self.cns, self.cif, CLIENT_IP), (self.sns, self.sif, SERVER_IP)):
                with in_netns(ns), IPRoute() as ipr:
                    ipr.link("set", index=ipr.link_lookup(ifname="lo")[0], state="up")
                    idx = ipr.link_lookup(ifname=ifname)[0]
                    ipr.addr("add", index=idx, address=addr, prefixlen=30)
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.link.stop()
        for ns in (self.cns, self.sns):
            subprocess.run(["ip", "netns", "delete", ns], check=False, capture_output=True)

    def run(self, ns: str, *argv: str, timeout: float = 30) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["ip", "netns", "exec", ns, *argv], capture_output=True, text=True, timeout=timeout, check=True
        )

    def links(self, ns: str) -> list[str]:
        with in_netns(ns), IPRoute() as ipr:
            return [link.get("ifname") for link in ipr.get_links()]


def udp_pair(pair: Pair) -> tuple[socket.socket, socket.socket]:
    with in_netns(pair.sns):
        rx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        rx.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
        rx.bind((SERVER_IP, 5999))
    with in_netns(pair.cns):
        tx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        tx.connect((SERVER_IP, 5999))
    return tx, rx


def send_sequence(
    pair: Pair, count: int, size: int = 200, gap_s: float = 0.0, settle_s: float = 0.5
) -> list[int]:
    """Send `count` numbered UDP datagrams client -> server; return the numbers received, in order."""
    tx, rx = udp_pair(pair)
    got: list[int] = []
    pad = b"\0" * (size - 4)
    with tx, rx:
        rx.setblocking(False)
        for i in range(count):
            tx.send(struct.pack("!I", i) + pad)
            if gap_s:
                time.sleep(gap_s)
            with contextlib.suppress(BlockingIOError):
                while True:
                    got.append(struct.unpack("!I", rx.recv(65536)[:4])[0])
        deadline = time.monotonic() + settle_s
        rx.settimeout(0.05)
        while time.monotonic() < deadline:
            with contextlib.suppress(TimeoutError):
                got.append(struct.unpack("!I", rx.recv(65536)[:4])[0])
    return got


def ping_rtts_ms(pair: Pair, count: int, interval: float = 0.02, size: int = 56) -> list[float]:
    out = pair.run(pair.cns, "ping", "-n", "-c", str(count), "-i", str(interval), "-s", str(size), SERVER_IP)
    return [float(tok.split("=")[1]) for tok in out.stdout.split() if tok.startswith("time=")]


# --- delay, rate, loss --------------------------------------------------------------------------


def test_it_adds_the_configured_one_way_delay_in_each_direction() -> None:
    prof = Prof(up=Dir(delay_s=0.030), down=Dir(delay_s=0.010))
    with Pair(prof) as pair:
        rtts = ping_rtts_ms(pair, 30)
        stats = pair.link.stats()
    assert len(rtts) == 30
    med = statistics.median(rtts)
    assert 40.0 <= med <= 40.6, f"median RTT {med} ms for 30 + 10 ms one-way"
    assert min(rtts) >= 40.0
    assert stats["up"]["packets"] >= 30 and stats["down"]["packets"] >= 30


def test_it_serialises_tcp_at_the_configured_rate() -> None:
    rate = 20e6
    prof = Prof(up=Dir(rate_bps=rate, delay_s=0.005), down=Dir(rate_bps=rate, delay_s=0.005))
    with Pair(prof) as pair:
        server = subprocess.Popen(["ip", "netns", "exec", pair.sns, "iperf3", "-s", "-1", "-p", "5399"])
        try:
            time.sleep(0.3)
            out = pair.run(
                pair.cns, "iperf3", "-c", SERVER_IP, "-p", "5399", "-t", "3", "-O", "1", "-J", timeout=20
            )
        finally:
            server.wait(timeout=10)
    goodput = json.loads(out.stdout)["end"]["sum_received"]["bits_per_second"]
    # TCP payload is 1448 of 1500 bytes at IP level: 96.5 % is the ceiling.
    assert 0.90 * rate <= goodput <= 0.975 * rate, f"goodput {goodput / 1e6:.2f} Mbit/s at 20 Mbit/s"


def test_it_drops_udp_at_the_configured_loss_rate_within_the_binomial_interval() -> None:
    n, pct = 3000, 5.0
    with Pair(Prof(up=Dir(loss_pct=pct), seed=11)) as pair:
        got = send_sequence(pair, n, gap_s=0.0001)
        stats = pair.link.stats()
    lost = n - len(set(got))
    ci = binomtest(lost, n, pct / 100).proportion_ci(confidence_level=0.999)
    assert ci.low <= pct / 100 <= ci.high, f"{lost}/{n} lost at {pct} %"
    assert stats["up"]["dropped_loss"] >= lost


def test_it_loses_packets_in_bursts_under_the_gilbert_elliott_model() -> None:
    def mean_burst(prof: LinkProfile) -> tuple[float, float]:
        with Pair(prof) as pair:
            got = set(send_sequence(pair, 4000, gap_s=0.0001))
        lost = [i not in got for i in range(4000)]
        bursts = [len(list(g)) for k, g in itertools.groupby(lost) if k]
        return statistics.mean(bursts), sum(lost) / len(lost)

    # p=1 %, r=20 %, all lost in Bad, none in Good: mean burst 1/r = 5, loss p/(p+r) = 4.8 %.
    ge_burst, ge_loss = mean_burst(Prof(up=Dir(gemodel=(1.0, 20.0, 100.0, 0.0)), seed=3))
    bern_burst, _ = mean_burst(Prof(up=Dir(loss_pct=4.8), seed=3))
    assert 3.5 <= ge_burst <= 7.0, f"GE mean burst {ge_burst}"
    assert 0.02 <= ge_loss <= 0.09, f"GE loss {ge_loss}"
    assert bern_burst < 1.3, f"Bernoulli mean burst {bern_burst}"


def test_it_drops_tail_when_the_rate_queue_is_full() -> None:
    # 1 Mbit/s: a 1028-byte IP packet takes 8.2 ms, so a 100-packet burst meets a full queue.
    prof = Prof(up=Dir(rate_bps=1e6, limit_pkts=10))
    with Pair(prof) as pair:
        got = send_sequence(pair, 100, size=1000, settle_s=1.5)
        stats = pair.link.stats()["up"]
    # The client's own IPv6 housekeeping (neighbour discovery, MLD) may hold a place in the queue
    # when the burst comes: those packets are the link's others.
    others = stats["packets"] - len(got)
    assert 10 - others <= len(got) <= 12, f"{len(got)} delivered through a 10-packet queue ({others} others)"
    assert got == sorted(got)
    assert stats["dropped_queue"] >= 100 - len(got) - 2
    assert stats["max_backlog_packets"] == 10


def test_it_limits_the_queue_in_bytes() -> None:
    prof = Prof(up=Dir(rate_bps=1e6, limit_bytes=5000))
    with Pair(prof) as pair:
        got = send_sequence(pair, 50, size=1000, settle_s=1.0)
        stats = pair.link.stats()["up"]
    # 4 x 1028 bytes fit in 5000; a 5th would not.
    assert 4 <= len(got) <= 6, f"{len(got)} delivered through a 5000-byte queue"
    assert stats["max_backlog_bytes"] <= 5000


def test_it_never_reorders_with_jitter_when_reorder_is_off_and_does_when_on() -> None:
    def order(reorder: bool) -> list[int]:
        d = Dir(delay_s=0.020, jitter_s=0.010, reorder=reorder)
        with Pair(Prof(up=d, seed=5)) as pair:
            return send_sequence(pair, 400, gap_s=0.001, settle_s=0.3)

    kept = order(False)
    assert len(kept) == 400 and kept == sorted(kept)
    shuffled = order(True)
    assert len(shuffled) == 400 and shuffled != sorted(shuffled)


def test_jitter_is_uniform_within_bounds_by_default_and_normal_with_sigma_jitter() -> None:
    def one_way_ms(dist: str) -> list[float]:
        # reorder on, so keeping order does not reshape the distribution; jitter only upstream
        d = Dir(delay_s=0.030, jitter_s=0.005, jitter_dist=dist, reorder=True)
        with Pair(Prof(up=d, seed=9)) as pair:
            return [rtt - 0.1 - 30.0 for rtt in ping_rtts_ms(pair, 300, interval=0.01)]

    uni = one_way_ms("uniform")
    assert len(uni) == 300
    # Host scheduling only ever adds delay, and on a loaded 2-core CI host some echoes arrive late
    # (5.6 ms seen; a full suite once failed the older p99 and standard-deviation bounds).
    # So: the minimum bounds the draw below; above, and for the spread, statistics that a few late
    # echoes cannot move: the share beyond the bound and the interquartile range.
    assert min(uni) >= -5.2, min(uni)
    assert sum(x > 5.4 for x in uni) <= 6, sorted(uni)[-8:]  # at most 2 %
    q1, _, q3 = statistics.quantiles(uni, n=4)
    assert 4.2 <= q3 - q1 <= 5.8, (q1, q3)  # uniform on +-5 ms: 5 ms
    norm = one_way_ms("normal")
    q1, _, q3 = statistics.quantiles(norm, n=4)
    assert 5.6 <= q3 - q1 <= 7.9, (q1, q3)  # normal: 1.349 sigma = 6.74 ms
    assert sum(abs(x) > 5.5 for x in norm) >= 30  # ~27 % of a normal lies beyond 1.1 sigma


def test_it_is_reproducible_for_a_given_seed() -> None:
    def lost(seed: int) -> set[int]:
        with Pair(Prof(up=Dir(loss_pct=10.0), seed=seed)) as pair:
            # Warm-up: IPv6 DAD/RS packets are drawn from the same PRNG; let them pass first.
            time.sleep(0.3)
            got = send_sequence(pair, 300, gap_s=0.0005, settle_s=0.2)
        return set(range(300)) - set(got)

    assert lost(21) == lost(21)
    assert lost(21) != lost(22)


# --- errors --------------------------------------------------------------------------------------


def test_it_says_how_to_build_when_the_binary_is_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("QOELAB_LINKEMU", "/nonexistent/linkemu")
    link = UserspaceLink("a", "b", "x0", "x1", Prof())
    with pytest.raises(QoelabError, match="not built; run `make`"):
        link.start()
    assert userspace.available() == (False, userspace.NOT_BUILT)


def test_it_names_the_field_of_a_bad_profile_value() -> None:
    link = UserspaceLink("a", "b", "x0", "x1", Prof(down=Dir(loss_pct=150.0)))
    with pytest.raises(ParameterError, match=r"down\.loss_pct: must be between 0 and 100"):
        link.start()


def test_it_reports_a_missing_namespace_in_one_sentence() -> None:
    link = UserspaceLink("qlu-nope-c", "qlu-nope-s", "x0", "x1", Prof())
    with pytest.raises(QoelabError, match="network namespace .* does not exist"):
        link.start()
    assert link.pid is None


# --- cleanup -------------------------------------------------------------------------------------


def _gone(pid: int, timeout: float = 3.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
            return True
        time.sleep(0.02)
    return False


def test_stop_removes_the_process_and_both_tun_devices() -> None:
    with Pair(Prof()) as pair:
        pid = pair.link.pid
        assert pid and pair.cif in pair.links(pair.cns) and pair.sif in pair.links(pair.sns)
        final = pair.link.stop()
        assert final["exit_code"] == 0 and "up" in final
        assert _gone(pid)
        assert pair.cif not in pair.links(pair.cns) and pair.sif not in pair.links(pair.sns)


def test_sigkill_of_the_emulator_leaves_no_tun_device() -> None:
    with Pair(Prof()) as pair:
        pid = pair.link.pid
        assert pid
        os.kill(pid, signal.SIGKILL)
        assert _gone(pid)
        deadline = time.monotonic() + 3
        while pair.cif in pair.links(pair.cns) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert pair.cif not in pair.links(pair.cns) and pair.sif not in pair.links(pair.sns)


def test_sigkill_of_the_driver_ends_the_emulator_and_its_devices() -> None:
    n = next(_counter)
    prefix = f"qlu{n}{os.getpid() % 100000}"
    cns, sns = prefix + "c", prefix + "s"
    for ns in (cns, sns):
        subprocess.run(["ip", "netns", "add", ns], check=True, capture_output=True)
    driver_src = textwrap.dedent(f"""
        import time
        from qoelab.emulation.profile import Direction, LinkProfile
        from qoelab.emulation.userspace import UserspaceLink
        d = Direction()
        link = UserspaceLink({cns!r}, {sns!r}, {prefix + "t0"!r}, {prefix + "t1"!r},
                             LinkProfile(up=d, down=d, mtu=1500, seed=1))
        link.start()
        print(link.pid, flush=True)
        time.sleep(60)
    """)
    driver = subprocess.Popen([sys.executable, "-c", driver_src], stdout=subprocess.PIPE, text=True)
    try:
        assert driver.stdout is not None
        pid = int(driver.stdout.readline())
        assert psutil.Process(pid).name() == "linkemu"
        assert cns in psutil.Process(pid).cmdline()
        driver.send_signal(signal.SIGKILL)
        driver.wait()
        assert _gone(pid), "linkemu outlived its driver"
        with in_netns(cns), IPRoute() as ipr:
            assert not ipr.link_lookup(ifname=prefix + "t0")
    finally:
        if driver.poll() is None:
            driver.kill()
        for ns in (cns, sns):
            subprocess.run(["ip", "netns", "delete", ns], check=False, capture_output=True)


def test_it_logs_the_command_and_the_final_counters(tmp_path: Path) -> None:
    log = tmp_path / "linkemu.log"
    pair = Pair(Prof(up=Dir(delay_s=0.001)))
    pair.link.log_path = log
    with pair:
        ping_rtts_ms(pair, 3, interval=0.01)
    text = log.read_text()
    assert "--client-ns " + pair.cns in text and '"event":"final"' in text


# --- trace links (issue 37) ----------------------------------------------------------------------


def arrival_times(pair: Pair, count: int, size: int, settle_s: float) -> list[float]:
    """Send ``count`` UDP datagrams of ``size`` IP bytes client -> server at once (the queue holds
    them all); return the receiver's arrival times (monotonic seconds)."""
    tx, rx = udp_pair(pair)
    pad = b"\0" * (size - 28)  # IP (20) + UDP (8) headers
    times: list[float] = []
    with tx, rx:
        for _ in range(count):
            tx.send(pad)
        rx.settimeout(settle_s)
        with contextlib.suppress(TimeoutError):
            while len(times) < count:
                rx.recv(65536)
                times.append(time.monotonic())
    return times


def write_trace(path: Path, lines: list[int]) -> str:
    path.write_text("".join(f"{t}\n" for t in lines))
    return str(path)


def test_a_trace_link_serves_one_1500_byte_packet_per_opportunity(tmp_path: Path) -> None:
    # One opportunity every millisecond (12 Mbit/s): 1500 full-size packets leave 1 ms apart.
    trace = write_trace(tmp_path / "every-ms", list(range(1, 1001)))
    prof = Prof(up=Dir(trace=trace, limit_pkts=5000))
    with Pair(prof) as pair:
        times = arrival_times(pair, 1500, 1500, settle_s=3.0)
        stats = pair.link.stats()["up"]
    assert len(times) == 1500 and stats["dropped_queue"] == 0
    spread = times[-1] - times[0]
    assert 1.40 <= spread <= 1.60, f"1500 packets over a 1-per-ms trace took {spread:.3f} s, not 1.499"


def test_small_packets_share_an_opportunity_and_a_gap_in_the_trace_is_an_outage(tmp_path: Path) -> None:
    # 500 ms of one opportunity per ms, then 500 ms of none, in a loop (period 1 s).
    trace = write_trace(tmp_path / "onoff", list(range(1, 501)) + [1000])
    with Pair(Prof(up=Dir(trace=trace, limit_pkts=5000))) as pair:
        # Three 500-byte packets fit in one 1500-byte opportunity: 1500 of them need 500 of them,
        # one "on" half-second at most, or parts of two with the outage between.
        small = arrival_times(pair, 1500, 500, settle_s=3.0)
    spread = small[-1] - small[0]
    assert len(small) == 1500
    assert spread <= 1.1, f"1500 small packets took {spread:.3f} s over 500 opportunities per second"
    # The largest gap between arrivals is the outage (up to 0.5 s), never more.
    gaps = [b - a for a, b in itertools.pairwise(small)]
    assert max(gaps) <= 0.55, f"a gap of {max(gaps):.3f} s is longer than the trace's outage"


def test_linkemu_refuses_a_bad_trace_naming_the_line_and_a_trace_beside_a_rate(tmp_path: Path) -> None:
    bad = write_trace(tmp_path / "bad", [1, 5, 3])
    base = [str(userspace.binary_path()), "--client-ns", "x", "--server-ns", "y", "--client-if", "a",
            "--server-if", "b"]  # fmt: skip
    res = subprocess.run([*base, "--up", f"trace={bad}"], capture_output=True, text=True, timeout=10)
    assert res.returncode == userspace.EXIT_USAGE
    assert "line 3: 3 is before the line above (5)" in res.stderr
    good = write_trace(tmp_path / "good", [1, 2])
    res = subprocess.run(
        [*base, "--up", f"rate=1e6,trace={good}"], capture_output=True, text=True, timeout=10
    )
    assert res.returncode == userspace.EXIT_USAGE and "give rate or trace, not both" in res.stderr
    # The profile refuses the pair first, naming the field (before linkemu is ever started).
    with pytest.raises(ParameterError, match="trace: give a rate or a trace"):
        LinkProfile.parse(rate="1mbit", trace=good)


def test_a_trace_link_writes_its_per_millisecond_log_of_offered_and_delivered_bytes(tmp_path: Path) -> None:
    from qoelab.emulation import linklog
    from qoelab.emulation.topology import emulated_link

    # 500 ms of one opportunity per ms, then 500 ms off, looping; 5 ms each way.
    trace = write_trace(tmp_path / "onoff", list(range(1, 501)) + [1000])
    profile = LinkProfile.parse(trace=trace, delay="5ms")
    log_path = tmp_path / "link_log.json"
    with emulated_link(profile, backend="userspace", link_log=log_path) as link:
        with in_netns(link.server_ns):
            rx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            rx.bind((link.server_ip, 5999))
        with in_netns(link.client_ns):
            tx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            tx.connect((link.server_ip, 5999))
        with tx, rx:
            for _ in range(800):  # 800 full-size packets: more than one "on" half-second carries
                tx.send(b"\0" * 1472)
            time.sleep(2.2)
    log = json.loads(log_path.read_text())
    up = log["directions"]["up"]
    assert sum(log["directions"]["down"]["delivered_bytes"]) < 1500  # the odd packet of the stack
    assert 800 * 1500 <= sum(up["delivered_bytes"]) < 800 * 1500 + 1500  # and the odd stack packet
    assert not list(tmp_path.glob("link_log.records*")), "the scratch records were not removed"
    # Nothing leaves in a millisecond the trace offers nothing, and never more than it offers.
    assert all(d <= o for d, o in zip(up["delivered_bytes"], up["offered_bytes"], strict=True))
    # The queue waits out the outage: some packet waited at least the 500 ms gap's remainder.
    assert max(up["queue_delay_ms"]) >= 400
    chart = linklog.chart(log)["directions"]["up"]
    assert max(chart["capacity_bps"]) == pytest.approx(12e6) and max(chart["throughput_bps"]) <= 12e6


def test_an_outage_schedule_stops_the_link_and_packets_wait_through_it() -> None:
    # 12 Mbit/s (one 1500-byte packet per ms) up 200 ms, down 300 ms: 600 packets need three "on"
    # windows' worth (600 ms), so they span three or four windows with two or three outages between
    # them (the schedule runs from the link's start, the burst arrives at any phase of it).
    with Pair(Prof(up=Dir(rate_bps=12e6, outage=(0.2, 0.3), limit_pkts=5000))) as pair:
        times = arrival_times(pair, 600, 1500, settle_s=3.0)
        stats = pair.link.stats()["up"]
    assert len(times) == 600 and stats["dropped_queue"] == 0
    gaps = sorted(b - a for a, b in itertools.pairwise(times))
    assert 0.25 <= gaps[-1] <= 0.32 and gaps[-2] >= 0.25, gaps[-4:]  # outages waited out, no longer
    assert gaps[-4] < 0.05, gaps[-4:]  # and never more than three of them
    assert 0.8 <= times[-1] - times[0] <= 1.6


def test_outage_windows_hold_the_link_down_once_at_their_times() -> None:
    # Down for the first second and from 1.5 s to 1.8 s after the link's start: 600 packets sent at
    # once (well before 1 s) leave from 1 s on at 12 Mbit/s, 500 of them before 1.5 s, the rest
    # after the second outage, which is waited out exactly once.
    windows = ((0.0, 1.0), (1.5, 1.8))
    with Pair(Prof(up=Dir(rate_bps=12e6, outage_windows=windows, limit_pkts=5000))) as pair:
        times = arrival_times(pair, 600, 1500, settle_s=3.0)
        t0 = pair.link.stats()["up"]["trace_t0_ns"] / 1e9
    assert len(times) == 600
    assert times[0] >= t0 + 1.0, "a packet left during the first outage"
    assert not [t for t in times if t0 + 1.502 < t < t0 + 1.798], "a packet left during the second"
    gaps = sorted(b - a for a, b in itertools.pairwise(times))
    assert 0.28 <= gaps[-1] <= 0.33 and gaps[-2] < 0.05, gaps[-3:]


def test_outage_windows_are_read_from_a_file_and_bad_ones_are_refused(tmp_path: Path) -> None:
    from qoelab.emulation.outages import read_outage_file

    f = tmp_path / "outages.txt"
    f.write_text("# when the train is in a tunnel\n10 12\n30s-35s  # the long one\n\n")
    prof = LinkProfile.parse(rate="10mbit", outage=read_outage_file(f))
    assert prof.down.outage_windows == ((10.0, 12.0), (30.0, 35.0)) and prof.down.outage is None
    assert "outages=10.0:12.0/30.0:35.0" in userspace.direction_spec(prof.down, "down")
    assert LinkProfile.from_json(prof.to_json()) == prof
    assert prof.needs_userspace.startswith("an outage schedule")
    from qoelab.emulation.linkparams import LinkParams

    swept = LinkParams(rate="5mbit", outage="10s-12s, 30s-35s").to_profile()
    assert swept.up.outage_windows == swept.down.outage_windows == ((10.0, 12.0), (30.0, 35.0))
    with pytest.raises(ValueError, match="outage: window 2 starts at 1s, before the one above ends"):
        LinkParams(rate="5mbit", outage="0s-2s, 1s-3s")
    f.write_text("10 12\nsoon\n")
    with pytest.raises(ParameterError, match="line 2: needs START END"):
        read_outage_file(f)
    for spec, words in (("10s-12s, 11s-13s", "window 2 starts at 11s, before the one above ends"),
                        ("5s-5s", "window 1 (5s-5s): must end at least 1ms after"),
                        ("1s-2s, 3s-90000s", "and by 86400s")):  # fmt: skip
        with pytest.raises(ParameterError, match=re.escape(words)) as err:
            LinkProfile.parse(rate="10mbit", outage=spec)
        assert err.value.field == "outage"
    base = [str(userspace.binary_path()), "--client-ns", "x", "--server-ns", "y", "--client-if", "a",
            "--server-if", "b"]  # fmt: skip
    res = subprocess.run(
        [*base, "--up", "rate=1e6,outages=2:3/1:4"], capture_output=True, text=True, timeout=10
    )
    assert (
        res.returncode == userspace.EXIT_USAGE and "window 2 starts before the one above ends" in res.stderr
    )
