"""One thin-client TCP trial: N server/client pairs replay screen traffic through one bottleneck.

Paper 002's testbed (notes/seed-thinclient-tcp.md §2) on real Linux TCP: the userspace emulator is
the router (10 Mbit/s, a byte-limited tail-drop buffer, FIFO or two priority classes), its delay
element carries the WAN's 20 ms plus the two LAN legs' 1 ms each (constant delays commute with the
queue, so where they sit does not change any packet's timing relative to the others), and the
emulator records every server->client packet. ``tc-replay`` sends the schedule open-loop. The TCP
settings (``LinkProfile.tcp``) are applied and read back in both namespaces before anything
connects. Afterwards: per write the delay decomposition (``decompose``), the paper's metrics
(``metrics``), the server namespace's TCP counters and each connection's TCP_INFO.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np

from qoelab.emulation import linklog, tcp
from qoelab.emulation import records as emu_records
from qoelab.emulation.profile import LinkProfile
from qoelab.emulation.topology import emulated_link
from qoelab.errors import ParameterError
from qoelab.thinclient import classify, decompose, metrics, replay, trace
from qoelab.thinclient.model import INTERACTIVE, TwoStateModel

log = logging.getLogger("qoelab.thinclient")

QUEUE_BIN_S = 0.1  # the queue-over-time series keeps each 100 ms bin's largest backlog (Fig. 8)


@dataclass(frozen=True)
class ThinclientRun:
    """What one trial does. ``trace``: replay a capture's server timeline instead of the model."""

    profile: LinkProfile
    pairs: int = 20
    duration_s: float = 300.0
    connections: Literal["shared", "separate"] = "shared"
    seed: int = 1
    model: TwoStateModel = field(default_factory=TwoStateModel)
    trace: Path | None = None
    trace_server_port: int | None = None
    t0_ms: float = 20.0
    keystrokes_first: bool = False  # E9: the sender writes keystrokes before screen data it holds
    rto_ewma: bool = False  # Enhancement 1: the BPF program of thinclient.bpf (docs/thinclient-bpf.md)
    rto_ewma_floor_s: float = 0.2  # the lowest RTO floor that program sets


@dataclass
class ThinclientOutput:
    summary: dict[str, float]
    rows: list[dict[str, Any]]  # per write, with its delay components
    ccdf: list[dict[str, Any]]
    connections: list[dict[str, Any]]
    queue: list[tuple[float, float]]  # (s since the first packet, largest backlog in the bin, bytes)
    gaps: list[dict[str, Any]]  # log10 gap histogram of the replayed traffic (Fig. 4)
    link: dict[str, Any]
    provenance: dict[str, Any]


def build_schedule(run: ThinclientRun) -> list[replay.Planned]:
    """The model's writes, or the trace's timeline given to every pair from its own starting point."""
    if run.trace is None:
        return replay.schedule(run.pairs, run.duration_s, run.seed, run.model, run.connections)
    per_conn = trace.connections(run.trace, server_port=run.trace_server_port)
    if not per_conn:
        raise replay.ReplayError(f"the capture {run.trace.name} has no server payload to replay")
    busiest = max(per_conn.values(), key=lambda segs: sum(n for _, n in segs))
    return replay.schedule_trace(busiest, run.pairs, run.duration_s, run.connections)


def run_trial(
    run: ThinclientRun, prefix: str, workdir: Path, on_tick: Callable[[float, dict], None] | None = None
) -> ThinclientOutput:
    """Build the link, replay, and take the result apart; the link is gone when this returns."""
    rows = build_schedule(run)
    if not rows:
        raise replay.ReplayError("the schedule has no writes (a trace without server payload?)")
    check_rto_ewma(run)
    workdir.mkdir(parents=True, exist_ok=True)
    rec_path = workdir / "down.rec"
    started = time.time()
    ewma: dict[str, Any] = {}
    with emulated_link(run.profile, prefix=prefix, backend="userspace", packet_records=rec_path,
                       log_path=workdir / "linkemu.log", link_log=workdir / linklog.ARTIFACT) as link, \
            _rto_ewma(run, prefix, ewma) as cgroup:  # fmt: skip
        before = {side: tcp.counters(link.ns(side)) for side in ("server", "client")}

        def tick(elapsed: float) -> None:
            if on_tick is not None:
                on_tick(elapsed, link.emulator.stats()["down"])

        writes = replay.run(rows, link.server_ns, link.client_ns, link.client_ip, workdir / "replay",
                            timeout=run.duration_s + 120, on_tick=tick,
                            keystrokes_first=run.keystrokes_first, cgroup=cgroup)  # fmt: skip
        after = {side: tcp.counters(link.ns(side)) for side in ("server", "client")}
        described = link.describe()
    stats = dict(link.emulator_stats or {})
    packets = emu_records.read(rec_path)
    ports = replay.ports(workdir / "replay")
    info = replay.tcp_info(workdir / "replay")
    decomposed = decompose.decompose(writes, packets, ports, round(run.profile.down.delay_s * 1e9))
    counters = {side: tcp.counter_delta(before[side], after[side], tcp.COUNTER_KEYS) for side in before}
    out = _output(run, rows, decomposed, packets, counters, info, stats, described, started)
    if run.rto_ewma:
        _add_ewma(out, ewma, ports)
    return out


