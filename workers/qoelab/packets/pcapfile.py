"""Reading a pcap or pcapng file into the TCP/UDP packets the slow-motion analysis needs.

Every interface block of a pcapng file keeps its own link type and time resolution (tshark writes
one per ``-i``); lengths come from the IP headers, so a short snap length does not shrink X; each
direction of a TCP connection is tracked by sequence range, so retransmissions and keep-alives are
told apart from new bytes (``Packet.unique``, ``retrans``, ``keepalive``).
"""

from __future__ import annotations

import bisect
import contextlib
import os
import socket
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

import dpkt

from qoelab.errors import ParameterError, QoelabError

# Link types (tcpdump.org/linktypes.html). 12 and 14 are the platform-specific DLT_RAW values.
LINKTYPE_NULL = 0
LINKTYPE_ETHERNET = 1
LINKTYPE_RAW = (101, 12, 14)
LINKTYPE_LOOP = 108
LINKTYPE_LINUX_SLL = 113
LINKTYPE_LINUX_SLL2 = 276
LINKTYPE_IPV4 = 228
LINKTYPE_IPV6 = 229
SUPPORTED_LINKTYPES = (LINKTYPE_NULL, LINKTYPE_ETHERNET, *LINKTYPE_RAW, LINKTYPE_LOOP, LINKTYPE_LINUX_SLL,
                       LINKTYPE_LINUX_SLL2, LINKTYPE_IPV4, LINKTYPE_IPV6)  # fmt: skip

_PCAPNG_MAGIC = b"\x0a\x0d\x0d\x0a"
_PCAP_MAGICS = {b"\xd4\xc3\xb2\xa1", b"\xa1\xb2\xc3\xd4", b"\x4d\x3c\xb2\xa1", b"\xa1\xb2\x3c\x4d"}


class CaptureError(QoelabError):
    """The capture cannot be read or holds nothing to analyse."""


@dataclass(slots=True)
class Packet:
    """One TCP/UDP packet as the analysis needs it. ``payload`` is the length on the wire."""

    ts: float
    proto: int  # 6 TCP, 17 UDP
    src: str
    sport: int
    dst: str
    dport: int
    payload: int
    unique: int  # payload bytes not seen before in this direction of this connection
    retrans: bool
    keepalive: bool

    @property
    def conn(self) -> tuple:
        a, b = (self.src, self.sport), (self.dst, self.dport)
        return (self.proto, *(a + b if a <= b else b + a))

    @property
    def effective(self) -> int:
        """Payload that can start or end an update (keep-alives carry none)."""
        return 0 if self.keepalive else self.payload


class _SeqTracker:
    """Which sequence ranges of one direction of one TCP connection the capture has seen.

    Sequence numbers are unwrapped to 64 bits around the highest end seen. A segment repeating
    bytes already seen, or filling a hole below the highest end (its original was lost before the
    capture point), is a retransmission; ``unique`` counts the bytes seen for the first time.
    """

    __slots__ = ("hi", "ranges")

    def __init__(self) -> None:
        self.hi: int | None = None
        self.ranges: list[list[int]] = []  # merged, sorted [a, b)

    def feed(self, seq: int, n: int) -> tuple[int, bool, bool]:
        """Return (unique bytes, is retransmission, is keep-alive) for a segment of n > 0 bytes."""
        if self.hi is None:
            self.hi = seq + n
            self.ranges = [[seq, seq + n]]
            return n, False, False
        d = (seq - self.hi) % 2**32
        a = self.hi + (d - 2**32 if d >= 2**31 else d)
        b = a + n
        # A keep-alive probe resends the last byte (or nothing) at snd_nxt - 1 (RFC 9293 §3.8.4).
        if n == 1 and b == self.hi:
            return 0, False, True
        covered = 0
        for ra, rb in reversed(self.ranges):
            if rb <= a:
                break
            covered += max(0, min(b, rb) - max(a, ra))
        retrans = covered > 0 or a < self.hi
        self._add(a, b)
        self.hi = max(self.hi, b)
        return n - covered, retrans, False

    def _add(self, a: int, b: int) -> None:
        r = self.ranges
        i = bisect.bisect_left(r, [a, a])
        if i > 0 and r[i - 1][1] >= a:
            i -= 1
        j = i
        while j < len(r) and r[j][0] <= b:
            a, b = min(a, r[j][0]), max(b, r[j][1])
            j += 1
        r[i:j] = [[a, b]]
        if len(r) > 256:  # holes that never fill (capture drops): forget the oldest
            r[:2] = [[r[0][0], r[1][1]]]


