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

import os
import signal
import subprocess
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np

from qoelab.errors import QoelabError
from qoelab.thinclient.model import BULK, INTERACTIVE, TwoStateModel, Write, generate

NOT_BUILT = "tc-replay is not built (run make deps)"
STAGGER_S = 0.25e-3  # the paper's shift of each sender's start (notes §2)
TOS_INTERACTIVE = 0xB8  # DSCP EF (46) << 2: what a priority queue sorts interactive packets by
KINDS = (INTERACTIVE, BULK)


class ReplayError(QoelabError):
    """tc-replay failed; the message is its own sentence."""


def binary() -> Path:
    """$QOELAB_TC_REPLAY, else <repo>/workers/build/tc-replay (built by ``make deps``)."""
    override = os.environ.get("QOELAB_TC_REPLAY")
    return Path(override) if override else Path(__file__).resolve().parents[2] / "build" / "tc-replay"


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


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def run(
    rows: list[Planned],
    server_ns: str,
    client_ns: str,
    client_ip: str,
    workdir: Path,
    *,
    port: int = 47_100,
    tos_interactive: int = TOS_INTERACTIVE,
    timeout: float | None = None,
) -> list[dict[str, Any]]:
    """Replay ``rows`` from the server namespace to the client namespace; one record per write.

    Raises ReplayError (the tool's own sentence) when a side fails or the replay overruns
    ``timeout`` (default: the schedule's length plus 60 s); no process outlives the call.
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
        send = subprocess.Popen(
            _ns_cmd(server_ns, str(tool), "send", "--to", f"{client_ip}:{port}", "--schedule",
                    str(workdir / "schedule.txt"), "--out", str(send_log),
                    "--tos-interactive", str(tos_interactive)),
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, start_new_session=True,
        )  # fmt: skip
        deadline = time.monotonic() + limit
        for proc, name in ((send, "sender"), (recv, "receiver")):
            try:
                rc = proc.wait(timeout=max(deadline - time.monotonic(), 1))
            except subprocess.TimeoutExpired:
                raise ReplayError(f"the {name} did not finish within {limit:.0f} s") from None
            if rc != 0:
                err = (proc.stderr.read() if proc.stderr else "").strip()
                raise ReplayError(f"the {name} failed (exit {rc}): {err}")
    finally:
        for proc in (send, recv):
            if proc is not None:
                _stop(proc)
    return _join(send_log, recv_log)


def _read(path: Path) -> dict[tuple[int, int], tuple[int, int, int, int]]:
    out = {}
    for line in path.read_text().splitlines():
        conn, wid, kind, nbytes, app_ns, t_ns = (int(x) for x in line.split())
        out[conn, wid] = (kind, nbytes, app_ns, t_ns)
    return out


def _join(send_log: Path, recv_log: Path) -> list[dict[str, Any]]:
    sent, got = _read(send_log), _read(recv_log)
    records = []
    for key, (kind, nbytes, app_ns, sent_ns) in sorted(sent.items(), key=lambda kv: kv[1][2]):
        arrived = got.get(key)
        records.append(
            {
                "conn": key[0],
                "id": key[1],
                "kind": KINDS[kind],
                "nbytes": nbytes,
                "app_ns": app_ns,
                "sent_ms": (sent_ns - app_ns) / 1e6,
                "delay_ms": None if arrived is None else (arrived[3] - app_ns) / 1e6,
            }
        )
    return records


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
            row["r_150"] = float((delays > 150 - t0_ms).mean())
            row["r_1000"] = float((delays > 1000 - t0_ms).mean())
        out[kind] = row
    return out
