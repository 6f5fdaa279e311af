"""Replay thin-client writes between two namespaces with ``tc-replay`` (C, ``thinclient/csrc/``).

``schedule`` turns the model (or a trace) into one server's writes per connection, the pairs'
starts staggered by 0.25 ms as in paper 002 (notes §2); ``run`` starts the receiver in the client
namespace, waits until it listens, runs the sender in the server namespace and joins both logs into
one record per write: when the application wrote it, when its last byte left the application for
the kernel, and when it reached the client application, all on the host's CLOCK_MONOTONIC (both
namespaces share it, so one-way delays need no clock synchronisation). ``summary`` gives the
paper's exceedance ratios r_I150 and r_I1000 (thresholds 150 - t0 and 1000 - t0 ms) and per-kind
percentiles.

N connections between two namespaces stand for N server/client host pairs: each has its own TCP
state, socket buffers and congestion window, and they meet only in the shared bottleneck, which is
what the paper's 100 pairs do.
"""

from __future__ import annotations

import shlex
import subprocess
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np

from qoelab import helpers
from qoelab.errors import QoelabError
from qoelab.procs import end_process
from qoelab.thinclient import metrics
from qoelab.thinclient.model import BULK, FLOW_THRESHOLD_S, INTERACTIVE, TwoStateModel, Write, generate

NOT_BUILT = helpers.TC_REPLAY.not_built
DEFAULT_PORT = 47_100  # the receiver's listening port
STAGGER_S = 0.25e-3  # the paper's shift of each sender's start (notes §2)
TOS_INTERACTIVE = 0xB8  # DSCP EF (46) << 2: what a priority queue sorts interactive packets by
KINDS = (INTERACTIVE, BULK)


class ReplayError(QoelabError):
    """tc-replay failed; the message is its own sentence."""


binary = helpers.TC_REPLAY.path


@dataclass(frozen=True)
class Planned:
    conn: int
    t_us: int
    nbytes: int
    kind: str


def schedule(
    pairs: int,
    duration: float,
    seed: int,
    model: TwoStateModel | None = None,
    connections: Literal["shared", "separate"] = "shared",
) -> list[Planned]:
    """Every pair's writes in time order. ``separate``: pair i's interactive writes on connection
    2i and its bulk writes on 2i + 1 (the paper's Case 2); ``shared``: one connection per pair."""
    if pairs < 1:
        raise ValueError(f"pairs must be at least 1, got {pairs}")
    model = model or TwoStateModel()
    out: list[Planned] = []
    for i in range(pairs):
        for w in generate(model, duration, seed * 100_003 + i, start=i * STAGGER_S):
            conn = i if connections == "shared" else 2 * i + (w.kind == BULK)
            out.append(Planned(conn, round(w.t * 1e6), w.nbytes, w.kind))
    out.sort(key=lambda p: (p.t_us, p.conn))
    return out


def segment_kinds(segments: Sequence[tuple[float, int]], threshold: float = FLOW_THRESHOLD_S) -> list[str]:
    """Each segment's flow kind by the paper's rule: a gap above ``threshold`` starts a flow, and a
    flow of one segment is interactive (notes §1.3)."""
    starts = [i for i in range(len(segments)) if i == 0 or segments[i][0] - segments[i - 1][0] > threshold]
    kinds = [BULK] * len(segments)
    for a, b in zip(starts, [*starts[1:], len(segments)], strict=True):
        if b - a == 1:
            kinds[a] = INTERACTIVE
    return kinds


