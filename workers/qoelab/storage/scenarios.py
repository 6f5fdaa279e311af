"""Thesis 001's network scenarios (notes seed-storage-bench.md §2) as link parameters.

Every latency in the thesis is a round-trip time, applied as RTT/2 each way (WANem's ``delay``,
footnote 11). Whether WANem applied jitter and loss per direction is not stated (§5.15); the lab
applies both to each direction, as a WANem bridge does to every packet through it, so 0.1 % loss is
0.1 % per direction and jitter (normal with σ = j, WANem's default distribution) is on each one-way
delay. netem, under WANem, sorts packets by their jittered send time, so jitter reorders them; the
lab's emulator keeps order unless told, so ``reorder`` is on wherever there is jitter.
The named scenarios follow the figures' cumulative reading (§2): "added 0.1% loss" is 50 ms +
0.1 %, and "realistic" adds ±10 ms jitter to that.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from qoelab.emulation.tcp import TcpSettings
from qoelab.errors import ParameterError

RATES = {"100mbit": 100e6, "1gbit": 1e9}
# Fig. 3.2 (notes §1.4): net.core.rmem_max / wmem_max and the tcp_rmem / tcp_wmem maximum, 16 MiB; with
# CUBIC and tcp_no_metrics_save = 1 the thesis' TCP on both hosts.
THESIS_BUFFER = 16 << 20
RTT_SWEEP_MS = (0, 20, 50, 160, 250)
LOSS_SWEEP_PCT = (0.0, 0.1, 1.0, 2.5)


@dataclass(frozen=True)
class Scenario:
    key: str
    title: str  # as the thesis' tables name the row
    rtt_ms: float
    loss_pct: float = 0.0
    jitter_ms: float = 0.0

    def job_params(self, rate: str = "100mbit") -> dict[str, Any]:
        """A ``storage_bench`` trial's link: the RTT (applied as RTT/2 each way), loss and jitter."""
        if rate not in RATES:
            raise ParameterError("rate", f"thesis scenarios run at {' or '.join(RATES)}, got {rate!r}")
        return {"rate": rate, "rtt": f"{self.rtt_ms:g}ms", "loss": f"{self.loss_pct:g}%",
                "jitter": f"{self.jitter_ms:g}ms"}  # fmt: skip


SCENARIOS: dict[str, Scenario] = {
    s.key: s
    for s in (
        Scenario("ideal", "ideal network", 0.0),
        Scenario("latency", "added 50 ms latency", 50.0),
        Scenario("loss", "added 0.1% loss", 50.0, loss_pct=0.1),
        Scenario("realistic", "realistic network", 50.0, loss_pct=0.1, jitter_ms=10.0),
    )
}


def scenario(key: str) -> Scenario:
    try:
        return SCENARIOS[key]
    except KeyError:
        raise ParameterError("scenario", f"must be one of {', '.join(SCENARIOS)}, got {key!r}") from None


def thesis_tcp() -> TcpSettings:
    """Fig. 3.2's TCP: CUBIC, 16 MiB buffer ceilings, no cached metrics between connections."""
    return TcpSettings(cc="cubic", rmem_max=THESIS_BUFFER, wmem_max=THESIS_BUFFER, no_metrics_save=True)
