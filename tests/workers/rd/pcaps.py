"""Synthetic captures with known timings for the remote-desktop analysis tests (written with dpkt).

A ``Capture`` collects packets of TCP connections (``Conn``) and UDP flows between a client and a
server; ``write`` stores them as pcap or pcapng with any of the link types the analysis reads.
Timestamps are given relative to ``Capture.t0`` and must be whole microseconds.
"""

from __future__ import annotations

import socket
import struct
from dataclasses import dataclass, field
from pathlib import Path

import dpkt

T0 = 1_700_000_000.0
MAC_C, MAC_S = b"\x02\x00\x00\x00\x00\x01", b"\x02\x00\x00\x00\x00\x02"


def _family(host: str) -> int:
    return socket.AF_INET6 if ":" in host else socket.AF_INET


def ip_packet(src: str, dst: str, proto: int, segment: dpkt.Packet) -> dpkt.Packet:
    """An IPv4 or IPv6 packet (by the address form) around a TCP or UDP segment."""
    body = bytes(segment)
    if _family(src) == socket.AF_INET6:
        return dpkt.ip6.IP6(
            src=socket.inet_pton(socket.AF_INET6, src), dst=socket.inet_pton(socket.AF_INET6, dst),
            nxt=proto, hlim=64, plen=len(body), data=body,
        )  # fmt: skip
    ip = dpkt.ip.IP(src=socket.inet_aton(src), dst=socket.inet_aton(dst), p=proto, ttl=64, data=body)
    ip.len = 20 + len(body)
    return ip


@dataclass
class Frame:
    t: float  # seconds after T0
    ip: dpkt.Packet
    snap: int | None = None  # cut the captured bytes to this many (a short snap length)


@dataclass
class Capture:
    client: str = "10.0.0.1"
    server: str = "10.0.0.2"
    frames: list[Frame] = field(default_factory=list)
    t0: float = T0

    def conn(self, cport: int, sport: int = 5900) -> Conn:
        return Conn(self, cport, sport)

    def add(
        self, t: float, src: str, dst: str, proto: int, segment: dpkt.Packet, snap: int | None = None
    ) -> None:
        self.frames.append(Frame(t, ip_packet(src, dst, proto, segment), snap))

    def udp(self, t: float, n: int, down: bool, cport: int = 40000, sport: int = 5000) -> None:
        src, dst, sp, dp = (
            (self.server, self.client, sport, cport) if down else (self.client, self.server, cport, sport)
        )
        self.add(t, src, dst, 17, dpkt.udp.UDP(sport=sp, dport=dp, ulen=8 + n, data=b"u" * n))

    def write(
        self, path: Path, fmt: str = "pcap", linktype: int = dpkt.pcap.DLT_EN10MB, nano: bool = False
    ) -> Path:
        frames = sorted(self.frames, key=lambda f: f.t)
        with open(path, "wb") as f:
            if fmt == "pcap":
                w = dpkt.pcap.Writer(f, snaplen=65535, linktype=linktype, nano=nano)
            else:
                w = dpkt.pcapng.Writer(f, snaplen=65535, linktype=linktype)
            for fr in frames:
                raw = link_frame(linktype, fr.ip)
                if fr.snap is not None:
                    raw = raw[: fr.snap]
                w.writepkt(raw, ts=self.t0 + fr.t)
        return path


def link_frame(linktype: int, ip: dpkt.Packet) -> bytes:
    v6 = isinstance(ip, dpkt.ip6.IP6)
    ethtype = dpkt.ethernet.ETH_TYPE_IP6 if v6 else dpkt.ethernet.ETH_TYPE_IP
    if linktype == dpkt.pcap.DLT_EN10MB:
        return bytes(dpkt.ethernet.Ethernet(src=MAC_S, dst=MAC_C, type=ethtype, data=ip))
    if linktype in (101, 12, 14):
        return bytes(ip)
    if linktype == 113:
        return bytes(dpkt.sll.SLL(type=0, hrd=1, hlen=6, hdr=MAC_S + b"\0\0", ethtype=ethtype)) + bytes(ip)
    if linktype == 276:
        return bytes(
            dpkt.sll2.SLL2(ethtype=ethtype, intindex=3, hrd=1, type=0, hlen=6, hdr=MAC_S + b"\0\0")
        ) + bytes(ip)
    if linktype == 0:
        return struct.pack("<I", 30 if v6 else 2) + bytes(ip)
    raise ValueError(f"link type {linktype} not supported by the test builder")


class Conn:
    """A TCP connection; ``up``/``down`` send payload and advance the sequence numbers."""

    def __init__(self, cap: Capture, cport: int, sport: int) -> None:
        self.cap, self.cport, self.sport = cap, cport, sport
        self.seq = {"up": 1000, "down": 500000}
        self.sent: dict[str, list[tuple[int, int]]] = {"up": [], "down": []}

    def _send(
        self, t: float, d: str, seq: int, n: int, flags: int = dpkt.tcp.TH_ACK, snap: int | None = None
    ) -> None:
        cap = self.cap
        src, dst, sp, dp = (
            (cap.client, cap.server, self.cport, self.sport)
            if d == "up"
            else (cap.server, cap.client, self.sport, self.cport)
        )
        other = "down" if d == "up" else "up"
        seg = dpkt.tcp.TCP(sport=sp, dport=dp, seq=seq % 2**32, ack=self.seq[other] % 2**32, flags=flags,
                           win=65535, data=b"x" * n)  # fmt: skip
        cap.add(t, src, dst, 6, seg, snap)

    def handshake(self, t: float) -> None:
        self._send(t, "up", self.seq["up"] - 1, 0, dpkt.tcp.TH_SYN)
        self._send(t + 0.0001, "down", self.seq["down"] - 1, 0, dpkt.tcp.TH_SYN | dpkt.tcp.TH_ACK)
        self._send(t + 0.0002, "up", self.seq["up"], 0)

    def up(self, t: float, n: int) -> None:
        self._data(t, "up", n)

    def down(self, t: float, n: int, snap: int | None = None) -> None:
        self._data(t, "down", n, snap)

    def _data(self, t: float, d: str, n: int, snap: int | None = None) -> None:
        self.sent[d].append((self.seq[d], n))
        self._send(t, d, self.seq[d], n, dpkt.tcp.TH_ACK | dpkt.tcp.TH_PUSH, snap)
        self.seq[d] += n

    def skip(self, d: str, n: int) -> tuple[int, int]:
        """Advance the sequence as if n bytes were sent but lost before the capture point."""
        seg = (self.seq[d], n)
        self.sent[d].append(seg)
        self.seq[d] += n
        return seg

    def resend(self, t: float, d: str, seg: tuple[int, int]) -> None:
        self._send(t, d, seg[0], seg[1], dpkt.tcp.TH_ACK | dpkt.tcp.TH_PUSH)

    def ack(self, t: float, d: str) -> None:
        self._send(t, d, self.seq[d], 0)

    def keepalive(self, t: float, d: str, with_byte: bool = False) -> None:
        """A TCP keep-alive probe: seq = snd_nxt - 1, no payload or one garbage byte."""
        self._send(t, d, self.seq[d] - 1, 1 if with_byte else 0)
