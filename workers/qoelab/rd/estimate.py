"""The remote-desktop trial's duration estimate (chapter 4's presets), from this lab's own trials.

A trial costs a fixed overhead per protocol and server mode (link set-up and verification, desktop
and session, teardown, upload: the median of duration − updates × (T + Q + P) over past trials) plus,
per page, the pauses Q + P and T: measured at that condition, or the T of the nearest past condition
(distance in log rate, delay and log loss) scaled by a simple model (:func:`model_t_s`). Before a
protocol has run here, defaults measured on a 2-core host and the model stand in, and the basis
says so.
"""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from qoelab.estimate import PastRun

# Before a protocol has run here: its fixed cost per trial (set-up, link verification, teardown,
# upload) and its bytes per page change, both as measured on a 2-core host (docs/rd-benchmark.md).
DEFAULT_OVERHEAD_S = {"vnc": 15.0, "spice": 18.0, "x2go": 28.0}
DEFAULT_BYTES = {"vnc": 138e3, "spice": 150e3, "x2go": 100e3}
VM_EXTRA_S = 15.0  # a guest restored from its snapshot (docs/vm.md)
MSS = 1448
METRICS = ("T_ms", "n")  # what a past trial must report to count


@dataclass(frozen=True)
class PastTrial:
    protocol: str
    server: str
    rate_bps: float
    delay_s: float
    loss_pct: float
    duration_s: float
    updates: float
    t_s: float
    wait_s: float  # Q + P per update

    @property
    def overhead_s(self) -> float:
        return max(0.0, self.duration_s - self.updates * (self.t_s + self.wait_s))


Condition = tuple[str, str, float, float, float]


def condition(params: Mapping[str, Any]) -> Condition:
    return (
        str(params.get("protocol")),
        str(params.get("server") or "namespace"),
        float(params.get("rate") or 10e9),
        float(params.get("delay") or 0.0),
        float(params.get("loss") or 0.0),
    )


def _wait_s(params: Mapping[str, Any]) -> float:
    return float(params.get("quiet") or 0.5) + float(params.get("pause") or 0.5)


def past_trials(runs: Sequence[PastRun]) -> list[PastTrial]:
    """The past runs that report T and the update count, as the estimate reads them."""
    out = []
    for run in runs:
        if not all(m in run.summary for m in METRICS):
            continue
        protocol, server, rate, delay, loss = condition(run.params)
        out.append(PastTrial(protocol, server, rate, delay, loss, run.seconds, run.summary["n"],
                             run.summary["T_ms"] / 1e3, _wait_s(run.params)))  # fmt: skip
    return out


def _distance(a: Condition, b: PastTrial) -> float:
    # One decade of rate ~ 50 ms of delay ~ one decade of loss: each moves T by a similar order.
    return (
        abs(math.log10(a[2] / b.rate_bps))
        + abs(a[3] - b.delay_s) / 0.05
        + abs(math.log10((1 + 100 * a[4]) / (1 + 100 * b.loss_pct)))
    )


def model_t_s(protocol: str, rate_bps: float, delay_s: float, loss_pct: float) -> float:
    """A rough T: a page's bytes at the link's rate, or at what TCP reaches under loss (Mathis et
    al.), plus three round trips (the click, the request, the last segment's ACK). Used to carry a
    measured T over to a nearby condition, and alone before anything was measured."""
    rtt = max(2 * delay_s, 1e-4)
    p = loss_pct / 100
    tcp = rate_bps if p <= 0 else min(rate_bps, 8 * MSS / rtt * math.sqrt(1.5 / p))
    return 8 * DEFAULT_BYTES.get(protocol, 140e3) / tcp + 3 * rtt


def estimate_trial(resolved: Mapping[str, Any], past: Sequence[PastTrial]) -> tuple[float, str]:
    """Seconds one trial at ``resolved`` (SI params) takes here, and the basis: measured/nearest/default."""
    cond = condition(resolved)
    protocol, server = cond[:2]
    pages = int(resolved.get("pages") or 5)
    wait = _wait_s(resolved)
    model = model_t_s(protocol, *cond[2:])
    same = [t for t in past if (t.protocol, t.server) == (protocol, server)]
    if not same:
        overhead = DEFAULT_OVERHEAD_S.get(protocol, 30.0) + (VM_EXTRA_S if server == "vm" else 0.0)
        return overhead + pages * (model + wait), "default"
    overhead = statistics.median(t.overhead_s for t in same)
    nearest = min(same, key=lambda t: _distance(cond, t))
    if _distance(cond, nearest) < 1e-6:
        return overhead + pages * (nearest.t_s + wait), "measured"
    scaled = nearest.t_s * model / model_t_s(protocol, nearest.rate_bps, nearest.delay_s, nearest.loss_pct)
    return overhead + pages * (scaled + wait), "nearest"


BASES = {
    "measured": "at a condition measured here",
    "nearest": "from the nearest condition measured here",
    "default": "from defaults (no trial of their protocol measured here yet)",
}


def estimate(
    points: Sequence[Mapping[str, Any]], repetitions: int, past: Sequence[PastRun]
) -> tuple[float, str]:
    trials = past_trials(past)
    counts: dict[str, int] = defaultdict(int)
    total = 0.0
    for point in points:
        seconds, basis = estimate_trial(point, trials)
        total += seconds * repetitions
        counts[basis] += repetitions
    parts = [f"{counts[b]} trials {label}" for b, label in BASES.items() if counts[b]]
    return total, f"{'; '.join(parts)}; {len(trials)} past trials"
