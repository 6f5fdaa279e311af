"""Server->client payload timelines: from a capture, into flows, and back to the model's numbers.

Paper 002 built its model from captures (notes/seed-thinclient-tcp.md §1.3): drop the ACKs, take
the server's response packets in time order, and call a packet that comes more than 6.3 ms after
the previous one the start of a new flow; a flow of one packet is interactive, of two or more bulk.
``connections``/``timeline`` do the first part on a capture (retransmitted sequence ranges count
once), ``flows`` the second, and ``fit`` computes Table 1 and 2 of the paper from the flows: alpha, beta,
the four start-to-start intervals, c_B and bytes per packet. A capture of this lab's own rd_qoe
trials becomes a trace source that way, and the generator (``model``) is tested by reading its
output back. ``write_pcap`` goes the other way: the model's writes as a capture other tools read.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from statistics import fmean

from qoelab.thinclient.model import BULK, FLOW_THRESHOLD_S, INTERACTIVE, TwoStateModel, Write


@dataclass(frozen=True)
class Flow:
    start: float
    packets: int
    nbytes: int
    kind: str


Connection = tuple[str, int, str, int]  # (server ip, server port, client ip, client port)


def connections(
    pcap: Path, server_ip: str | None = None, server_port: int | None = None
) -> dict[Connection, list[tuple[float, int]]]:
    """(time, payload bytes) of the server's data segments, per TCP connection, each in time order.

    pcap or pcapng (Ethernet, Linux cooked v1/v2, raw IP, loopback), read by the lab's one capture
    reader (``qoelab.packets.pcapfile.read_packets``). Pure ACKs carry nothing and are left out; a segment
    that only repeats sequence bytes already seen (a retransmission, or a keep-alive probe) is left out,
    and one that repeats some counts its new bytes only. The server side of a connection is the
    endpoint that matches ``server_ip`` and ``server_port`` (those given); when both ends match, or
    neither filter is given, it is the end that sent more payload bytes (on a tie, the lower port,
    where servers listen). Raises ``CaptureError``/``ParameterError`` for an unreadable capture.
    """
    import ipaddress

    from qoelab.errors import ParameterError
    from qoelab.packets.pcapfile import read_packets

    if server_ip is not None:
        try:  # the reader writes addresses in their short form (IPv6 compressed)
            server_ip = str(ipaddress.ip_address(server_ip))
        except ValueError:
            raise ParameterError("server_ip", f"{server_ip!r} is not an IPv4 or IPv6 address") from None
    packets, _info = read_packets(pcap)
    sent: dict[tuple, dict[tuple[str, int], int]] = {}
    for p in packets:
        if p.proto == 6:
            ends = sent.setdefault(p.conn, {(p.src, p.sport): 0, (p.dst, p.dport): 0})
            ends[p.src, p.sport] += p.unique
    server_of: dict[tuple, tuple[str, int]] = {}
    for conn, ends in sent.items():
        fits = [
            e
            for e in ends
            if (server_ip is None or e[0] == server_ip) and (server_port is None or e[1] == server_port)
        ]
        if fits:
            server_of[conn] = max(fits, key=lambda e: (ends[e], -e[1]))
    out: dict[Connection, list[tuple[float, int]]] = {}
    for p in packets:  # read_packets sorts by time
        if p.proto == 6 and p.unique > 0 and server_of.get(p.conn) == (p.src, p.sport):
            out.setdefault((p.src, p.sport, p.dst, p.dport), []).append((p.ts, p.unique))
    return out


def timeline(pcap: Path, server_ip: str, server_port: int | None = None) -> list[tuple[float, int]]:
    """(time, payload bytes) of every TCP segment with data from ``server_ip`` (and port), all
    connections merged in time order; a retransmitted sequence range counts once (``connections``)."""
    return sorted(seg for segs in connections(pcap, server_ip, server_port).values() for seg in segs)


def flows(packets: Iterable[tuple[float, int]], threshold: float = FLOW_THRESHOLD_S) -> list[Flow]:
    """Group time-ordered (time, bytes) packets into flows by the paper's gap rule."""
    out: list[Flow] = []
    start = last = None
    n = nbytes = 0
    for t, size in packets:
        if last is not None and t - last <= threshold:
            n += 1
            nbytes += size
        else:
            if start is not None:
                out.append(Flow(start, n, nbytes, INTERACTIVE if n == 1 else BULK))
            start, n, nbytes = t, 1, size
        last = t
    if start is not None:
        out.append(Flow(start, n, nbytes, INTERACTIVE if n == 1 else BULK))
    return out


