"""Measurement probes for the link-accuracy benchmark: a namespace pair, RTT, loss, goodput.

RTT uses raw ICMP echo answered by the server namespace's kernel (no user-space echo server in the
path) with kernel receive timestamps (SO_TIMESTAMPNS), so its resolution is microseconds, unlike
ping's printed times. Loss uses numbered UDP datagrams paced well below the link rate, so the
rate queue never drops them.
"""

from __future__ import annotations

import contextlib
import json
import random
import select
import socket
import struct
import subprocess
import time
from functools import partial

from pyroute2 import IPRoute

from qoelab.emulation.profile import Direction, LinkProfile
from qoelab.emulation.system import in_netns
from qoelab.emulation.userspace import UserspaceLink

CLIENT_IP, SERVER_IP = "198.18.0.1", "198.18.0.2"
SO_TIMESTAMPNS = getattr(socket, "SO_TIMESTAMPNS", 35)  # Linux value; Python does not export it


# The real profile types, with defaults so a caller names only what it sets.
Dir = Direction
Prof = partial(LinkProfile, up=Direction(), down=Direction(), seed=1)


class Pair:
    """Client and server namespaces joined by a UserspaceLink, with big TCP buffers for high BDPs."""

    def __init__(self, prefix: str, profile: LinkProfile) -> None:
        self.cns, self.sns = prefix + "c", prefix + "s"
        self.link = UserspaceLink(self.cns, self.sns, prefix + "t0", prefix + "t1", profile)
        self.cif, self.sif = prefix + "t0", prefix + "t1"

    def __enter__(self) -> Pair:
        # `ip netns` rather than pyroute2's netns/NetNS, which fork (unsafe in a threaded process).
        for ns in (self.cns, self.sns):
            subprocess.run(["ip", "netns", "add", ns], check=True, capture_output=True)
        try:
            self.join()
            for ns in (self.cns, self.sns):
                self.big_buffers(ns)
        except BaseException:
            self.__exit__()
            raise
        return self

    def join(self) -> None:
        """Start the emulator between the namespaces and address both ends."""
        self.link.start()
        for ns, ifname, addr in ((self.cns, self.cif, CLIENT_IP), (self.sns, self.sif, SERVER_IP)):
            with in_netns(ns), IPRoute() as ipr:
                ipr.link("set", index=ipr.link_lookup(ifname="lo")[0], state="up")
                ipr.addr("add", index=ipr.link_lookup(ifname=ifname)[0], address=addr, prefixlen=30)

    def __exit__(self, *exc: object) -> None:
        try:
            self.final = self.link.stop()
        finally:
            for ns in (self.cns, self.sns):
                subprocess.run(["ip", "netns", "delete", ns], check=False, capture_output=True)

    def big_buffers(self, ns: str) -> None:
        """TCP autotuning up to 64 MiB: 1 Gbit/s x 400 ms RTT is 50 MB in flight."""
        self.sh(ns, "sysctl", "-qw", "net.ipv4.tcp_rmem=4096 131072 67108864")
        self.sh(ns, "sysctl", "-qw", "net.ipv4.tcp_wmem=4096 16384 67108864")

    def sh(self, ns: str, *argv: str, timeout: float = 60) -> str:
        return subprocess.run(
            ["ip", "netns", "exec", ns, *argv], capture_output=True, text=True, timeout=timeout, check=True
        ).stdout


class VethPair(Pair):
    """Client and server namespaces joined by a plain veth pair, no emulator: the kernel's own
    forwarding, for the emulator's ceiling to be held against. ``offloads`` off turns off
    checksum, segmentation and receive offloads on both ends (per-packet, as linkemu without
    ``--offload``)."""

    def __init__(self, prefix: str, offloads: bool) -> None:
        self.cns, self.sns = prefix + "c", prefix + "s"
        self.cif, self.sif = prefix + "v0", prefix + "v1"
        self.offloads = offloads

    def join(self) -> None:
        run = partial(subprocess.run, check=True, capture_output=True)
        run(["ip", "-n", self.cns, "link", "add", self.cif, "type", "veth", "peer", "name", self.sif,
             "netns", self.sns])  # fmt: skip
        for ns, ifname, addr in ((self.cns, self.cif, CLIENT_IP), (self.sns, self.sif, SERVER_IP)):
            run(["ip", "-n", ns, "addr", "add", f"{addr}/30", "dev", ifname])
            run(["ip", "-n", ns, "link", "set", ifname, "up"])
            run(["ip", "-n", ns, "link", "set", "lo", "up"])
            if not self.offloads:
                self.sh(ns, "ethtool", "-K", ifname, "tx", "off", "rx", "off", "tso", "off", "gso", "off",
                        "gro", "off")  # fmt: skip

    def __exit__(self, *exc: object) -> None:
        for ns in (self.cns, self.sns):
            subprocess.run(["ip", "netns", "delete", ns], check=False, capture_output=True)


