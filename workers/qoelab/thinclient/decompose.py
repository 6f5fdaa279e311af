"""Paper 002's delay decomposition, per write, from the replay logs and the emulator's packet records.

Paper 002 (notes/seed-thinclient-tcp.md §3.1) splits each packet's one-way delay, server application
send -> client application receive, into the time in the server (buffering and transmission), the
retransmission delay (a drop at the router until a copy reaches the router again), the time in the
router (queueing and transmission), propagation, and the time in the client (head-of-line blocking).
Every instant needed is on the host's ``CLOCK_MONOTONIC``, which both namespaces and the emulator
share, so nothing is estimated:

* ``app_ns``: the server application wrote it (tc-replay's send log);
* ``arrival_ns`` of the **first** packet that carried the write's last byte: it reached the router
  (the emulator read it from the server's TUN device, microseconds after the kernel sent it);
* ``arrival_ns`` of the copy that got through (a later one when the first was dropped);
* that copy's end of serialisation (``depart_ns`` minus the configured delay) and ``depart_ns``
  (written to the client's TUN device);
* the client application read the last byte (tc-replay's receive log).

So ``server = first arrival - app``, ``retransmission = delivered copy's arrival - first arrival``,
``router = end of serialisation - arrival``, ``propagation = depart - end of serialisation`` and
``client = receive - depart``; the five add up to the measured one-way delay exactly. The emulator
sits where the paper's router is, so this needs neither ``SO_TIMESTAMPING`` nor eBPF: the router's
input *is* the server's transmission time as the paper defines it (the LAN leg's constant 1 ms is
carried after the bottleneck, see docs/thinclient-tcp.md).

A write is followed by its **last** byte, because the application has the write when that byte is
read. Packets are found by the sender's local port (``replay.ports``) and the stream offset tc-replay
logs per write; the SYN gives the initial sequence number.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import numpy as np

COMPONENTS = ("server", "retransmission", "router", "propagation", "client")
SYN, FORWARDED = 0x02, 0
SEQ_MOD = 1 << 32


def streams(packets: np.ndarray, ports: dict[int, int]) -> dict[int, dict[str, np.ndarray]]:
    """Per connection: its data packets' stream ranges and times, ordered by arrival at the router
    (a connection whose SYN is not in the records is left out: its offsets cannot be placed)."""
    out: dict[int, dict[str, np.ndarray]] = {}
    for conn, port in ports.items():
        mine = packets[packets["sport"] == port]
        syn = mine[(mine["tcp_flags"] & SYN) != 0]
        if not syn.size:
            continue  # the records began after the handshake: nothing of this connection can be placed
        base = (int(syn["seq"][0]) + 1) % SEQ_MOD  # stream byte 0
        data = mine[mine["payload_len"] > 0]
        data = data[np.argsort(data["arrival_ns"], kind="stable")]
        start = (data["seq"].astype(np.int64) - base) % SEQ_MOD
        out[conn] = {
            "start": start,
            "end": start + data["payload_len"].astype(np.int64),
            "arrival": data["arrival_ns"].astype(np.int64),
            "depart": data["depart_ns"].astype(np.int64),
            "forwarded": data["fate"] == FORWARDED,
        }
    return out


def decompose(
    writes: list[dict[str, Any]], packets: np.ndarray, ports: dict[int, int], delay_ns: int
) -> list[dict[str, Any]]:
    """``writes`` (``replay.run``'s records) with the five components in ms added to each.

    ``packets`` are the emulator's server->client records, ``delay_ns`` the delay it adds after
    serialisation. A write whose last byte never got through the router, or was never received,
    gets ``None`` components and ``"complete": False``.
    """
    conns = streams(packets, ports)
    out = []
    for w in writes:
        row = dict(w)
        row.update({f"{c}_ms": None for c in COMPONENTS})
        row["drops"] = 0
        row["complete"] = False
        c = conns.get(w["conn"])
        if c is not None and w.get("delay_ms") is not None:
            last = w["off"] + max(w["nbytes"], 24) - 1  # tc-replay pads a write to its 24-byte header
            hit = (c["start"] <= last) & (last < c["end"])
            idx = np.flatnonzero(hit)
            through = idx[c["forwarded"][idx]]
            if through.size:
                first, got = idx[0], through[np.argmin(c["depart"][through])]
                recv_ns = w["app_ns"] + round(w["delay_ms"] * 1e6)
                tx_end = int(c["depart"][got]) - delay_ns
                parts = (
                    int(c["arrival"][first]) - w["app_ns"],
                    int(c["arrival"][got] - c["arrival"][first]),
                    tx_end - int(c["arrival"][got]),
                    delay_ns,
                    recv_ns - int(c["depart"][got]),
                )
                row.update({f"{name}_ms": v / 1e6 for name, v in zip(COMPONENTS, parts, strict=True)})
                row["drops"] = int(np.count_nonzero(~c["forwarded"][idx]))
                row["complete"] = True
        out.append(row)
    return out


def ccdf(values: np.ndarray, points_ms: np.ndarray) -> list[float]:
    """Share of ``values`` above each of ``points_ms`` (the paper's Fig. 6 curves)."""
    if not values.size:
        return [0.0] * len(points_ms)
    ordered = np.sort(values)
    above = ordered.size - np.searchsorted(ordered, points_ms, side="right")
    return (above / ordered.size).tolist()


CCDF_POINTS_MS = np.round(np.logspace(-1, 4, 51), 4)  # 0.1 ms .. 10 s, ten points per decade


def ccdfs(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per kind and component (and the total one-way delay), the CCDF at ``CCDF_POINTS_MS``."""
    groups: dict[tuple[str, str], list[float]] = defaultdict(list)
    for r in rows:
        if r["delay_ms"] is not None:
            groups[r["kind"], "total"].append(r["delay_ms"])
        if r["complete"]:
            for c in COMPONENTS:
                groups[r["kind"], c].append(r[f"{c}_ms"])
    out = []
    for (kind, component), values in sorted(groups.items()):
        shares = ccdf(np.asarray(values), CCDF_POINTS_MS)
        # Zeros too: the dashboard averages each point over repetitions, and a missing zero would
        # leave only the repetitions that reached that far.
        out += [
            {"kind": kind, "component": component, "x_ms": float(x), "ccdf": s}
            for x, s in zip(CCDF_POINTS_MS, shares, strict=True)
        ]
    return out


def dominant(rows: list[dict[str, Any]], kind: str, above_ms: float) -> dict[str, float]:
    """Of the ``kind`` writes delayed more than ``above_ms``, each component's share of their total
    delay (what the paper reads off Fig. 6: which component makes the tail)."""
    tail = [r for r in rows if r["kind"] == kind and r["complete"] and r["delay_ms"] > above_ms]
    total = sum(r["delay_ms"] for r in tail)
    if not tail or total <= 0:
        return {}
    return {c: sum(r[f"{c}_ms"] for r in tail) / total for c in COMPONENTS}
