"""The delay decomposition and the paper's metrics on hand-built packet records (exact numbers)."""

from __future__ import annotations

import numpy as np
import pytest

from qoelab.emulation import records
from qoelab.thinclient import decompose, metrics
from qoelab.thinclient.model import TwoStateModel

MS = 1_000_000
ISN = 4_294_967_000  # close to 2^32: the stream wraps, as real ones may
PORT = 40_001
DELAY = 22 * MS


def packet(arrival: int, seq: int, payload: int, *, fate: int = 0, service: int = 1 * MS, flags: int = 0x18):
    start = -1 if fate else arrival + service
    depart = -1 if fate else start + MS + DELAY  # 1 ms of serialisation, then the delay element
    return (arrival, start, depart, 0, 40 + payload, payload, seq % 2**32, PORT, 47100, flags, 1, fate, b"")


def table(rows: list[tuple]) -> np.ndarray:
    return np.array(rows, dtype=records.DTYPE)


def write(wid: int, off: int, nbytes: int, app: int, delay_ms: float | None, kind: str = "interactive"):
    """One line of tc-replay's joined log (``replay.run``'s record) for connection 0."""
    return {"conn": 0, "id": wid, "kind": kind, "nbytes": nbytes, "app_ns": app, "off": off,
            "sent_ms": 0.0, "delay_ms": delay_ms}  # fmt: skip


def test_components_add_up_and_a_drop_becomes_retransmission_delay() -> None:
    syn = packet(0, ISN, 0, flags=0x02)
    base = ISN + 1
    pkts = table(
        [
            syn,
            # write 0: 4 index bytes + a 100-byte write, one segment, through at once
            packet(10 * MS, base, 104),
            # write 1 (bytes 104..203): first copy dropped at the router, resent 300 ms later
            packet(20 * MS, base + 104, 100, fate=records.QUEUE_DROP),
            packet(320 * MS, base + 104, 100, service=5 * MS),
        ]
    )
    writes = [
        write(0, 0, 104, 9 * MS, (10 + 1 + 1 + 22 + 0.5) - 9),  # received 0.5 ms after the router sent it
        write(1, 104, 100, 19 * MS, (320 + 5 + 1 + 22 + 2) - 19),
    ]
    rows = decompose.decompose(writes, pkts, {0: PORT}, DELAY)
    first, second = rows
    assert first["complete"] and second["complete"]
    assert first["server_ms"] == pytest.approx(1.0)
    assert first["retransmission_ms"] == 0
    assert first["router_ms"] == pytest.approx(2.0)  # 1 ms waiting + 1 ms serialisation
    assert first["propagation_ms"] == pytest.approx(22.0)
    assert first["client_ms"] == pytest.approx(0.5)
    assert second["server_ms"] == pytest.approx(1.0)
    assert second["retransmission_ms"] == pytest.approx(300.0)
    assert second["router_ms"] == pytest.approx(6.0)
    assert second["client_ms"] == pytest.approx(2.0)
    assert second["drops"] == 1
    for r in rows:
        total = sum(r[f"{c}_ms"] for c in decompose.COMPONENTS)
        assert total == pytest.approx(r["delay_ms"])


def test_a_write_is_followed_by_its_last_byte() -> None:
    """A 3000-byte write in three segments: the write's delay ends with the segment holding its end."""
    base = ISN + 1
    pkts = table(
        [packet(0, ISN, 0, flags=0x02)] + [packet((10 + i) * MS, base + 4 + 1000 * i, 1000) for i in range(3)]
    )
    rows = decompose.decompose([write(0, 4, 3000, 10 * MS, 40.0, "bulk")], pkts, {0: PORT}, DELAY)
    assert rows[0]["server_ms"] == pytest.approx(2.0)  # its last segment reached the router at 12 ms


def test_unplaceable_writes_are_marked_incomplete() -> None:
    pkts = table([packet(0, ISN, 0, flags=0x02), packet(10 * MS, ISN + 1, 104, fate=records.QUEUE_DROP)])
    never_through = write(0, 0, 104, 9 * MS, 500.0)
    unreceived = write(1, 104, 100, 9 * MS, None)
    other_conn = {**write(2, 0, 104, 9 * MS, 30.0), "conn": 5}
    rows = decompose.decompose([never_through, unreceived, other_conn], pkts, {0: PORT}, DELAY)
    assert [r["complete"] for r in rows] == [False, False, False]
    assert all(r["server_ms"] is None for r in rows)


def test_ccdf_and_dominant_component() -> None:
    assert decompose.ccdf(np.array([1.0, 2.0, 3.0, 4.0]), np.array([0.5, 2.0, 4.0])) == [1.0, 0.5, 0.0]
    late = {"kind": "interactive", "complete": True, "retransmission_ms": 0.0, "propagation_ms": 22.0}
    rows = [
        {**late, "delay_ms": 200.0, "server_ms": 150.0, "router_ms": 20.0, "client_ms": 8.0},
        {**late, "delay_ms": 100.0, "server_ms": 0.0, "router_ms": 78.0, "client_ms": 0.0},
    ]
    shares = decompose.dominant(rows, "interactive", 130.0)
    assert shares["server"] == pytest.approx(0.75)
    assert sum(shares.values()) == pytest.approx(1.0)
    assert decompose.dominant(rows, "interactive", 500.0) == {}
    curves = decompose.ccdfs(rows)
    total = {c["x_ms"]: c["ccdf"] for c in curves if c["component"] == "total"}
    assert total[min(total)] == 1.0 and total[max(total)] == 0.0
    assert len(total) == len(decompose.CCDF_POINTS_MS)  # zeros kept: repetitions average point by point


def test_eq4_constants_match_the_notes() -> None:
    """notes §6: with Tables 1-2, K = 0.270 s as printed and 0.302 s re-derived."""
    k = metrics.eq4_constants(TwoStateModel())
    assert k["printed"] == pytest.approx(0.270, abs=0.001)
    assert k["rederived"] == pytest.approx(0.301, abs=0.001)
    got = metrics.intervals({"r_I150": 5.0e-3, "r_I1000": 0.0}, TwoStateModel())
    assert got["T_I150_s"] == pytest.approx(54.1, abs=0.1)  # the paper: 55 s (proposed, large)
    assert got["T_I1000_s"] is None  # no event: longer than the run, not a number


def test_exceedance_uses_thresholds_minus_t0() -> None:
    delays = np.array([100.0, 129.9, 130.1, 979.0, 981.0])
    r = metrics.exceedance(delays, t0_ms=20.0)
    assert r == {"r_I150": pytest.approx(3 / 5), "r_I1000": pytest.approx(1 / 5)}
    assert metrics.exceedance(np.array([]), 20.0) == {"r_I150": None, "r_I1000": None}
    assert metrics.rto_per_connection(31, 100, 3000.0) == pytest.approx(0.031)
