"""Does a trace link deliver what its trace offers? (``qoelab link check --trace``, issue 37)

For each traced direction, a sender keeps the link's queue full with full-size UDP datagrams (one
per delivery opportunity: 1500 IP bytes) for ``duration_s`` and a receiver on the far side bins
what arrives per 100 ms on the host's monotonic clock. The emulator reports when its trace's time 0
was (``trace_t0_ns``, the same clock), so the opportunities the trace offered in each bin are known
exactly: those whose time plus the direction's one-way delay falls in it. The check compares the
two totals (``delivered_bps`` against ``expected_bps``, net of the configured random loss) and
correlates the two series. The first half-second is left out: the queue is filling.

This is Mahimahi's own view of a trace link (its ``mm-graph`` plots capacity offered against
throughput); the thresholds are the issue's: delivered within 2 % of expected, correlation of the
per-100 ms series at least 0.98.
"""

from __future__ import annotations

import socket
import struct
import threading
import time
from typing import TYPE_CHECKING, Any

import numpy as np

from qoelab.emulation import traces
from qoelab.emulation.system import in_netns

if TYPE_CHECKING:
    from qoelab.emulation.topology import EmulatedLink

BIN_S = 0.1
WARMUP_S = 0.5
MAX_DURATION_S = 120.0
DELIVERED_TOLERANCE = 0.02
MIN_CORRELATION = 0.98
PORTS = {"up": 5601, "down": 5602}
IP_UDP_HEADERS = 28
SO_TIMESTAMPNS = getattr(socket, "SO_TIMESTAMPNS", 35)  # Linux; Python may not name it


def _sender(sock: socket.socket, rate_bps: float, payload: int, until: float) -> int:
    """Paced full-size datagrams until ``until`` (monotonic); returns how many were sent."""
    data = b"\0" * payload
    gap = (payload + IP_UDP_HEADERS) * 8 / rate_bps
    sent, start = 0, time.monotonic()
    while (now := time.monotonic()) < until:
        due = int((now - start) / gap) + 1
        while sent < due:
            try:
                sock.send(data)
            except (BlockingIOError, ConnectionRefusedError):
                break
            sent += 1
        time.sleep(0.0005)
    return sent


def _receiver(sock: socket.socket, until: float, stamps: list[int]) -> None:
    """Arrival times from the kernel (SO_TIMESTAMPNS, taken when the datagram reached the socket),
    so a receiving thread the host schedules late does not move packets between bins; moved to
    the monotonic clock of the emulator's trace."""
    sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
    sock.settimeout(0.2)
    to_mono = time.monotonic_ns() - time.time_ns()
    space = socket.CMSG_SPACE(16)
    while time.monotonic() < until:
        try:
            _data, anc, _flags, _addr = sock.recvmsg(65536, space)
        except TimeoutError:
            continue
        for level, kind, raw in anc:
            if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS and len(raw) >= 16:
                sec, nsec = struct.unpack("qq", raw[:16])
                stamps.append(sec * 1_000_000_000 + nsec + to_mono)
                break
        else:
            stamps.append(time.monotonic_ns())


