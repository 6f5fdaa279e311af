"""An rd_qoe trial's samples and summary: one sample per screen update or keystroke, and the means.

Per update: T, X and X/T from the capture beside the pixel time, flagged where the two disagree;
per keystroke (the typing workload) the same plus its key, the gap before it and its echo time.
The summary holds the per-trial means and medians the charts and findings read.
"""

from __future__ import annotations

import math
import statistics
from typing import Any

from qoelab.jobtype import Sample

# An update whose pixel time and packet time differ by more than this is flagged (``disagree``).
DISAGREE_MS = 500.0


def _mean(values: list[float]) -> float | None:
    return statistics.fmean(values) if values else None


def _median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def update_samples(updates: list[dict[str, Any]], disagree_ms: float = DISAGREE_MS) -> list[Sample]:
    """One ``update`` sample per screen update, with pixel time beside packet time."""
    samples = []
    for u in updates:
        click_to_end = (
            (u["end"] - u["click_time"]) * 1e3 if u.get("end") is not None and u.get("click_time") else None
        )
        pixel = u.get("pixel_ms")
        gap = None if pixel is None or click_to_end is None else pixel - click_to_end
        values: dict[str, Any] = {
            "page": u.get("page"),
            "ratio": u.get("ratio"),
            "T_ms": u.get("T_ms"),
            "bytes_down": u["bytes_down"],
            "bytes_down_unique": u["bytes_down_unique"],
            "rate_bps": u.get("rate_bps"),
            "pixel_ms": pixel,
            "pixel_minus_packet_ms": gap,
            "disagree": gap is not None and abs(gap) > disagree_ms,
            "extended_to_pixels": bool(u.get("extended_to_pixels")),
            "bytes_up": u["bytes_up"],
            "packets_down": u["packets_down"],
            "packets_up": u["packets_up"],
            "retransmissions": u["retransmissions_down"] + u["retransmissions_up"],
            "retransmissions_down": u["retransmissions_down"],
            "retransmissions_up": u["retransmissions_up"],
            "connections": u["connections"],
            "timed_out": bool(u["timed_out"]),
            "reason": u.get("reason"),
        }
        samples.append(Sample("update", int(u["index"]), values))
    return samples


def keystroke_samples(updates: list[dict[str, Any]], typing: dict[str, Any]) -> list[Sample]:
    """The typing workload: one ``keystroke`` sample per key, its echo measured like an update
    (T from the last input packet before the echo to the echo's last packet, X = the echo's bytes),
    with ``echo_ms`` (the key's first packet to the first answer: ``keystrokes.echo_times``), the key
    typed and the gap before it."""
    keys, gaps = typing.get("keys") or "", typing.get("gaps_s") or []
    by_index = {u.get("index"): u for u in updates}
    samples = []
    for s in update_samples(updates):
        values = {k: v for k, v in s.values.items() if k not in ("page", "ratio")}
        i = s.index
        values["key"] = keys[i] if i < len(keys) else None
        values["gap_s"] = gaps[i] if i < len(gaps) else None
        values["echo_ms"] = by_index.get(i, {}).get("echo_ms")
        samples.append(Sample("keystroke", i, values))
    return samples


def summarise(samples: list[Sample], timings: dict[str, float]) -> dict[str, float]:
    """Per-trial numbers: means and medians over the updates that finished."""
    done = [s.values for s in samples if not s.values["timed_out"] and s.values["T_ms"] is not None]
    out: dict[str, float | None] = {
        "n": float(len(samples)),
        "n_timed_out": float(sum(bool(s.values["timed_out"]) for s in samples)),
        "n_disagree": float(sum(bool(s.values["disagree"]) for s in samples)),
        "setup_s": timings.get("setup_s"),
        "teardown_s": timings.get("teardown_s"),
        "run_s": timings.get("run_s"),
    }
    names = ["T_ms", "bytes_down", "rate_bps", "pixel_ms", "bytes_up"]
    if any("echo_ms" in s.values for s in samples):
        names.append("echo_ms")  # the typing workload's keystrokes
    for name in names:
        vals = [float(v[name]) for v in done if v.get(name) is not None]
        out[name] = _mean(vals)
        out[f"{name}_median"] = _median(vals)
    return {k: float(v) for k, v in out.items() if v is not None and math.isfinite(v)}
