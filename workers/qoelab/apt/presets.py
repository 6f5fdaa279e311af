"""Chapter 2's experiments (thesis 000, ``storage_apt``): APT beside fixed N over time, and goodput
and CPU against bandwidth and delay, scaled to one host as the job type's defaults are."""

from __future__ import annotations

from typing import Any

from qoelab.preset import Chapter, Preset

# Chapter 2 (storage APT) scaled to one 2-core host as the job type's defaults are: 200 Mbit/s
# instead of 900, delays to 100 ms as the paper's, n_max 64 instead of 128 (docs/storage-apt.md).
APT_MODES = ["apt", "vanilla", "fixed"]
APT_DELAYS = ["10ms", "20ms", "40ms", "60ms", "80ms", "100ms"]


def _both_transports(axis: str, quick: list[str], full: list[str]) -> dict[str, dict[str, list[Any]]]:
    """NBD and iSCSI over ``axis``: APT, vanilla and two fixed N (quick) or four (full)."""
    return {
        "quick": {"transport": ["nbd", "iscsi"], axis: quick, "mode": APT_MODES, "sessions": [16, 64]},
        "full": {"transport": ["nbd", "iscsi"], axis: full, "mode": APT_MODES, "sessions": [8, 16, 32, 64]},
    }


CH2: tuple[Preset, ...] = (
    Preset(
        key="ch2-s1",
        report="ch2",
        figure="Figs. 2.8/2.9",
        title="APT beside fixed N over time",
        description="NBD reads across 200 Mbit/s with 20 ms one-way delay: goodput and active sessions "
        "over time for APT, one session and fixed N",
        kind="sweep",
        grids={
            "quick": {"mode": APT_MODES, "sessions": [4, 16, 64]},
            "full": {"mode": APT_MODES, "sessions": [4, 8, 16, 32, 64]},
        },
        fixed={"transport": "nbd", "rate": "200mbit", "delay": "20ms", "steady": "30s"},
        job_type="storage_apt",
    ),
    Preset(
        key="ch2-fig210",
        report="ch2",
        figure="Fig. 2.10",
        title="goodput vs bandwidth",
        description="NBD and iSCSI at 10 ms one-way delay, 50-200 Mbit/s: APT, one session and fixed N",
        kind="sweep",
        grids=_both_transports("rate", ["50mbit", "200mbit"], ["50mbit", "100mbit", "150mbit", "200mbit"]),
        fixed={"delay": "10ms", "steady": "20s"},
        repetitions={"quick": 2, "full": 10},
        job_type="storage_apt",
    ),
    Preset(
        key="ch2-fig211",
        report="ch2",
        figure="Figs. 2.11-2.15",
        title="goodput and CPU vs delay",
        description="NBD and iSCSI at 200 Mbit/s, 10-100 ms one-way delay: goodput, CPU load and CPU "
        "ticks per bit for APT, one session and fixed N",
        kind="sweep",
        grids=_both_transports("delay", ["10ms", "40ms"], APT_DELAYS),
        fixed={"rate": "200mbit", "steady": "20s"},
        repetitions={"quick": 2, "full": 10},
        job_type="storage_apt",
    ),
)

CHAPTER = Chapter(
    "ch2",
    "Chapter 2: storage APT (parallel NBD and iSCSI sessions)",
    CH2,
    note="Sequential reads over N NBD or iSCSI sessions across the emulated link, N fixed or tuned by "
    "APT; Reno with SACK and 512 KB buffers (Table 2.1), scaled to one host: 200 Mbit/s instead of 900, "
    "at most 64 sessions instead of 128 (`docs/storage-apt.md`).",
)