def _pcapng_packets(f: BinaryIO) -> Iterator[tuple[float, int, bytes]]:
    """(ts, linktype, frame) from a pcapng file, honouring every interface's link type and resolution.

    dpkt's Reader uses the first interface for all packets; tshark writes one interface block
    per ``-i``, so the blocks are walked here with dpkt's block classes.
    """
    from dpkt import pcapng

    le = True
    ifaces: list[tuple[int, float, int]] = []  # (linktype, divisor, tsoffset)
    while True:
        head = f.read(8)
        if len(head) < 8:
            return
        btype = struct.unpack("<I", head[:4])[0]
        if btype == pcapng.PCAPNG_BT_SHB:
            bom = f.read(4)
            le = bom == b"\x4d\x3c\x2b\x1a"
            if not le and bom != b"\x1a\x2b\x3c\x4d":
                raise CaptureError("pcapng section header with an unknown byte order")
            blen = struct.unpack("<I" if le else ">I", head[4:])[0]
            f.read(blen - 12)
            ifaces = []  # interface ids restart in every section
            continue
        btype, blen = struct.unpack("<II" if le else ">II", head)
        if blen < 12:
            raise CaptureError(f"corrupt pcapng block (length {blen})")
        buf = head + f.read(blen - 8)
        if len(buf) < blen:
            return  # capture cut mid-block (tshark killed): keep what was complete
        if btype == pcapng.PCAPNG_BT_IDB:
            idb = (pcapng.InterfaceDescriptionBlockLE if le else pcapng.InterfaceDescriptionBlock)(buf)
            divisor, offset = 1e6, 0
            for opt in idb.opts:
                if opt.code == pcapng.PCAPNG_OPT_IF_TSRESOL:
                    v = opt.data[0]
                    divisor = float((2 if v & 0x80 else 10) ** (v & 0x7F))
                elif opt.code == pcapng.PCAPNG_OPT_IF_TSOFFSET:
                    offset = struct.unpack("<q" if le else ">q", opt.data[:8])[0]
            ifaces.append((idb.linktype, divisor, offset))
        elif btype == pcapng.PCAPNG_BT_EPB:
            epb = (pcapng.EnhancedPacketBlockLE if le else pcapng.EnhancedPacketBlock)(buf)
            if epb.iface_id >= len(ifaces):
                raise CaptureError(f"pcapng packet names interface {epb.iface_id}, which is not described")
            linktype, divisor, offset = ifaces[epb.iface_id]
            ticks = (epb.ts_high << 32) | epb.ts_low
            # Split to keep sub-microsecond precision: a float of epoch seconds holds ~0.2 µs.
            whole, frac = divmod(ticks, int(divisor))
            yield offset + whole + frac / divisor, linktype, epb.pkt_data
        # other blocks (name resolution, statistics, simple packets without a timestamp) are skipped


def _pcap_packets(f: BinaryIO) -> Iterator[tuple[float, int, bytes]]:
    try:
        reader = dpkt.pcap.Reader(f)
    except (ValueError, dpkt.NeedData) as err:
        raise CaptureError(f"not a readable pcap file: {err}") from None
    linktype = reader.datalink()
    try:
        for ts, frame in reader:
            yield float(ts), linktype, frame
    except dpkt.NeedData:
        return  # cut mid-record


def _ip_layer(linktype: int, frame: bytes) -> dpkt.Packet | None:
    """The IPv4/IPv6 packet inside a frame, or None (ARP, other protocols)."""
    if linktype == LINKTYPE_ETHERNET:
        inner = dpkt.ethernet.Ethernet(frame).data
    elif linktype in LINKTYPE_RAW or linktype in (LINKTYPE_IPV4, LINKTYPE_IPV6):
        if not frame:
            return None
        version = frame[0] >> 4
        inner = dpkt.ip.IP(frame) if version == 4 else dpkt.ip6.IP6(frame) if version == 6 else None
    elif linktype == LINKTYPE_LINUX_SLL:
        inner = dpkt.sll.SLL(frame).data
    elif linktype == LINKTYPE_LINUX_SLL2:
        inner = dpkt.sll2.SLL2(frame).data
    elif linktype in (LINKTYPE_NULL, LINKTYPE_LOOP):
        if len(frame) < 5:
            return None
        # The family is in the capturing host's byte order; the IP version nibble is unambiguous.
        version = frame[4] >> 4
        body = frame[4:]
        inner = dpkt.ip.IP(body) if version == 4 else dpkt.ip6.IP6(body) if version == 6 else None
    else:
        raise CaptureError(
            f"link type {linktype} is not supported (supported: {', '.join(map(str, SUPPORTED_LINKTYPES))})"
        )
    return inner if isinstance(inner, dpkt.ip.IP | dpkt.ip6.IP6) else None


