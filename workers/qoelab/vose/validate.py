"""Validate VOSE against a real accelerator, as the thesis validated it against a NIC (§3.5.3).

For ``aes`` and ``sha1`` the accelerator is the CPU's own (AES-NI, SHA-NI): software, hardware, and
vose at this host's measured speedup T_software / T_hardware, so the emulated device takes exactly
the hardware's time per record. For ``checksum`` it is veth's checksum offload (T = 0): vose at the
measured speedup (inf) against hardware, and vose at speedup 1 against software (the question the
thesis left open, seed-vose.md §1.6). The error is (vose - reference) / reference, per metric.

The comparison is paired: repetition i's vose run is compared with repetition i's hardware run,
and the cases run in ABBA order (reversed on odd repetitions), so a host that drifts, or a second
run that is faster than the first, moves both sides alike (two identical configurations differed by
4.3 % when always run in the same order, docs/vose.md). The verdict per metric is the mean paired
error's 95 % Student-t interval against the thesis' bound: inside, outside or undecided.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any, TypeVar

from qoelab.stats import mean_ci
from qoelab.vose.pair import PRIMITIVE_DEVICE
from qoelab.vose.trial import VoseRun, run_trial

METRICS = ("throughput_bps", "cpu_sender", "cpu_receiver")
BOUNDS_PCT = {"throughput": 3.0, "cpu_sender": 5.0, "cpu_receiver": 5.0}  # the thesis' upper bounds
T = TypeVar("T")
DEFAULT_REPS = 5  # pairs: at n = 5 the t factor is 2.8; fewer pairs give intervals wider than the bounds


def cases(primitive: str) -> dict[str, dict[str, Any]]:
    """Case name -> the VoseRun fields that differ from the base run."""
    if primitive not in PRIMITIVE_DEVICE:
        raise ValueError(f"primitive must be one of {', '.join(PRIMITIVE_DEVICE)}, got {primitive!r}")
    out: dict[str, dict[str, Any]] = {
        "software": {"mode": "software"},
        "hardware": {"mode": "hardware"},
        "vose": {"mode": "vose", "speedup": "measured"},
    }
    if primitive == "checksum":
        out["vose_speedup1"] = {"mode": "vose", "speedup": 1.0}
    else:  # T timed inside streams instead of in the tight loop: how much the choice matters
        out["vose_stream"] = {"mode": "vose", "speedup": "measured", "calibration": "stream"}
    return out


def base_run(primitive: str, duration_s: float, record: int = 1448, **fields: Any) -> VoseRun:
    path = "kernel_csum" if primitive == "checksum" else "app"
    return VoseRun(path=path, device=PRIMITIVE_DEVICE[primitive], duration_s=duration_s, record=record,
                   **fields)  # fmt: skip


def error_pct(got: dict[str, float], ref: dict[str, float]) -> dict[str, float]:
    """Signed relative error of each metric, in percent of the reference."""
    names = {"throughput_bps": "throughput", "cpu_sender": "cpu_sender", "cpu_receiver": "cpu_receiver"}
    return {names[m]: 100.0 * (got[m] - ref[m]) / ref[m] for m in METRICS if ref.get(m)}


def _mean(runs: list[dict[str, float]]) -> dict[str, Any]:
    out: dict[str, Any] = {"n": len(runs)}
    for key in sorted({k for r in runs for k in r}):
        values = [r[key] for r in runs if key in r]
        out[key] = statistics.fmean(values)
        if len(values) > 1 and key in METRICS:
            out[f"{key}_sd"] = statistics.stdev(values)
    return out


def case_order(cases: Sequence[T], rep: int) -> list[T]:
    """ABBA: the cases in order on even repetitions, reversed on odd ones (drift hits both sides)."""
    return list(cases) if rep % 2 == 0 else list(reversed(cases))


def paired_error(vose: Sequence[dict[str, float]], ref: Sequence[dict[str, float]]) -> dict[str, Any]:
    """Per metric: the paired errors' mean, 95 % CI (None for n < 2), n, the bound and the verdict
    (``inside``: the whole CI within ±bound; ``outside``: wholly beyond it; else ``undecided``)."""
    per_rep = [error_pct(v, r) for v, r in zip(vose, ref, strict=True)]
    out: dict[str, Any] = {}
    for name, bound in BOUNDS_PCT.items():
        err = mean_ci(e[name] for e in per_rep if name in e)
        lo, hi = err.ci_low, err.ci_high
        if lo is None or hi is None:
            verdict = "undecided"
        elif -bound <= lo and hi <= bound:
            verdict = "inside"
        elif lo > bound or hi < -bound:
            verdict = "outside"
        else:
            verdict = "undecided"
        out[name] = {"mean": err.mean, "ci_low": lo, "ci_high": hi, "n": err.n, "bound": bound,
                     "verdict": verdict}  # fmt: skip
    return out


def validate(
    primitive: str,
    prefix_for: Callable[[], str],
    duration_s: float = 10.0,
    reps: int = DEFAULT_REPS,
    record: int = 1448,
    on_run: Callable[[str, int, dict[str, float]], None] | None = None,
    **fields: Any,
) -> dict[str, Any]:
    """Run every case ``reps`` times, interleaved in ABBA order, and compare them pair by pair."""
    base = base_run(primitive, duration_s, record, **fields)
    changes = cases(primitive)
    runs: dict[str, list[dict[str, float]]] = {name: [] for name in changes}
    for rep in range(reps):
        for name in case_order(list(changes), rep):
            summary = run_trial(replace(base, **changes[name]), prefix_for()).summary
            runs[name].append(summary)
            if on_run is not None:
                on_run(name, rep, summary)
    out: dict[str, Any] = {name: _mean(rs) for name, rs in runs.items()}
    out["error_pct"] = error_pct(out["vose"], out["hardware"])
    if "vose_stream" in out:
        out["error_pct_stream"] = error_pct(out["vose_stream"], out["hardware"])
    if "vose_speedup1" in out:
        out["error_pct_speedup1_vs_software"] = error_pct(out["vose_speedup1"], out["software"])
    out["paired_error_pct"] = paired = paired_error(runs["vose"], runs["hardware"])
    # True: every metric's CI inside its bound; False: one wholly outside; None: not decided by n.
    verdicts = {p["verdict"] for p in paired.values()}
    out["within_bounds"] = False if "outside" in verdicts else (True if verdicts == {"inside"} else None)
    out["bounds_pct"] = BOUNDS_PCT
    out["primitive"], out["device"], out["path"] = primitive, base.device, base.path
    out["runs"] = runs
    return out
