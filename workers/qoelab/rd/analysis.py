"""Slow-motion packet analysis (thesis ch. 4 §4.6.1): response time T, transfer size X and rate X/T.

From a capture taken on the client side of the link, each screen update is measured as:

- start = the last client→server payload packet carrying the input (the last one before the server's
  response begins);
- end = the last server→client payload packet of the response, i.e. before the server goes quiet
  for at least ``quiet_s`` (when a click says the screen last changed more than ``quiet_s`` after
  that, the response is the burst that was arriving at that moment: ``extended_to_pixels``);
- T = end − start, X = server→client payload bytes in (start, end], rate = 8·X/T bit/s.

Updates are anchored on the driver's clicks when a clicks file is given, otherwise segmented by
quiet periods. Every TCP/UDP connection between the client and the server hosts counts (SPICE opens
several channels). The rules, with their edge cases, are in docs/rd-analysis.md; reading the
capture file is ``qoelab.packets.pcapfile``'s.
"""

from __future__ import annotations

import bisect
import ipaddress
import math
import os
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from qoelab.errors import ParameterError
from qoelab.packets.pcapfile import CaptureError, CaptureInfo, Packet, read_packets
from qoelab.rd.clicks import Click
from qoelab.stats import t_half_width

__all__ = [
    "AnalysisResult",
    "CaptureError",
    "Click",
    "Endpoint",
    "Update",
    "analyze",
    "parse_endpoint",
    "read_packets",
]

DEFAULT_GUARD_S = 0.005  # the click may be logged a hair after the kernel stamps the input packet


# --------------------------------------------------------------------------------------------------
# Endpoints


@dataclass(frozen=True, slots=True)
class Endpoint:
    """A host, optionally narrowed to one port (``port=None``: every port of the host)."""

    host: str
    port: int | None = None

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host and self.port is not None else self.host
        return host if self.port is None else f"{host}:{self.port}"

    def to_json(self) -> dict[str, Any]:
        return {"host": self.host, "port": self.port}


def _norm_host(host: str, field_name: str) -> str:
    try:
        return str(ipaddress.ip_address(host))
    except ValueError:
        raise ParameterError(field_name, f"expected an IPv4 or IPv6 address, got {host!r}") from None


def parse_endpoint(text: str, field_name: str = "server") -> Endpoint:
    """``10.0.0.1``, ``10.0.0.1:5900``, ``::1``, ``[::1]:5900`` to an Endpoint."""
    text = text.strip()
    host, port_text = text, None
    if text.startswith("["):
        close = text.find("]")
        if close < 0:
            raise ParameterError(field_name, f"missing ']' in {text!r}")
        host, rest = text[1:close], text[close + 1 :]
        if rest:
            if not rest.startswith(":"):
                raise ParameterError(field_name, f"expected [HOST]:PORT, got {text!r}")
            port_text = rest[1:]
    elif text.count(":") == 1:
        host, port_text = text.split(":")
    port = None
    if port_text is not None:
        if not port_text.isdigit() or not 0 < int(port_text) < 65536:
            raise ParameterError(field_name, f"port must be 1..65535, got {port_text!r}")
        port = int(port_text)
    return Endpoint(_norm_host(host, field_name), port)


# --------------------------------------------------------------------------------------------------
# Results


@dataclass(slots=True)
class Update:
    """One screen update. Times are epoch seconds; T and rate are None when it timed out."""

    index: int
    click_time: float | None
    start: float | None
    end: float | None
    T_s: float | None  # noqa: N815 - the thesis' name
    bytes_down: int  # X: payload on the wire, retransmissions included
    bytes_down_unique: int
    bytes_up: int
    packets_down: int
    packets_up: int
    retransmissions_down: int
    retransmissions_up: int
    rate_bps: float | None
    timed_out: bool
    connections: int
    page: int | None = None
    ratio: float | None = None
    reason: str | None = None  # why it timed out
    extended_to_pixels: bool = False  # the window was extended to the burst running at pixel_stable_t

    @property
    def T_ms(self) -> float | None:  # noqa: N802
        return None if self.T_s is None else self.T_s * 1e3

    def to_json(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "page": self.page,
            "ratio": self.ratio,
            "click_time": self.click_time,
            "start": self.start,
            "end": self.end,
            "T_s": self.T_s,
            "T_ms": self.T_ms,
            "bytes_down": self.bytes_down,
            "bytes_down_unique": self.bytes_down_unique,
            "bytes_up": self.bytes_up,
            "packets_down": self.packets_down,
            "packets_up": self.packets_up,
            "retransmissions_down": self.retransmissions_down,
            "retransmissions_up": self.retransmissions_up,
            "rate_bps": self.rate_bps,
            "connections": self.connections,
            "timed_out": self.timed_out,
            "reason": self.reason,
            "extended_to_pixels": self.extended_to_pixels,
        }