def check_rto_ewma(run: ThinclientRun) -> None:
    """ParameterError naming ``rto_ewma`` when the program cannot run here or would be overridden."""
    if not run.rto_ewma:
        return
    if run.profile.tcp.rto_min_s is not None:
        # The route's rto_min takes precedence over TCP_BPF_RTO_MIN: the program would do nothing.
        raise ParameterError("rto_ewma", "cannot be combined with rto_min (the route's rto_min overrides it)")
    from qoelab.thinclient.bpf import loader

    ok, reason = loader.available()
    if not ok:
        raise ParameterError("rto_ewma", f"the BPF program cannot run here: {reason}")


@contextlib.contextmanager
def _rto_ewma(run: ThinclientRun, prefix: str, into: dict[str, Any]) -> Iterator[Path | None]:
    """The sender's cgroup with the program attached (None without ``rto_ewma``); fills ``into``
    with its counters and per-connection values before it detaches."""
    if not run.rto_ewma:
        yield None
        return
    from qoelab.thinclient.bpf import loader

    into["floor_min_us"] = round(run.rto_ewma_floor_s * 1e6)
    with loader.rto_ewma(prefix, replay.DEFAULT_PORT, base_us=into["floor_min_us"]) as handle:
        try:
            yield handle.cgroup
        finally:
            with contextlib.suppress(loader.BpfError, OSError, ValueError):
                into["counters"] = loader.counters(handle)
                into["connections"] = loader.connections(handle)


EWMA_CONN_KEYS = ("floor_us", "srtt_us", "rttvar_us", "rto_us", "kernel_srtt_us", "kernel_rttvar_us",
                  "samples", "resets", "kernel_below")  # fmt: skip


def _add_ewma(out: ThinclientOutput, ewma: dict[str, Any], ports: dict[int, int]) -> None:
    got = ewma.get("counters", {})
    for key in ("samples", "floor_updates", "resets", "setsockopt_failures", "floor_capped", "sockets",
                "kernel_below"):  # fmt: skip
        if got.get(key) is not None:
            out.summary[f"ewma_{key}"] = got[key]
    by_port = ewma.get("connections", {})
    for row in out.connections:
        mine = by_port.get(ports.get(row["conn"], -1), {})
        row.update({f"ewma_{k}": mine.get(k) for k in EWMA_CONN_KEYS})
    out.provenance["rto_ewma"] = {
        "program": "workers/qoelab/thinclient/bpf/rto_ewma.bpf.c",
        "doc": "docs/thinclient-bpf.md",
        "floor_min_us": ewma.get("floor_min_us"),
        "counters": got,
    }


def _span_s(packets: np.ndarray) -> float:
    sent = packets[packets["fate"] == emu_records.FORWARDED]
    if sent.size < 2:
        return 0.0
    return float(sent["arrival_ns"].max() - sent["arrival_ns"].min()) / 1e9


def _lag_ms(plan: list[replay.Planned], rows: list[dict[str, Any]]) -> np.ndarray:
    """How late each write was put on its socket against the schedule (the sender keeping up)."""
    planned = np.array([plan[r["id"]].t_us * 1e3 for r in rows], dtype=float)
    actual = np.array([r["app_ns"] for r in rows], dtype=float)
    offset = actual - planned
    return (offset - offset.min()) / 1e6