def schedule_trace(
    segments: Sequence[tuple[float, int]],
    pairs: int,
    duration: float,
    connections: Literal["shared", "separate"] = "shared",
) -> list[Planned]:
    """A capture's server timeline ``(t, bytes)`` for every pair: each pair plays it as a loop
    starting ``i/pairs`` of the way in (so the pairs are not in step, as the paper's 100 different
    series were not), shifted by the paper's 0.25 ms per pair; one write per segment."""
    if pairs < 1:
        raise ValueError(f"pairs must be at least 1, got {pairs}")
    if not segments:
        return []
    kinds = segment_kinds(segments)
    t0 = segments[0][0]
    rel = [t - t0 for t, _ in segments]
    gaps = sorted(b - a for a, b in zip(rel, rel[1:], strict=False)) or [1.0]
    period = rel[-1] + gaps[len(gaps) // 2]  # loop with a typical gap between the end and the start
    out: list[Planned] = []
    for i in range(pairs):
        shift = period * i / pairs
        for (_, nbytes), kind, r in zip(segments, kinds, rel, strict=True):
            t = (r - shift) % period + i * STAGGER_S
            conn = i if connections == "shared" else 2 * i + (kind == BULK)
            while t < duration:
                out.append(Planned(conn, round(t * 1e6), max(nbytes, 1), kind))
                t += period
    out.sort(key=lambda p: (p.t_us, p.conn))
    return out


def schedule_from(writes: Iterable[Write], conn: int = 0) -> list[Planned]:
    """A trace's writes (e.g. a capture read by ``trace``) as one connection's schedule."""
    return [Planned(conn, round(w.t * 1e6), w.nbytes, w.kind) for w in writes]


def _write_schedule(rows: list[Planned], path: Path) -> int:
    with path.open("w") as fh:
        for r in rows:
            fh.write(f"{r.conn} {r.t_us} {r.nbytes} {0 if r.kind == INTERACTIVE else 1}\n")
    return max(r.conn for r in rows) + 1


def _ns_cmd(ns: str, *argv: str) -> list[str]:
    return ["ip", "netns", "exec", ns, *argv]


def _into_cgroup(cgroup: Path) -> list[str]:
    """Argv prefix: the shell writes its pid into the cgroup, then execs the rest of the line."""
    return ["sh", "-c", f'echo $$ > {shlex.quote(str(cgroup / "cgroup.procs"))} && exec "$@"', "sh"]


def run(
    rows: list[Planned],
    server_ns: str,
    client_ns: str,
    client_ip: str,
    workdir: Path,
    *,
    port: int = DEFAULT_PORT,
    tos_interactive: int = TOS_INTERACTIVE,
    timeout: float | None = None,
    on_tick: Callable[[float], None] | None = None,
    tick_s: float = 10.0,
    keystrokes_first: bool = False,
    cgroup: Path | None = None,
) -> list[dict[str, Any]]:
    """Replay ``rows`` from the server namespace to the client namespace; one record per write.

    ``workdir`` keeps the tool's files: the schedule, both logs, ``ports.txt`` (each connection's
    local port, to find its packets) and ``info.txt`` (TCP_INFO per connection at the end; read
    them with ``ports`` and ``tcp_info``). ``keystrokes_first``: an interactive write overtakes the
    bulk writes the sender still holds (E9). ``on_tick(elapsed_s)`` is called every ``tick_s`` while
    the replay runs. ``cgroup``: the sender joins this cgroup v2 directory before it execs (so the
    BPF program of ``thinclient.bpf`` acts on its sockets only). Raises ReplayError (the tool's own
    sentence) when a side fails or the replay overruns ``timeout`` (default: the schedule's length
    plus 60 s); no process outlives the call.
    """
    tool = binary()
    if not tool.exists():
        raise ReplayError(NOT_BUILT)
    if not rows:
        raise ValueError("the schedule is empty")
    workdir.mkdir(parents=True, exist_ok=True)
    conns = _write_schedule(rows, workdir / "schedule.txt")
    limit = timeout if timeout is not None else rows[-1].t_us / 1e6 + 60
    recv_log, send_log = workdir / "recv.txt", workdir / "send.txt"
    recv = subprocess.Popen(
        _ns_cmd(client_ns, str(tool), "recv", "--listen", f"{client_ip}:{port}", "--conns", str(conns),
                "--out", str(recv_log), "--timeout", str(int(limit) + 30)),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
    )  # fmt: skip
    send = None
    try:
        # Ready when it says so (it prints the line after listen()), not after a guessed sleep.
        line = recv.stdout.readline() if recv.stdout else ""
        if line.strip() != "listening":
            recv.wait(timeout=5)
            raise ReplayError(
                f"the receiver did not start: {(recv.stderr.read() if recv.stderr else '').strip()}"
            )
        into_cgroup = [] if cgroup is None else _into_cgroup(cgroup)
        send = subprocess.Popen(
            into_cgroup + _ns_cmd(server_ns, str(tool), "send", "--to", f"{client_ip}:{port}", "--schedule",
                    str(workdir / "schedule.txt"), "--out", str(send_log),
                    "--tos-interactive", str(tos_interactive), "--ports", str(workdir / "ports.txt"),
                    "--info", str(workdir / "info.txt"),
                    *(["--keystrokes-first"] if keystrokes_first else [])),
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, start_new_session=True,
        )  # fmt: skip
        began = time.monotonic()
        deadline = began + limit
        for proc, name in ((send, "sender"), (recv, "receiver")):
            while True:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise ReplayError(f"the {name} did not finish within {limit:.0f} s")
                try:
                    rc = proc.wait(timeout=min(left, tick_s) if on_tick else max(left, 1))
                    break
                except subprocess.TimeoutExpired:
                    if on_tick:
                        on_tick(time.monotonic() - began)
            if rc != 0:
                err = (proc.stderr.read() if proc.stderr else "").strip()
                raise ReplayError(f"the {name} failed (exit {rc}): {err}")
    finally:
        for proc in (send, recv):
            if proc is not None:
                end_process(proc, group=True)
    return _join(send_log, recv_log)


def _read(path: Path) -> dict[tuple[int, int], tuple[int, ...]]:
    out = {}
    for line in path.read_text().splitlines():
        conn, wid, *rest = (int(x) for x in line.split())
        out[conn, wid] = tuple(rest)  # kind nbytes app_ns t_ns [off]
    return out


def _join(send_log: Path, recv_log: Path) -> list[dict[str, Any]]:
    sent, got = _read(send_log), _read(recv_log)
    records = []
    for key, (kind, nbytes, app_ns, sent_ns, off) in sorted(sent.items(), key=lambda kv: kv[1][2]):
        arrived = got.get(key)
        records.append(
            {
                "conn": key[0],
                "id": key[1],
                "kind": KINDS[kind],
                "nbytes": nbytes,
                "app_ns": app_ns,
                "off": off,  # stream offset of the write's first byte (its header)
                "sent_ms": (sent_ns - app_ns) / 1e6,
                "delay_ms": None if arrived is None else (arrived[3] - app_ns) / 1e6,
            }
        )
    return records


def ports(workdir: Path) -> dict[int, int]:
    """Connection -> the sender's local TCP port (from ``ports.txt`` of a finished run)."""
    out = {}
    for line in (workdir / "ports.txt").read_text().splitlines():
        conn, port = line.split()
        out[int(conn)] = int(port)
    return out


def tcp_info(workdir: Path) -> dict[int, dict[str, int]]:
    """Connection -> its sender's TCP_INFO at the end (``info.txt``): rto_us, total_retrans, and
    total_rto / total_rto_recoveries / total_rto_time_ms where the kernel has them (6.7+)."""
    out: dict[int, dict[str, int]] = {}
    path = workdir / "info.txt"
    if not path.exists():
        return out
    for line in path.read_text().splitlines():
        conn, *pairs = line.split()
        out[int(conn)] = {k: int(v) for k, v in (pair.split("=", 1) for pair in pairs)}
    return out


def summary(records: list[dict[str, Any]], t0_ms: float) -> dict[str, Any]:
    """Per kind: count, lost (never received), delay percentiles; r_I150/r_I1000 for interactive
    writes (the share delayed more than 150 - t0 and 1000 - t0 ms, paper 002 §2.2)."""
    out: dict[str, Any] = {"t0_ms": t0_ms}
    for kind in KINDS:
        mine = [r for r in records if r["kind"] == kind]
        delays = np.array([r["delay_ms"] for r in mine if r["delay_ms"] is not None])
        row: dict[str, Any] = {"writes": len(mine), "lost": sum(r["delay_ms"] is None for r in mine)}
        if delays.size:
            row.update({f"p{q}_ms": round(float(np.percentile(delays, q)), 3) for q in (50, 90, 99)})
            row["max_ms"] = round(float(delays.max()), 3)
            # The paper's r_I150 / r_I1000 rule, applied to either kind (r_150 / r_1000 here).
            row.update({key.replace("_I", "_"): v for key, v in metrics.exceedance(delays, t0_ms).items()})
        out[kind] = row
    return out