@dataclass(slots=True)
class Stat:
    """Mean with a Student-t 95 % confidence interval, median and 95th percentile."""

    n: int
    mean: float | None
    ci95: float | None  # half-width
    median: float | None
    p95: float | None
    std: float | None

    @classmethod
    def of(cls, values: list[float]) -> Stat:
        if not values:
            return cls(0, None, None, None, None, None)
        a = np.asarray(values, dtype=float)
        n = len(a)
        std = float(a.std(ddof=1)) if n > 1 else None
        ci = t_half_width(std, n) if std is not None else None
        return cls(n, float(a.mean()), ci, float(np.median(a)), float(np.percentile(a, 95)), std)

    def scaled(self, k: float) -> Stat:
        vals = (self.mean, self.ci95, self.median, self.p95, self.std)
        return Stat(self.n, *(None if v is None else v * k for v in vals))

    def to_json(self) -> dict[str, Any]:
        return {"n": self.n, "mean": self.mean, "ci95": self.ci95, "median": self.median, "p95": self.p95,
                "std": self.std}  # fmt: skip


@dataclass(slots=True)
class Summary:
    n: int
    n_timed_out: int
    T_s: Stat  # noqa: N815
    bytes_down: Stat
    rate_bps: Stat

    @classmethod
    def of(cls, updates: list[Update]) -> Summary:
        done = [u for u in updates if not u.timed_out and u.T_s is not None]
        return cls(
            n=len(updates),
            n_timed_out=sum(u.timed_out for u in updates),
            T_s=Stat.of([u.T_s for u in done if u.T_s is not None]),
            bytes_down=Stat.of([float(u.bytes_down) for u in done]),
            rate_bps=Stat.of([u.rate_bps for u in done if u.rate_bps is not None]),
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "n": self.n,
            "n_timed_out": self.n_timed_out,
            "T_ms": self.T_s.scaled(1e3).to_json(),
            "bytes_down": self.bytes_down.to_json(),
            "rate_bps": self.rate_bps.to_json(),
        }


@dataclass(slots=True)
class AnalysisResult:
    updates: list[Update]
    summary: Summary
    server: Endpoint
    client: Endpoint
    mode: str  # "clicks" or "quiet"
    quiet_s: float
    capture: CaptureInfo
    warnings: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "mode": self.mode,
            "quiet_s": self.quiet_s,
            "server": self.server.to_json(),
            "client": self.client.to_json(),
            "capture": self.capture.to_json(),
            "updates": [u.to_json() for u in self.updates],
            "summary": self.summary.to_json(),
            "warnings": self.warnings,
        }


# --------------------------------------------------------------------------------------------------
# Server and client


def _matches(ep: Endpoint, host: str, port: int) -> bool:
    return host == ep.host and (ep.port is None or port == ep.port)


def _detect_server(packets: list[Packet]) -> Endpoint:
    """The (host, port) that sends the most payload; host-wide unless it also talks to itself."""
    sent: dict[tuple[str, int], int] = {}
    for p in packets:
        if p.payload:
            sent[(p.src, p.sport)] = sent.get((p.src, p.sport), 0) + p.payload
    if not sent:
        raise CaptureError("the capture holds no TCP or UDP payload; nothing to analyse")
    host, port = max(sent, key=lambda k: sent[k])
    # On loopback (or any capture where both ends share an address) only the port tells them apart.
    if any(p.src == host and p.dst == host for p in packets):
        return Endpoint(host, port)
    return Endpoint(host, None)


def _detect_client(packets: list[Packet], server: Endpoint) -> Endpoint:
    exchanged: dict[str, int] = {}
    for p in packets:
        if _matches(server, p.src, p.sport) and not _matches(server, p.dst, p.dport):
            exchanged[p.dst] = exchanged.get(p.dst, 0) + p.payload + 1
        elif _matches(server, p.dst, p.dport) and not _matches(server, p.src, p.sport):
            exchanged[p.src] = exchanged.get(p.src, 0) + p.payload + 1
    if not exchanged and server.port is None and any(p.src == p.dst == server.host for p in packets):
        raise ParameterError(
            "server", f"client and server share the address {server.host}; give --server HOST:PORT"
        )
    if not exchanged:
        raise CaptureError(f"no packet in the capture goes to or from the server {server}")
    host = max(exchanged, key=lambda h: exchanged[h])
    if host == server.host and server.port is None:
        raise ParameterError("server", f"client and server share the address {host}; give --server HOST:PORT")
    return Endpoint(host, None)