def _direction(link: EmulatedLink, name: str, duration_s: float, t0_ns: int) -> dict[str, Any]:
    d = link.profile.down if name == "down" else link.profile.up
    trace = traces.load_cached(d.trace or "")
    src, dst = ("server", "client") if name == "down" else ("client", "server")
    ns = {"client": link.client_ns, "server": link.server_ns}
    addr = {"client": link.client_ip, "server": link.server_ip}
    port = PORTS[name]
    with in_netns(ns[dst]):
        rx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        rx.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16 << 20)
        rx.bind((addr[dst], port))
    with in_netns(ns[src]):
        tx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        tx.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4 << 20)
        tx.connect((addr[dst], port))
    payload = link.profile.mtu - IP_UDP_HEADERS
    # Faster than the trace's busiest 100 ms, so that the queue never runs dry.
    rate = 1.25 * max(float(trace.series_bps(int(BIN_S * 1000)).max()), trace.mean_bps)
    stamps: list[int] = []
    begin = time.monotonic()
    end = begin + duration_s
    with tx, rx:
        receiving = threading.Thread(target=_receiver, args=(rx, end + d.delay_s + 1.0, stamps), daemon=True)
        receiving.start()
        sent = _sender(tx, rate, payload, end)
        receiving.join()
    # Bins on the receiver's clock, from the end of the warm-up to the end of sending (shifted by
    # the delay: what arrives then left the queue while it was still full).
    first = begin + WARMUP_S + d.delay_s
    nbins = int((duration_s - WARMUP_S) / BIN_S)
    edges_ns = (first + np.arange(nbins + 1) * BIN_S) * 1e9
    got, _ = np.histogram(np.array(stamps, dtype=np.int64), bins=edges_ns)
    # The opportunities the trace offered in the same bins (their time + delay on that clock).
    shift_ns = t0_ns + d.delay_s * 1e9  # an opportunity at trace time t arrives at t0 + t + delay
    times_ms = trace.opportunities_ms((edges_ns[0] - shift_ns) / 1e6, (edges_ns[-1] - shift_ns) / 1e6)
    offered, _ = np.histogram(times_ms * 1e6 + shift_ns, bins=edges_ns)
    keep = 1 - d.mean_loss_pct() / 100
    span = nbins * BIN_S
    delivered_bps = float(got.sum()) * link.profile.mtu * 8 / span
    expected_bps = float(offered.sum()) * link.profile.mtu * 8 / span * keep
    corr = float(np.corrcoef(got, offered)[0, 1]) if got.std() > 0 and offered.std() > 0 else None
    ratio = delivered_bps / expected_bps if expected_bps else None
    ok = (
        ratio is not None
        and abs(ratio - 1) <= DELIVERED_TOLERANCE
        and (corr is None or corr >= MIN_CORRELATION)
    )
    return {
        "trace": trace.name,
        "sha256": trace.sha256,
        "period_s": trace.period_ms / 1000,
        "window_s": round(span, 3),
        "expected_bps": expected_bps,
        "delivered_bps": delivered_bps,
        "delivered_ratio": ratio,
        "series_corr": corr,
        "sender_bps": rate,
        "sent": sent,
        "received": len(stamps),
        "ok": bool(ok),
    }


def check_traces(link: EmulatedLink, duration_s: float | None = None) -> dict[str, Any]:
    """``{"down": {...}, "up": {...}, "ok"}`` for the link's traced directions, both at once.

    ``duration_s``: default one period of the longest trace, at most 120 s."""
    if link.emulator is None:
        raise ValueError("a trace check needs the userspace link emulator")
    traced = {n: d for n, d in (("down", link.profile.down), ("up", link.profile.up)) if d.trace}
    if not traced:
        raise ValueError("the link has no trace to check (give --trace or --up-trace)")
    periods = [traces.load_cached(d.trace or "").period_ms / 1000 for d in traced.values()]
    duration = min(MAX_DURATION_S, duration_s or max(periods))
    if duration < WARMUP_S + 1:
        raise ValueError(f"duration: must be at least {WARMUP_S + 1:g} s, got {duration:g}")
    stats = link.emulator.stats()
    out: dict[str, Any] = {}
    threads = {
        name: threading.Thread(
            target=lambda name=name: out.__setitem__(
                name, _direction(link, name, duration, int(stats[name]["trace_t0_ns"]))
            )
        )
        for name in traced
    }
    for t in threads.values():
        t.start()
    for t in threads.values():
        t.join()
    missing = [n for n in traced if n not in out]
    if missing:
        raise RuntimeError(f"the trace check of {', '.join(missing)} did not finish (see the log)")
    out["ok"] = all(out[n]["ok"] for n in traced)
    out["thresholds"] = {"delivered_within": DELIVERED_TOLERANCE, "min_series_corr": MIN_CORRELATION,
                         "bin_s": BIN_S, "warmup_s": WARMUP_S}  # fmt: skip
    return out
