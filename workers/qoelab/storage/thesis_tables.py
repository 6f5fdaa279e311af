"""Thesis 001's Tables 6.1-6.3 (notes seed-storage-bench.md §5.10-§5.12) and their layout: a row per
network (rate and scenario), a column per system (NFS, iSCSI with CFQ or deadline, Swift).

``network_label`` and ``system_label`` name a trial's row and column from its resolved parameters
(SI units: rate in bit/s, rtt and jitter in s, loss in %); the dashboard's tables and the
benchmark's Markdown tables both use them, so a measured cell sits beside the thesis' own.
"""

from __future__ import annotations

from typing import Any

from qoelab.storage.scenarios import SCENARIOS

RATE_NAMES = {100e6: "100 Mbit/s", 1e9: "1 Gbit/s"}
ROW_NAMES = {"ideal": "ideal", "latency": "+50 ms", "loss": "+50 ms, 0.1 %", "realistic": "realistic"}
NETWORKS = tuple(f"{rate} {row}" for rate in RATE_NAMES.values() for row in ROW_NAMES.values())
SYSTEMS = ("NFS", "iSCSI bfq (CFQ)", "iSCSI mq-deadline (deadline)", "iSCSI none", "Swift")

# (metric, network) -> (NFS, iSCSI CFQ, iSCSI deadline, Swift), the order of the thesis' columns.
# postmark_tps is PostMark's own "transactions per second" (the table's IOPS column, notes §4.1).
_PER_RATE: dict[str, dict[float, tuple[tuple[float, float, float, float], ...]]] = {
    "postmark_s": {
        100e6: ((1642, 23, 20, 3781), (11681, 22, 22, 15506), (14248, 22, 21, 19005), (15643, 22, 21, 11841)),
        1e9: ((1062, 20, 19, 2756), (10856, 26, 22, 16951), (12117, 52, 22, 24624), (16352, 188, 22, 26866)),
    },
    "postmark_tps": {
        100e6: ((15, 1176, 1242, 6), (2, 1250, 1190, 2), (1, 1230, 1230, 1), (1, 1210, 1210, 2)),
        1e9: ((24, 1293, 1293, 8), (2, 1026, 1138, 1), (2, 749, 1163, 1), (1, 630, 1220, 0)),
    },
    "varmail": {
        100e6: ((463, 3783, 3817, 161), (41, 626, 629, 102), (40, 318, 362, 104), (37, 291, 348, 99)),
        1e9: ((461, 14813, 15175, 158), (41, 633, 647, 104), (40, 405, 457, 104), (38, 196, 205, 102)),
    },
    "fileserver": {
        100e6: ((322, 2121, 2166, 98), (35, 1416, 1776, 98), (31, 377, 419, 104), (29, 384, 367, 98)),
        1e9: ((342, 12678, 12104, 111), (35, 3341, 5120, 87), (32, 621, 558, 92), (25, 293, 314, 89)),
    },
}  # fmt: skip
_COLUMNS = ("NFS", "iSCSI bfq (CFQ)", "iSCSI mq-deadline (deadline)", "Swift")


def reference(table: str) -> dict[tuple[str, str], float]:
    """The thesis' values of ``table`` (postmark_s, postmark_tps, varmail, fileserver), by (network,
    system)."""
    out = {}
    for rate, rows in _PER_RATE[table].items():
        for row, values in zip(ROW_NAMES.values(), rows, strict=True):
            for column, value in zip(_COLUMNS, values, strict=True):
                out[(f"{RATE_NAMES[rate]} {row}", column)] = float(value)
    return out


def network_label(params: dict[str, Any]) -> str:
    """``100 Mbit/s +50 ms`` for the thesis' rows; the numbers for any other condition."""
    rate = params.get("rate") or 0.0
    rate_name = RATE_NAMES.get(float(rate), f"{float(rate) / 1e6:g} Mbit/s")
    rtt_ms = round(float(params.get("rtt") or 0) * 1e3, 3)
    loss = round(float(params.get("loss") or 0), 4)
    jitter_ms = round(float(params.get("jitter") or 0) * 1e3, 3)
    for key, sc in SCENARIOS.items():
        if (sc.rtt_ms, sc.loss_pct, sc.jitter_ms) == (rtt_ms, loss, jitter_ms):
            return f"{rate_name} {ROW_NAMES[key]}"
    extra = "".join([f", {loss:g} %" if loss else "", f", ±{jitter_ms:g} ms" if jitter_ms else ""])
    return f"{rate_name} {rtt_ms:g} ms RTT{extra}"


def system_label(params: dict[str, Any]) -> str:
    """The thesis' column: NFS, Swift, or iSCSI with the scheduler standing in for CFQ or deadline."""
    target = params.get("target")
    if target == "iscsi":
        scheduler = params.get("scheduler") or "mq-deadline"
        return {"bfq": SYSTEMS[1], "mq-deadline": SYSTEMS[2]}.get(scheduler, f"iSCSI {scheduler}")
    return {"nfs": "NFS", "swift": "Swift"}.get(str(target), str(target))
