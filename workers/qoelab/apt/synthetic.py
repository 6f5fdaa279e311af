"""The ``synthetic`` transport: goodput from a curve instead of a network, on a simulated clock.

For checking the algorithm and for teaching: a run takes no time and moves no data. The curve is
either given (goodput per N) or modelled from the link, the rise-then-fall shape APT is about
(thesis §2.2): each session is window-limited to W/RTT, the sum cannot pass the link rate C, and
once the sessions' windows together overfill the path (BDP + queue) the overflow costs goodput
through losses and retransmissions. The model is a teaching aid, not a fit to measurements:

    G(N) = min(N · W/RTT, C) / (1 + k · max(0, N·W − (C·RTT + Q)) / (C·RTT + Q))

with W the effective window (half the socket buffer: Linux keeps the other half as overhead with
tcp_adv_win_scale = 1), Q the queue in bytes and k = ``OVERFLOW_COST``. Measured goodput gets
multiplicative Gaussian noise (``noise``, seeded) so that the search meets the noise of a real run.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable

from qoelab.apt.trial import Interval

OVERFLOW_COST = 0.05  # fraction of goodput lost per path-capacity of overfilled windows


def model_curve(
    rate_bps: float, rtt_s: float, buffer_bytes: float, queue_bytes: float
) -> Callable[[int], float]:
    """G(N) in bit/s for N sessions over one bottleneck (see the module docstring)."""
    window = buffer_bytes / 2
    capacity = rate_bps * rtt_s / 8 + queue_bytes  # bytes the path holds: in flight + queued

    def goodput(n: int) -> float:
        offered = n * window * 8 / rtt_s if rtt_s > 0 else math.inf
        overflow = max(0.0, n * window - capacity) / capacity
        return min(offered, rate_bps) / (1 + OVERFLOW_COST * overflow)

    return goodput


class SyntheticTransport:
    """A transport whose interval goodput is ``curve(N)`` with noise; time is simulated."""

    def __init__(self, curve: Callable[[int], float], n_max: int, noise: float = 0.0, seed: int = 1) -> None:
        self.curve, self.n_max, self.noise = curve, n_max, noise
        self._rng = random.Random(seed)
        self._n = 1
        self._clock = 0.0

    def set_active(self, n: int) -> None:
        if not 1 <= n <= self.n_max:
            raise ValueError(f"active sessions must be 1..{self.n_max}, got {n}")
        self._n = n

    def measure(self, seconds: float) -> Interval:
        start, per_second, total = self._clock, [], 0.0
        whole = max(1, math.ceil(seconds - 1e-9))
        for i in range(whole):
            length = min(1.0, seconds - i)
            g = max(0.0, self.curve(self._n) * (1 + self._rng.gauss(0.0, self.noise)))
            per_second.append((start + i + length, g))
            total += g * length / 8
        self._clock += seconds
        return Interval(start, seconds, int(total), per_second)

    def cpu_ticks(self) -> dict[str, float] | None:
        return None  # nothing runs: no CPU to account for
