"""Per-packet records written by linkemu (``--records-up/--records-down``; ``emulated_link``'s
``packet_records``): one fixed 48-byte little-endian record per packet of a direction that reached
the rate stage or was dropped anywhere. The layout is ``rec_t`` in ``workers/csrc/linkemu.h``; the
table is in ``docs/emulation.md`` ("Packet records").

Records are in the order linkemu decided each packet's fate, not in arrival order: with a served
queue (``queue`` prio, drophead, codel or pie) a packet is written when it starts serialisation or
is dropped (pushed out, from the head, by CoDel at dequeue).
Sort by ``arrival_ns`` for arrival order; packets still waiting in a prio queue when linkemu exits
have no record. Times are CLOCK_MONOTONIC nanoseconds.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

DTYPE = np.dtype(
    [
        ("arrival_ns", "<i8"),  # read from the TUN device
        ("start_ns", "<i8"),  # serialisation start; -1 if dropped (a CoDel or head drop: when it was dropped)
        ("depart_ns", "<i8"),  # scheduled write to the far TUN device; -1 if dropped
        ("backlog_bytes", "<u4"),  # queue bytes found at arrival, incl. the packet in service
        ("ip_len", "<u2"),
        ("payload_len", "<u2"),  # TCP payload bytes; 0 for non-TCP and fragments
        ("seq", "<u4"),  # TCP sequence number
        ("sport", "<u2"),  # TCP or UDP ports
        ("dport", "<u2"),
        ("tcp_flags", "u1"),
        ("cls", "u1"),  # 0 high (DSCP EF), 1 low
        ("fate", "u1"),  # index into FATES
        ("pad", "V5"),
    ]
)
assert DTYPE.itemsize == 48, "must match rec_t in linkemu.h"

FATES = ("forwarded", "queue_drop", "loss", "pushed_out", "other_drop", "head_drop", "aqm_drop")
FORWARDED, QUEUE_DROP, LOSS, PUSHED_OUT, OTHER_DROP, HEAD_DROP, AQM_DROP = range(len(FATES))
# The queue's own drops, whatever its discipline: tail drop, a prio push-out, drop-head, CoDel/PIE.
QUEUE_FATES = (QUEUE_DROP, PUSHED_OUT, HEAD_DROP, AQM_DROP)
CLASSES = ("high", "low")
HIGH, LOW = 0, 1

TCP_FIN, TCP_SYN, TCP_RST, TCP_PSH, TCP_ACK = 0x01, 0x02, 0x04, 0x08, 0x10


def read(path: Path | str) -> np.ndarray:
    """All records of one file as a structured array (``DTYPE``).

    A file still being written may end in a partial record (linkemu buffers); that tail is ignored.
    """
    raw = Path(path).read_bytes()
    usable = len(raw) - len(raw) % DTYPE.itemsize
    return np.frombuffer(raw[:usable], dtype=DTYPE)


def fate_counts(records: np.ndarray) -> dict[str, int]:
    """How many records have each fate, by name (every name present, zeros included)."""
    counts = np.bincount(records["fate"], minlength=len(FATES))
    return {name: int(counts[i]) for i, name in enumerate(FATES)}


def backlog_series(records: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(time_s, backlog_bytes) at each arrival, in arrival order, time relative to the first one.

    The backlog is what each arriving packet found (including the packet in service), so the
    series samples the queue exactly at arrivals; plot it as steps.
    """
    if len(records) == 0:
        return np.empty(0), np.empty(0, dtype=np.uint32)
    ordered = records[np.argsort(records["arrival_ns"], kind="stable")]
    t = (ordered["arrival_ns"] - ordered["arrival_ns"][0]) / 1e9
    return t, ordered["backlog_bytes"].copy()
