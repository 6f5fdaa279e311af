"""The per-millisecond log of a trace link, from linkemu's packet records (issue 37).

Mahimahi's link shell logs, per millisecond, what the link offered and what was used, and its
``mm-graph`` draws capacity against throughput and the queueing delay over time. The lab derives
the same from what it already has: the trace (what was offered when: each opportunity is 1500
bytes), the emulator's report of the trace's time 0 (``trace_t0_ns``) and the packet records
(``qoelab.emulation.records``: arrival, rate-stage start, departure, the queue each packet found,
its fate). Per direction and millisecond of trace time:

- ``offered_bytes``: the trace's opportunities × 1500;
- ``delivered_bytes``: IP bytes of the packets that left the rate stage (departure − the configured
  one-way delay; with jitter, the packet's own draw is not recorded, so its share moves with it);
- ``queue_bytes``: the largest backlog an arriving packet found (-1: no arrival);
- ``queue_delay_ms``: the mean time from arrival to leaving the rate stage of the packets that left
  (-1: none left);
- ``drops``: packets the queue dropped (tail, head, pushed out or by CoDel/PIE), at their arrival.

Written as JSON (``write``) for the trial's artifacts; ``chart`` bins it for the trial page.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from qoelab.emulation import records as rec
from qoelab.emulation import traces

VERSION = 1
ARTIFACT = "link_log.json"  # the trial artifact's name; the trial page draws the file of that name
MAX_MS = 3 * 3600 * 1000  # a log longer than three hours is cut there (and says so)
CHART_BIN_MS = 100


def direction_log(records: np.ndarray, trace: traces.Trace, t0_ns: int, delay_s: float) -> dict[str, Any]:
    """The per-millisecond arrays of one direction (see the module's docstring)."""
    fwd = records[records["fate"] == rec.FORWARDED]
    arrival_ms = (records["arrival_ns"] - t0_ns) // 1_000_000
    out_ns = fwd["depart_ns"] - int(round(delay_s * 1e9))
    out_ms = (out_ns - t0_ns) // 1_000_000
    if len(records) == 0:
        return {"trace": trace.name, "start_ms": 0, "ms": 0, "truncated": False, "offered_bytes": [],
                "delivered_bytes": [], "queue_bytes": [], "queue_delay_ms": [], "drops": []}  # fmt: skip
    start = int(max(0, arrival_ms.min()))
    end = int(max(arrival_ms.max(), out_ms.max() if len(out_ms) else 0)) + 1
    truncated = end - start > MAX_MS
    end = min(end, start + MAX_MS)
    n = end - start

    def bins(ms: np.ndarray, weights: np.ndarray | None = None) -> np.ndarray:
        keep = (ms >= start) & (ms < end)
        w = None if weights is None else weights[keep]
        return np.bincount(ms[keep] - start, weights=w, minlength=n)[:n]

    offered = bins(trace.opportunities_ms(start, end).astype(np.int64)) * traces.PACKET_BYTES
    delivered = bins(out_ms, fwd["ip_len"].astype(np.int64))
    wait_ms = (out_ns - fwd["arrival_ns"]) / 1e6
    left = bins(out_ms)
    wait_sum = bins(out_ms, wait_ms)
    queue_delay = np.where(left > 0, wait_sum / np.maximum(left, 1), -1.0)
    queue = np.full(n, -1, dtype=np.int64)
    keep = (arrival_ms >= start) & (arrival_ms < end)
    np.maximum.at(
        queue, (arrival_ms[keep] - start).astype(np.intp), records["backlog_bytes"][keep].astype(np.int64)
    )
    drops = bins(arrival_ms[np.isin(records["fate"], rec.QUEUE_FATES)])
    return {
        "trace": trace.name,
        "start_ms": start,
        "ms": n,
        "truncated": truncated,
        "offered_bytes": offered.astype(int).tolist(),
        "delivered_bytes": delivered.astype(int).tolist(),
        "queue_bytes": queue.tolist(),
        "queue_delay_ms": np.round(queue_delay, 3).tolist(),
        "drops": drops.astype(int).tolist(),
    }


def build(profile: Any, record_files: dict[str, Path], t0_ns: dict[str, int]) -> dict[str, Any]:
    """The log of every traced direction of ``profile`` (``record_files``/``t0_ns`` by direction)."""
    out: dict[str, Any] = {"version": VERSION, "bin_ms": 1, "opportunity_bytes": traces.PACKET_BYTES,
                           "directions": {}}  # fmt: skip
    for name, d in (("down", profile.down), ("up", profile.up)):
        if d.trace is None or name not in record_files or not t0_ns.get(name):
            continue
        records = rec.read(record_files[name])
        trace = traces.load_cached(d.trace)
        out["directions"][name] = direction_log(records, trace, t0_ns[name], d.delay_s)
    return out


def write(path: Path, log: dict[str, Any]) -> Path:
    path.write_text(json.dumps(log, separators=(",", ":")) + "\n")
    return path


def chart(log: dict[str, Any], bin_ms: int = CHART_BIN_MS) -> dict[str, Any]:
    """Per direction, ``bin_ms`` bins for the trial page: capacity and throughput (bit/s) and the
    largest queueing delay (ms), the two panels of Mahimahi's mm-graph."""
    out: dict[str, Any] = {"bin_ms": bin_ms, "directions": {}}
    for name, d in (log.get("directions") or {}).items():
        n = int(d.get("ms") or 0)
        if n == 0:
            continue
        k = -(-n // bin_ms)
        pad = k * bin_ms - n

        def summed(key: str, d: dict[str, Any] = d, pad: int = pad, k: int = k) -> np.ndarray:
            arr = np.asarray(d[key], dtype=float)
            return np.pad(arr, (0, pad)).reshape(k, bin_ms).sum(axis=1)

        delay = np.pad(np.asarray(d["queue_delay_ms"], dtype=float), (0, pad), constant_values=-1.0)
        worst = delay.reshape(k, bin_ms).max(axis=1)
        scale = 8 / (bin_ms / 1000)
        out["directions"][name] = {
            "trace": d["trace"],
            "t_s": [round((d["start_ms"] + i * bin_ms) / 1000, 3) for i in range(k)],
            "capacity_bps": (summed("offered_bytes") * scale).round(1).tolist(),
            "throughput_bps": (summed("delivered_bytes") * scale).round(1).tolist(),
            "queue_delay_ms": [None if x < 0 else round(float(x), 3) for x in worst],
            "drops": summed("drops").astype(int).tolist(),
        }
    return out