# --------------------------------------------------------------------------------------------------
# Segmentation


class _Flow:
    """The relevant packets, split by direction, with payload-packet timestamps for bisecting."""

    def __init__(self, packets: list[Packet], server: Endpoint, client: Endpoint) -> None:
        self.rel: list[tuple[Packet, bool]] = []  # (packet, is_down)
        for p in packets:
            from_server, to_server = _matches(server, p.src, p.sport), _matches(server, p.dst, p.dport)
            if from_server and not to_server and p.dst == client.host:
                self.rel.append((p, True))
            elif to_server and not from_server and p.src == client.host:
                self.rel.append((p, False))
        self.ts = [p.ts for p, _ in self.rel]
        self.up_ts = [p.ts for p, down in self.rel if not down and p.effective]
        self.down_ts = [p.ts for p, down in self.rel if down and p.effective]
        self.down_new = [p.unique > 0 for p, down in self.rel if down and p.effective]

    def burst_end(self, j: int, quiet_s: float, limit: float) -> tuple[int, int, bool]:
        """For the burst starting at down_ts[j]: the index of its last payload packet, the index of
        its last packet bringing new bytes (a spurious retransmission after the last new byte adds
        no information, so it does not end the update), and whether the burst was cut by ``limit``
        while still running (the server did not go quiet before the limit)."""
        d, new = self.down_ts, self.down_new
        first, last_new, cut = j, j if new[j] else -1, False
        while j + 1 < len(d) and d[j + 1] - d[j] < quiet_s:
            if d[j + 1] >= limit:
                cut = True
                break
            j += 1
            if new[j]:
                last_new = j
        return j, (last_new if last_new >= first else j), cut

    def measure(self, index: int, first_input: float, start: float, end: float, **extra: Any) -> Update:
        lo = bisect.bisect_left(self.ts, first_input)
        hi = bisect.bisect_right(self.ts, end)
        x = x_unique = up = n_down = n_up = re_down = re_up = 0
        conns = set()
        for p, down in self.rel[lo:hi]:
            if down:
                if p.ts <= start:
                    continue
                x += p.payload
                x_unique += p.unique
                n_down += 1
                re_down += p.retrans
            else:
                up += p.payload
                n_up += 1
                re_up += p.retrans
            if p.effective:
                conns.add(p.conn)
        T = end - start  # noqa: N806
        timed_out = bool(extra.pop("timed_out", False))
        return Update(
            index=index,
            start=start,
            end=None if timed_out else end,
            T_s=None if timed_out else T,
            bytes_down=x,
            bytes_down_unique=x_unique,
            bytes_up=up,
            packets_down=n_down,
            packets_up=n_up,
            retransmissions_down=re_down,
            retransmissions_up=re_up,
            rate_bps=None if timed_out or T <= 0 else 8 * x / T,
            timed_out=timed_out,
            connections=len(conns),
            **extra,
        )


def _empty(index: int, reason: str, **extra: Any) -> Update:
    return Update(index=index, start=None, end=None, T_s=None, bytes_down=0, bytes_down_unique=0, bytes_up=0,
                  packets_down=0, packets_up=0, retransmissions_down=0, retransmissions_up=0, rate_bps=None,
                  timed_out=True, connections=0, reason=reason, **extra)  # fmt: skip


def _by_clicks(
    flow: _Flow,
    clicks: list[Click],
    quiet_s: float,
    timeout_s: float | None,
    guard_s: float,
    extend_to_pixels: bool = True,
) -> list[Update]:
    updates = []
    up, down = flow.up_ts, flow.down_ts
    clicks = sorted(clicks, key=lambda c: c.t)
    for k, c in enumerate(clicks):
        extra = {"click_time": c.t, "page": c.page, "ratio": c.ratio}
        w0 = c.t - guard_s
        w1 = clicks[k + 1].t - guard_s if k + 1 < len(clicks) else math.inf
        limit = min(w1, c.t + timeout_s) if timeout_s is not None else w1
        iu = bisect.bisect_left(up, w0)
        if iu >= len(up) or up[iu] >= limit:
            updates.append(_empty(c.index, "no input from the client after the click", **extra))
            continue
        u0 = up[iu]
        jd = bisect.bisect_right(down, u0)
        if jd >= len(down) or down[jd] >= limit:
            why = "no response within the timeout" if limit < w1 else "no response before the next click"
            updates.append(_empty(c.index, why, **extra))
            continue
        start = up[bisect.bisect_left(up, down[jd]) - 1]
        _, j, cut = flow.burst_end(jd, quiet_s, limit)
        extended = False
        if extend_to_pixels and not cut and c.pixel_stable_t is not None and c.pixel_stable_t < limit:
            # The screen kept changing after the first burst went quiet (X2Go at low rates answers a
            # click at once with a few hundred bytes, then sends the page seconds later): the
            # update is the burst that was arriving when the screen last changed.
            k = bisect.bisect_right(down, c.pixel_stable_t) - 1
            if k > j and c.pixel_stable_t - down[j] > quiet_s:
                _, j, cut = flow.burst_end(k, quiet_s, limit)
                extended = True
        # Cut by the next click is fine (the driver saw the screen settle); cut by the timeout is not.
        timed_out = cut and limit < w1
        reason = "response still running at the timeout" if timed_out else None
        if c.timed_out and not timed_out:
            timed_out, reason = True, "the driver timed out waiting for the screen to settle"
        updates.append(flow.measure(c.index, u0, start, down[j], timed_out=timed_out, reason=reason,
                                    extended_to_pixels=extended, **extra))  # fmt: skip
    return updates