def transitions(per_connection: Iterable[Sequence[Flow]]) -> dict[tuple[str, str], list[float]]:
    """Start-to-start intervals by (kind, next kind), each flow paired only with the next flow of
    its own connection (the paper's flows share one connection; two connections are two streams)."""
    by: dict[tuple[str, str], list[float]] = {}
    for found in per_connection:
        for a, b in zip(found, found[1:], strict=False):
            by.setdefault((a.kind, b.kind), []).append(b.start - a.start)
    return by


def fit(found: Sequence[Flow], **shapes: object) -> TwoStateModel:
    """Table 1 and 2's parameters of a flow sequence, as a model (shapes as given, else defaults).

    Raises ValueError when a transition never occurs (too short a trace to fit).
    """
    by = transitions([found])
    missing = [f"{a}->{b}" for a in (INTERACTIVE, BULK) for b in (INTERACTIVE, BULK) if (a, b) not in by]
    if missing:
        raise ValueError(f"too short to fit: no {', '.join(missing)} transition in {len(found)} flows")
    from_i = sum(len(by[INTERACTIVE, k]) for k in (INTERACTIVE, BULK))
    from_b = sum(len(by[BULK, k]) for k in (INTERACTIVE, BULK))
    bulk = [f for f in found if f.kind == BULK]
    inter = [f for f in found if f.kind == INTERACTIVE]
    return TwoStateModel(
        alpha=len(by[INTERACTIVE, BULK]) / from_i,
        beta=len(by[BULK, INTERACTIVE]) / from_b,
        t_ii=fmean(by[INTERACTIVE, INTERACTIVE]),
        t_ib=fmean(by[INTERACTIVE, BULK]),
        t_bi=fmean(by[BULK, INTERACTIVE]),
        t_bb=fmean(by[BULK, BULK]),
        c_b=fmean(f.packets for f in bulk),
        bytes_interactive=fmean(f.nbytes for f in inter),
        bytes_bulk=sum(f.nbytes for f in bulk) / sum(f.packets for f in bulk),
        **shapes,  # type: ignore[arg-type]
    )


def write_pcap(
    path: Path,
    writes: Sequence[Write],
    server: str = "10.0.0.2",
    client: str = "10.0.0.1",
    port: int = 5900,
    epoch: float = 1_700_000_000.0,
    retransmit_every: int = 0,
) -> Path:
    """``writes`` as one server->client connection in an Ethernet pcap: one segment per write and a
    payload-free ACK 1 ms later; every ``retransmit_every``-th segment is sent again 200 ms later
    (what ``connections`` must count once)."""
    import socket

    import dpkt

    seq = 1000
    with Path(path).open("wb") as fh:
        out = dpkt.pcap.Writer(fh, linktype=dpkt.pcap.DLT_EN10MB)
        for i, w in enumerate(writes):
            data = dpkt.tcp.TCP(sport=port, dport=40000, seq=seq, flags=dpkt.tcp.TH_ACK, data=b"x" * w.nbytes)
            ip = dpkt.ip.IP(src=socket.inet_aton(server), dst=socket.inet_aton(client), p=6, data=data)
            out.writepkt(bytes(dpkt.ethernet.Ethernet(data=ip)), ts=epoch + w.t)
            if retransmit_every and i % retransmit_every == 0:
                out.writepkt(bytes(dpkt.ethernet.Ethernet(data=ip)), ts=epoch + w.t + 0.2)
            ack = dpkt.tcp.TCP(sport=40000, dport=port, flags=dpkt.tcp.TH_ACK)
            back = dpkt.ip.IP(src=socket.inet_aton(client), dst=socket.inet_aton(server), p=6, data=ack)
            out.writepkt(bytes(dpkt.ethernet.Ethernet(data=back)), ts=epoch + w.t + 0.001)
            seq += w.nbytes
    return Path(path)