def _icmp_checksum(data: bytes) -> int:
    if len(data) % 2:
        data += b"\0"
    s = sum(struct.unpack(f"!{len(data) // 2}H", data))
    s = (s >> 16) + (s & 0xFFFF)
    s += s >> 16
    return ~s & 0xFFFF


def icmp_rtts(
    pair: Pair, count: int, interval_s: float, payload: int = 56, wait_s: float = 2.0
) -> list[float]:
    """RTTs in seconds of `count` echo requests sent every `interval_s` (lost ones are missing)."""
    with in_netns(pair.cns):
        sock = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)
    sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
    sock.setblocking(False)
    ident = random.randrange(1, 0xFFFF)
    sent: dict[int, int] = {}
    rtts: list[float] = []
    body = bytes(payload)

    def receive(until: float) -> None:
        while (left := until - time.monotonic()) > 0:
            r, _, _ = select.select([sock], [], [], left)
            if not r:
                return
            data, anc, _, _ = sock.recvmsg(2048, socket.CMSG_SPACE(16))
            ihl = (data[0] & 0x0F) * 4
            typ, _, _, rid, seq = struct.unpack("!BBHHH", data[ihl : ihl + 8])
            if typ != 0 or rid != ident or seq not in sent:
                continue
            for level, kind, value in anc:
                if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS:
                    sec, nsec = struct.unpack("qq", value[:16])
                    rtts.append((sec * 1_000_000_000 + nsec - sent.pop(seq)) / 1e9)

    with sock:
        start = time.monotonic()
        for seq in range(count):
            hdr = struct.pack("!BBHHH", 8, 0, 0, ident, seq)
            pkt = struct.pack("!BBHHH", 8, 0, _icmp_checksum(hdr + body), ident, seq) + body
            sent[seq] = time.time_ns()
            sock.sendto(pkt, (SERVER_IP, 0))
            receive(start + (seq + 1) * interval_s)
        receive(time.monotonic() + wait_s)
    return rtts


def udp_loss(pair: Pair, count: int, pps: float, payload: int = 64) -> int:
    """Send `count` numbered datagrams client -> server at `pps`; return how many arrived."""
    with in_netns(pair.sns):
        rx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        rx.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16 << 20)
        rx.bind((SERVER_IP, 5998))
    with in_netns(pair.cns):
        tx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        tx.connect((SERVER_IP, 5998))
    got: set[int] = set()
    pad = bytes(payload - 4)
    with tx, rx:
        rx.setblocking(False)

        def drain() -> None:
            with contextlib.suppress(BlockingIOError):
                while True:
                    got.add(struct.unpack("!I", rx.recv(2048)[:4])[0])

        due = time.monotonic()
        for i in range(count):
            tx.send(struct.pack("!I", i) + pad)
            drain()
            # Never catch up after a stall with a burst: that could overflow the rate queue and
            # count queue drops as loss.
            due = max(due + 1 / pps, time.monotonic())
            time.sleep(max(0.0, due - time.monotonic()))
        deadline = time.monotonic() + 1.5
        while time.monotonic() < deadline:
            select.select([rx], [], [], 0.05)
            drain()
    return len(got)


def iperf3_goodput(
    pair: Pair, seconds: float, omit: float, port: int = 5397, cc: str = "cubic"
) -> dict[str, float]:
    """TCP client -> server with iperf3 (congestion control `cc`); receiver-side goodput, retransmits."""
    server = subprocess.Popen(
        ["ip", "netns", "exec", pair.sns, "iperf3", "-s", "-1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        time.sleep(0.3)
        out = pair.sh(
            pair.cns,
            *("iperf3", "-c", SERVER_IP, "-p", str(port), "-J"),
            *("-t", f"{seconds:g}", "-O", f"{omit:g}", "-C", cc),
            timeout=seconds + omit + 30,
        )
    finally:
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
    end = json.loads(out)["end"]
    return {
        "goodput_bps": end["sum_received"]["bits_per_second"],
        "retransmits": end["sum_sent"].get("retransmits", 0),
    }