def _by_quiet(flow: _Flow, quiet_s: float, timeout_s: float | None) -> list[Update]:
    updates: list[Update] = []
    up, down = flow.up_ts, flow.down_ts
    pos = -math.inf  # end of the previous update: inputs after it start the next one
    while True:
        iu = bisect.bisect_right(up, pos)
        if iu >= len(up):
            break
        u0 = up[iu]
        limit = u0 + timeout_s if timeout_s is not None else math.inf
        jd = bisect.bisect_right(down, u0)
        idx = len(updates)
        if jd >= len(down) or down[jd] >= limit:
            updates.append(_empty(idx, "no response within the timeout" if jd < len(down) else "no response",
                                  click_time=None))  # fmt: skip
            pos = limit if jd < len(down) else math.inf
            continue
        start = up[bisect.bisect_left(up, down[jd]) - 1]
        last, j, cut = flow.burst_end(jd, quiet_s, limit)
        updates.append(
            flow.measure(
                idx,
                u0,
                start,
                down[j],
                timed_out=cut,
                click_time=None,
                reason="response still running at the timeout" if cut else None,
            )
        )
        if cut:  # skip the rest of the runaway burst so it does not become an update of its own
            last, _, _ = flow.burst_end(last, quiet_s, math.inf)
        pos = down[last]
    return updates


def analyze(
    pcap_path: str | os.PathLike[str],
    clicks: list[Click] | None,
    server: Endpoint | None = None,
    quiet_s: float = 0.5,
    timeout_s: float | None = None,
    guard_s: float = DEFAULT_GUARD_S,
    extend_to_pixels: bool = True,
) -> AnalysisResult:
    """Measure every screen update in a capture; see the module docstring and docs/rd-analysis.md."""
    if not (isinstance(quiet_s, int | float) and math.isfinite(quiet_s) and quiet_s > 0):
        raise ParameterError("quiet", f"must be a positive duration, got {quiet_s!r}")
    if timeout_s is not None and not (math.isfinite(timeout_s) and timeout_s > 0):
        raise ParameterError("timeout", f"must be a positive duration, got {timeout_s!r}")
    if not (math.isfinite(guard_s) and 0 <= guard_s < 1):
        raise ParameterError("guard", f"must be between 0 and 1 s, got {guard_s!r}")
    packets, info = read_packets(pcap_path)
    if not packets:
        raise CaptureError(f"{info.path!r} holds no TCP or UDP packets ({info.packets} frames)")
    warnings = []
    if info.skipped:
        warnings.append(f"{info.skipped} frame(s) could not be decoded and were skipped")
    if server is None:
        server = _detect_server(packets)
    client = _detect_client(packets, server)
    flow = _Flow(packets, server, client)
    if clicks is not None:
        mode = "clicks"
        updates = _by_clicks(flow, clicks, quiet_s, timeout_s, guard_s, extend_to_pixels)
        if clicks and info.first_ts is not None and info.last_ts is not None:
            outside = [c.index for c in clicks if not info.first_ts - 1 <= c.t <= info.last_ts]
            if outside:
                warnings.append(
                    f"{len(outside)} click(s) lie outside the capture's time span "
                    "(is the clicks file from this run, on the same clock?)"
                )
    else:
        mode = "quiet"
        updates = _by_quiet(flow, quiet_s, timeout_s)
    return AnalysisResult(
        updates=updates,
        summary=Summary.of(updates),
        server=server,
        client=client,
        mode=mode,
        quiet_s=quiet_s,
        capture=info,
        warnings=warnings,
    )