def _transport(ip: dpkt.Packet) -> tuple[int, str, str, dpkt.Packet, int] | None:
    """(proto, src, dst, tcp-or-udp, bytes after the IP header) or None.

    Lengths come from the IP header, not the captured bytes: a short snap length must not shrink X.
    """
    if isinstance(ip, dpkt.ip.IP):
        if ip.offset:
            return None  # a later fragment: its bytes belong to the first one's datagram
        src, dst = socket.inet_ntop(socket.AF_INET, ip.src), socket.inet_ntop(socket.AF_INET, ip.dst)
        # ip.len is 0 for TSO super-segments seen on the sending host; fall back to what was captured.
        after = ip.len - ip.hl * 4 if ip.len else len(bytes(ip.data))
    else:
        src, dst = socket.inet_ntop(socket.AF_INET6, ip.src), socket.inet_ntop(socket.AF_INET6, ip.dst)
        ext = sum(h.length for h in getattr(ip, "all_extension_headers", []))
        after = ip.plen - ext if ip.plen else len(bytes(ip.data))
    seg = ip.data
    if isinstance(seg, dpkt.tcp.TCP):
        return 6, src, dst, seg, after
    if isinstance(seg, dpkt.udp.UDP):
        return 17, src, dst, seg, after
    return None


@dataclass(slots=True)
class CaptureInfo:
    path: str
    format: str
    linktypes: list[int]
    packets: int = 0
    ip_packets: int = 0
    skipped: int = 0  # frames that could not be decoded
    first_ts: float | None = None
    last_ts: float | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "format": self.format,
            "linktypes": self.linktypes,
            "packets": self.packets,
            "tcp_udp_packets": self.ip_packets,
            "skipped": self.skipped,
            "first_ts": self.first_ts,
            "last_ts": self.last_ts,
        }


@contextlib.contextmanager
def _frames(path: Path) -> Iterator[tuple[str, Iterator[tuple[float, int, bytes]]]]:
    """The file's format and its (ts, linktype, frame) iterator."""
    try:
        f = path.open("rb")
    except FileNotFoundError:
        raise ParameterError("capture", f"file {str(path)!r} does not exist") from None
    except IsADirectoryError:
        raise ParameterError("capture", f"{str(path)!r} is a directory, not a capture file") from None
    with f:
        magic = f.read(4)
        f.seek(0)
        if magic == _PCAPNG_MAGIC:
            yield "pcapng", _pcapng_packets(f)
        elif magic in _PCAP_MAGICS:
            yield "pcap", _pcap_packets(f)
        elif not magic:
            raise CaptureError(f"capture {str(path)!r} is empty")
        else:
            raise CaptureError(f"{str(path)!r} is neither pcap nor pcapng (magic {magic.hex()})")


def iter_ip(pcap_path: str | os.PathLike[str]) -> Iterator[tuple[float, dpkt.Packet]]:
    """(ts, IPv4/IPv6 layer) of every decodable frame, in file order (for tools that need payloads)."""
    with _frames(Path(pcap_path)) as (_, source):
        for ts, linktype, frame in source:
            try:
                ip = _ip_layer(linktype, frame)
            except (dpkt.UnpackError, struct.error, ValueError):
                continue
            if ip is not None:
                yield ts, ip


def read_packets(pcap_path: str | os.PathLike[str]) -> tuple[list[Packet], CaptureInfo]:
    """Decode every TCP/UDP packet of a pcap or pcapng file, sorted by time."""
    path = Path(pcap_path)
    packets: list[Packet] = []
    trackers: dict[tuple, _SeqTracker] = {}
    with _frames(path) as (fmt, source):
        info = CaptureInfo(str(path), fmt, [])
        for ts, linktype, frame in source:
            info.packets += 1
            if linktype not in info.linktypes:
                info.linktypes.append(linktype)
            info.first_ts = ts if info.first_ts is None else min(info.first_ts, ts)
            info.last_ts = ts if info.last_ts is None else max(info.last_ts, ts)
            try:
                ip = _ip_layer(linktype, frame)
                tp = _transport(ip) if ip is not None else None
            except (dpkt.UnpackError, struct.error, ValueError):
                info.skipped += 1
                continue
            if tp is None:
                continue
            proto, src, dst, seg, after = tp
            if proto == 6:
                payload = max(0, after - seg.off * 4)
                unique, retrans, keepalive = payload, False, False
                if payload:
                    seq = seg.seq + (1 if seg.flags & dpkt.tcp.TH_SYN else 0)
                    key = (src, seg.sport, dst, seg.dport)
                    tracker = trackers.get(key)
                    if tracker is None or (seg.flags & dpkt.tcp.TH_SYN):
                        tracker = trackers[key] = _SeqTracker()
                    unique, retrans, keepalive = tracker.feed(seq, payload)
            else:
                payload = max(0, after - 8)
                unique, retrans, keepalive = payload, False, False
            info.ip_packets += 1
            packets.append(
                Packet(ts, proto, src, seg.sport, dst, seg.dport, payload, unique, retrans, keepalive)
            )
    packets.sort(key=lambda p: p.ts)  # stable: several interfaces interleave slightly out of order
    return packets, info
