"""Server->client payload timelines: from a capture, into flows, and back to the model's numbers.

Paper 002 built its model from captures (notes/seed-thinclient-tcp.md §1.3): drop the ACKs, take
the server's response packets in time order, and call a packet that comes more than 6.3 ms after
the previous one the start of a new flow; a flow of one packet is interactive, of two or more bulk.
``timeline`` does the first part on a pcap (dpkt; retransmitted sequence ranges count once),
``flows`` the second, and ``fit`` computes Table 1 and 2 of the paper from the flows: alpha, beta,
the four start-to-start intervals, c_B and bytes per packet. A capture of this lab's own rd_qoe
trials becomes a trace source that way, and the generator (``model``) is tested by reading its
output back.
"""

from __future__ import annotations

import socket
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from statistics import fmean

from qoelab.thinclient.model import BULK, FLOW_THRESHOLD_S, INTERACTIVE, TwoStateModel


@dataclass(frozen=True)
class Flow:
    start: float
    packets: int
    nbytes: int
    kind: str


def timeline(pcap: Path, server_ip: str, server_port: int | None = None) -> list[tuple[float, int]]:
    """(time, payload bytes) of every TCP segment with data from ``server_ip`` (and port), in time
    order; a segment whose sequence range was already seen (a retransmission) is left out."""
    import dpkt

    out: list[tuple[float, int]] = []
    seen: set[tuple[int, int, int]] = set()  # (port pair, seq, length)
    want = socket.inet_aton(server_ip)
    with pcap.open("rb") as fh:
        reader = dpkt.pcapng.Reader(fh) if pcap.suffix == ".pcapng" else dpkt.pcap.Reader(fh)
        link = reader.datalink()
        for ts, buf in reader:
            ip = _ip_of(buf, link)
            if ip is None or ip.src != want or not isinstance(ip.data, dpkt.tcp.TCP):
                continue
            tcp = ip.data
            if not tcp.data or (server_port is not None and tcp.sport != server_port):
                continue
            key = (tcp.sport << 16 | tcp.dport, tcp.seq, len(tcp.data))
            if key in seen:
                continue
            seen.add(key)
            out.append((float(ts), len(tcp.data)))
    out.sort()
    return out


def _ip_of(buf: bytes, link: int):  # noqa: ANN202 - a dpkt IP or None
    import dpkt

    try:
        if link == dpkt.pcap.DLT_EN10MB:
            eth = dpkt.ethernet.Ethernet(buf)
            return eth.data if isinstance(eth.data, dpkt.ip.IP) else None
        if link == dpkt.pcap.DLT_LINUX_SLL:
            sll = dpkt.sll.SLL(buf)
            return sll.data if isinstance(sll.data, dpkt.ip.IP) else None
        if link in (dpkt.pcap.DLT_RAW, 101):  # raw IP (TUN devices)
            return dpkt.ip.IP(buf)
    except (dpkt.UnpackError, ValueError):
        return None
    return None


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


def fit(found: Sequence[Flow], **shapes: object) -> TwoStateModel:
    """Table 1 and 2's parameters of a flow sequence, as a model (shapes as given, else defaults).

    Raises ValueError when a transition never occurs (too short a trace to fit).
    """
    pairs = list(zip(found, found[1:], strict=False))
    by: dict[tuple[str, str], list[float]] = {}
    for a, b in pairs:
        by.setdefault((a.kind, b.kind), []).append(b.start - a.start)
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
