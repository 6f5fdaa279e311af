"""One storage-APT run over any transport: the modes, the steps, the steady-state window.

A transport moves data with N active sessions and says how many bytes completed; this module turns
that into the papers' measurements (thesis §2.4.5: G = X / Δ per interval, summed over the active
sessions). ``vanilla`` is one session, ``fixed`` N sessions, ``apt`` lets the controller choose N
one interval Δ at a time; every mode then runs a steady-state window and reports its goodput.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from qoelab.apt.controller import AptConfig, AptController, Step

Mode = Literal["apt", "fixed", "vanilla"]


@dataclass
class Interval:
    """What a transport measured over one interval at a fixed N."""

    start_s: float  # on the run's clock (0 = the first interval's start)
    elapsed_s: float
    bytes: int  # completed in the interval, all sessions
    per_second: list[tuple[float, float]] = field(default_factory=list)  # (t, goodput bit/s)

    @property
    def goodput_bps(self) -> float:
        return 8 * self.bytes / self.elapsed_s if self.elapsed_s > 0 else 0.0


class Transport(Protocol):
    """Sessions to one storage target; ``n_max`` are open, the first N of them active."""

    n_max: int

    def set_active(self, n: int) -> None: ...

    def measure(self, seconds: float) -> Interval: ...

    def cpu_ticks(self) -> dict[str, float] | None:
        """Cumulative CPU ticks (USER_HZ) of the client and storage sides, or None if not measured."""
        ...


@dataclass
class AptRun:
    """The outcome of one run: steps (APT), the steady window and the CPU it cost."""

    mode: Mode
    steps: list[Step]
    step_intervals: list[Interval]
    steady: Interval
    n_steady: int
    controller: AptController | None
    cpu: dict[str, float] | None  # ticks spent in the steady window, per side
    per_second_n: list[tuple[float, int]]
    warmup: Interval | None = None  # fixed and vanilla: the interval before the steady window

    @property
    def converge_s(self) -> float | None:
        """Run time until N was fixed: the end of the last search step."""
        if self.controller is None or not self.controller.converged:
            return None
        searched = [iv for s, iv in zip(self.steps, self.step_intervals, strict=True) if s.phase != "fixed"]
        return searched[-1].start_s + searched[-1].elapsed_s if searched else 0.0

    def summary(self, link_rate_bps: float | None) -> dict[str, float]:
        out: dict[str, float] = {
            "goodput_steady_bps": self.steady.goodput_bps,
            "n_steady": float(self.n_steady),
            "steady_s": self.steady.elapsed_s,
        }
        if link_rate_bps:
            out["utilization"] = self.steady.goodput_bps / link_rate_bps
        if self.warmup is not None:
            out["warmup_s"] = self.warmup.elapsed_s
        if self.controller is not None:
            ctl = self.controller
            out["steps"] = float(ctl.search_steps)
            out["saturated"] = 1.0 if ctl.saturated else 0.0
            if ctl.n_star is not None:
                out["n_star"] = float(ctl.n_star)
            if self.converge_s is not None:
                out["converge_s"] = self.converge_s
        if self.cpu and self.steady.bytes > 0:
            bits = 8 * self.steady.bytes
            for side, ticks in self.cpu.items():
                out[f"cpu_ticks_per_bit_{side}"] = ticks / bits
                out[f"cpu_load_{side}"] = ticks / self.steady.elapsed_s / USER_HZ  # cores busy
        return out


USER_HZ = 100  # /proc/stat and /proc/<pid>/stat tick rate on Linux (sysconf(_SC_CLK_TCK))


def run_modes(
    transport: Transport,
    mode: Mode,
    config: AptConfig,
    delta_s: float,
    steady_s: float,
    sessions: int | None = None,
    on_step: Callable[[Step, Interval], None] | None = None,
    warmup_s: float = 0.0,
) -> AptRun:
    """Run one trial's measurement: the search (``apt``), then the steady-state window.

    ``fixed`` and ``vanilla`` first run ``warmup_s`` at their N, so that every mode's steady window
    starts on warm connections (TCP past slow start, the target past its first commands), as APT's
    does after its search."""
    steps: list[Step] = []
    intervals: list[Interval] = []
    per_second_n: list[tuple[float, int]] = []
    ctl: AptController | None = None
    if mode == "apt":
        ctl = AptController(config)
        while not ctl.converged:
            transport.set_active(ctl.n)
            iv = transport.measure(delta_s)
            per_second_n += [(t, ctl.n) for t, _ in iv.per_second]
            step = ctl.observe(iv.goodput_bps)
            steps.append(step)
            intervals.append(iv)
            if on_step:
                on_step(step, iv)
        n = ctl.n
    elif mode == "fixed":
        if sessions is None or not 1 <= sessions <= transport.n_max:
            raise ValueError(f"fixed mode needs 1 ≤ sessions ≤ {transport.n_max}, got {sessions!r}")
        n = sessions
    else:
        n = 1
    transport.set_active(n)
    warmup = None
    if mode != "apt" and warmup_s > 0:
        warmup = transport.measure(warmup_s)
        per_second_n += [(t, n) for t, _ in warmup.per_second]
    before = transport.cpu_ticks()
    steady = transport.measure(steady_s)
    after = transport.cpu_ticks()
    per_second_n += [(t, n) for t, _ in steady.per_second]
    cpu = {side: after[side] - before[side] for side in after} if before and after else None
    return AptRun(mode, steps, intervals, steady, n, ctl, cpu, per_second_n, warmup)


def step_sample_values(step: Step, iv: Interval) -> dict[str, Any]:
    """One step as a sample row (k, N, G, phase, l, m, r, branch, when)."""
    return {**step.to_json(), "start_s": iv.start_s, "elapsed_s": iv.elapsed_s, "bytes": iv.bytes}