def _queue_series(packets: np.ndarray) -> list[tuple[float, float]]:
    t, backlog = emu_records.backlog_series(packets)
    if not len(t):
        return []
    bins = np.floor((t - t[0]) / QUEUE_BIN_S).astype(int)
    top = np.zeros(bins.max() + 1)
    np.maximum.at(top, bins, backlog)
    return [(round(i * QUEUE_BIN_S, 3), float(v)) for i, v in enumerate(top)]


def _per_connection(rows: list[dict[str, Any]], info: dict[int, dict[str, int]], t0_ms: float) -> list[dict]:
    out = []
    for conn in sorted({r["conn"] for r in rows}):
        mine = np.array(
            [r["delay_ms"] for r in rows if r["conn"] == conn and r["kind"] == INTERACTIVE and r["delay_ms"]],
            dtype=float,
        )
        row: dict[str, Any] = {"conn": conn, "interactive_writes": int(mine.size)}
        row.update(metrics.exceedance(mine, t0_ms))
        row.update({k: info.get(conn, {}).get(k) for k in ("total_rto", "total_retrans", "rto_us", "lost")})
        out.append(row)
    return out


def _output(run: ThinclientRun, plan: list[replay.Planned], rows: list[dict[str, Any]], packets: np.ndarray,
            counters: dict[str, dict[str, int]], info: dict[int, dict[str, int]], stats: dict[str, Any],
            described: dict[str, Any], started: float) -> ThinclientOutput:  # fmt: skip
    span = _span_s(packets)
    conns = len({r["conn"] for r in rows})
    summary: dict[str, Any] = metrics.summarise(rows, t0_ms=run.t0_ms, model=run.model)
    summary.update(metrics.utilisation(rows, packets, run.profile.down.rate_bps or 0, span))
    server = counters["server"]
    summary["rto_per_conn_300s"] = metrics.rto_per_connection(server["TcpExtTCPTimeouts"], conns, span)
    summary["spurious_rto_per_conn_300s"] = metrics.rto_per_connection(
        server["TcpExtTCPSpuriousRTOs"], conns, span
    )
    for key in ("TcpExtTCPLostRetransmit", "TcpExtTCPSackRecovery", "TcpExtTCPRenoRecovery",
                "TcpExtTCPLossProbes", "TcpRetransSegs"):  # fmt: skip
        summary[key] = server[key]
    rtos = [i["total_rto"] for i in info.values() if "total_rto" in i]
    summary["max_rto_one_conn"] = max(rtos) if rtos else None
    fates = emu_records.fate_counts(packets)
    summary["router_drops"] = fates["queue_drop"] + fates["pushed_out"]
    dropped = packets["fate"] != emu_records.FORWARDED
    summary["router_drops_marked"] = int(np.count_nonzero(dropped & (packets["cls"] == emu_records.HIGH)))
    summary["max_queue_bytes"] = int(packets["backlog_bytes"].max()) if packets.size else 0
    for kind, above in ((INTERACTIVE, 150 - run.t0_ms), (INTERACTIVE, 1000 - run.t0_ms)):
        for component, share in decompose.dominant(rows, kind, above).items():
            summary[f"share_{component}_I{above + run.t0_ms:.0f}"] = share
    lag = _lag_ms(plan, rows)
    summary["schedule_lag_p99_ms"] = float(np.percentile(lag, 99)) if lag.size else None
    summary["schedule_lag_max_ms"] = float(lag.max()) if lag.size else None
    summary["pairs"] = run.pairs
    summary["span_s"] = span
    first = [p.t_us / 1e6 for p in plan if p.conn == plan[0].conn]
    gaps = classify.gap_histogram([b - a for a, b in zip(first, first[1:], strict=False)])
    return ThinclientOutput(
        summary=metrics.finite(summary),
        rows=rows,
        ccdf=decompose.ccdfs(rows),
        connections=_per_connection(rows, info, run.t0_ms),
        queue=_queue_series(packets),
        gaps=gaps,
        link={**described, "emulator": stats, "counters": counters},
        provenance={
            "elapsed_s": time.time() - started,
            "writes": len(rows),
            "packets_recorded": int(packets.size),
            "source": "trace" if run.trace else "model",
            "model": run.model.as_dict(),
            "eq4_constants_s": metrics.eq4_constants(run.model),
            "queue": run.profile.down.queue,
            "buffer_bytes": run.profile.down.queue_limit_bytes(run.profile.mtu),
            "delay_one_way_s": run.profile.down.delay_s,
        },
    )
