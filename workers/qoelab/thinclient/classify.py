"""Paper 002's flow classification of a capture's server->client traffic (``qoelab thinclient classify``).

The rule (notes/seed-thinclient-tcp.md §1.3, §7.2): take the server's TCP segments that carry
payload, retransmitted sequence ranges removed; a segment more than tau (10^-2.2 s = 6.3 ms) after
the previous payload segment *of its connection* starts a new flow, and so does a connection's first
segment; a flow of one segment is interactive, of two or more bulk. Transitions (alpha, beta) and
start-to-start intervals (t_II … t_BB) pair a flow only with the next flow of its own connection.

Where to capture: the paper classified near the sender (its captures came from the data centre's
core switch, on a LAN with millisecond RTTs), on wire-sized segments. A capture on the server host
itself sees TSO/GSO super-segments (one per several wire segments), which shrinks a bulk block to
fewer, larger segments and can turn a two-segment block into one "interactive" segment: capture on
the sender side of the wire, or turn the offloads off (``ethtool -K IF tso off gso off``). A
capture at the client or behind a WAN splits a block larger than cwnd into RTT-spaced bursts, each
read as a flow of its own (§7.2's caveat).
"""

from __future__ import annotations

import math
from collections import Counter
from pathlib import Path
from typing import Any

from qoelab.packets.pcapfile import CaptureError
from qoelab.thinclient.model import BULK, FLOW_THRESHOLD_S, INTERACTIVE, TwoStateModel
from qoelab.thinclient.trace import Flow, connections, flows, transitions

GAP_CAP_S = 60.0  # Fig. 4 caps an interval at 60 s
BIN = 0.1  # log10 bin width of the gap histogram
_FLOOR_S = 1e-6  # a zero gap (same timestamp) goes into the 1 us bin: pcap's resolution

_PAPER_MODEL = TwoStateModel()
# Tables 1 and 2 of the paper, under this module's keys; flow counts are per 300-s sample.
PAPER: dict[str, float] = {
    "alpha": _PAPER_MODEL.alpha,
    "beta": _PAPER_MODEL.beta,
    "p_I": 0.82,
    "p_B": 0.18,
    "c_B": _PAPER_MODEL.c_b,
    "t_II_s": _PAPER_MODEL.t_ii,
    "t_IB_s": _PAPER_MODEL.t_ib,
    "t_BI_s": _PAPER_MODEL.t_bi,
    "t_BB_s": _PAPER_MODEL.t_bb,
    "flows_interactive_per_300s": 934.1,
    "flows_bulk_per_300s": 198.4,
    "bytes_per_packet_interactive": _PAPER_MODEL.bytes_interactive,
    "bytes_per_packet_bulk": _PAPER_MODEL.bytes_bulk,
    "gap_in_bulk_s": _PAPER_MODEL.gap_bulk,
    "tau_s": FLOW_THRESHOLD_S,
}


def _share(part: int, whole: int) -> float | None:
    return part / whole if whole else None


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def gap_histogram(gaps: list[float]) -> list[dict[str, float | int]]:
    """Fig. 4's histogram: log10 of each gap (capped at 60 s) in bins of 0.1, lower edge as the label.

    Every bin from the lowest to the highest occupied one is listed, empty ones with count 0, so the
    two peaks and the valley between them read straight off the list.
    """
    if not gaps:
        return []
    # Epoch timestamps as floats carry ~0.2 us of noise: rounding the gap to pcap's microsecond, and
    # the log to 6 places, keeps an exact 1 ms (-3.0) out of the bin below it.
    logs = [math.log10(min(max(round(g, 6), _FLOOR_S), GAP_CAP_S)) for g in gaps]
    bins = Counter(math.floor(round(x / BIN, 6)) for x in logs)
    lo, hi = min(bins), max(bins)
    return [{"log10_gap": round(b * BIN, 1), "count": bins.get(b, 0)} for b in range(lo, hi + 1)]


def classify(
    pcap: Path, server_ip: str | None = None, server_port: int | None = None, tau: float = FLOW_THRESHOLD_S
) -> dict[str, Any]:
    """Classify the server's payload segments of ``pcap`` into interactive and bulk flows.

    Returns the measured Table 1–2 values (None where nothing can be computed, e.g. ``c_B`` without a
    bulk flow), the gap histogram and the paper's values under ``"paper"``. The server side of each
    connection: see ``trace.connections``. Raises ``CaptureError`` when there is no server payload.
    """
    per_conn = connections(pcap, server_ip, server_port)
    if not per_conn:
        which = " and ".join(
            f"{name} {value}"
            for name, value in (("ip", server_ip), ("port", server_port))
            if value is not None
        )
        raise CaptureError(
            f"{str(pcap)!r} holds no TCP payload from the server" + (f" ({which})" if which else "")
        )
    found: list[list[Flow]] = []
    gaps: list[float] = []
    for segs in per_conn.values():
        found.append(flows(segs, tau))
        gaps += [b[0] - a[0] for a, b in zip(segs, segs[1:], strict=False)]
    every = [f for fs in found for f in fs]
    inter = [f for f in every if f.kind == INTERACTIVE]
    bulk = [f for f in every if f.kind == BULK]
    by = transitions(found)

    def count(a: str, b: str) -> int:
        return len(by.get((a, b), []))

    bulk_segments = sum(f.packets for f in bulk)
    return {
        "alpha": _share(count(INTERACTIVE, BULK), count(INTERACTIVE, BULK) + count(INTERACTIVE, INTERACTIVE)),
        "beta": _share(count(BULK, INTERACTIVE), count(BULK, INTERACTIVE) + count(BULK, BULK)),
        "p_I": _share(len(inter), len(every)),
        "p_B": _share(len(bulk), len(every)),
        "c_B": _share(bulk_segments, len(bulk)),
        "t_II_s": _mean(by.get((INTERACTIVE, INTERACTIVE), [])),
        "t_IB_s": _mean(by.get((INTERACTIVE, BULK), [])),
        "t_BI_s": _mean(by.get((BULK, INTERACTIVE), [])),
        "t_BB_s": _mean(by.get((BULK, BULK), [])),
        "flows_interactive": len(inter),
        "flows_bulk": len(bulk),
        "bytes_per_packet_interactive": _share(sum(f.nbytes for f in inter), len(inter)),
        "bytes_per_packet_bulk": _share(sum(f.nbytes for f in bulk), bulk_segments),
        "tau_s": tau,
        "connections": len(per_conn),
        "segments": sum(len(segs) for segs in per_conn.values()),
        "gap_histogram": gap_histogram(gaps),
        "paper": dict(PAPER),
    }
