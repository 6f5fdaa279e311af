"""APT: the number of active sessions, tuned by bracket search and golden-section search.

The algorithm of thesis 000 §2.3 / paper 003 §3 (Eqs. 2.1-2.4), as extracted in
``../shared/notes/seed-bdl-apt.md`` §1.5-1.7. The papers leave several points open; each one is
fixed here, the same way for every run, so that runs are comparable:

- one *step* is one measured interval Δ at a fixed N; the controller sees only its goodput G(N);
- bracket phase: N starts at ``n0`` and grows as N ← min(round(alpha·N), n_max) while goodput
  does not *strictly* decrease (G < G_prev);
- the bracket (l, m, r) is (N measured before m, N measured before the decrease, N that decreased);
  a decrease at the first increase gives (max(1, round(n0/alpha)), n0, alpha·n0);
- a step that reaches ``n_max`` without a decrease fixes N at n_max and flags the run *saturated*;
- golden-section phase: Eq. 2.1 as printed (``gss="paper"``, the left case l + (m − l)·ν) or the
  textbook left case m − (m − l)·ν (``gss="textbook"``); int() is the nearest integer; the
  comparison of Eq. 2.2 is strict (a tie keeps m); G(m) is the value measured when m was probed;
- the search stops when Eq. 2.1 returns m (that is, r − l ≤ 2) and N stays at m from then on.

The controller is a plain state machine: ask ``n`` for the next interval's N, feed the measured
goodput to ``observe``; it never sleeps or measures, so the same code drives a real block-device
layer, the synthetic transport and ``qoelab apt simulate``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from qoelab.errors import ParameterError, QoelabError

NU = (3 - math.sqrt(5)) / 2  # "golden ratio" ν of Eq. 2.1, ≈ 0.381966
GssVariant = Literal["paper", "textbook"]
Phase = Literal["bracket", "gss", "fixed"]


class CurveError(QoelabError, ValueError):
    """A goodput curve that cannot be read, or that lacks a goodput the controller asked for."""


@dataclass(frozen=True)
class AptConfig:
    """The controller's parameters (Table 2.1: n0 = 4, alpha = 2, at most 128 sessions)."""

    n0: int = 4
    alpha: float = 2.0
    n_max: int = 64
    gss: GssVariant = "paper"

    def __post_init__(self) -> None:
        if isinstance(self.n_max, bool) or not isinstance(self.n_max, int) or self.n_max < 1:
            raise ParameterError("n_max", f"must be an integer of at least 1, got {self.n_max!r}")
        if isinstance(self.n0, bool) or not isinstance(self.n0, int) or not 1 <= self.n0 <= self.n_max:
            raise ParameterError("n0", f"must be an integer from 1 to n_max ({self.n_max}), got {self.n0!r}")
        if not isinstance(self.alpha, int | float) or not math.isfinite(self.alpha) or self.alpha <= 1:
            raise ParameterError("alpha", f"must be a number greater than 1, got {self.alpha!r}")
        if self.n0 < self.n_max and nearest(self.alpha * self.n0) <= self.n0:
            # round(alpha * N) must move N, or the bracket phase would probe the same N forever.
            raise ParameterError(
                "alpha", f"round(alpha × n0) must exceed n0 ({self.n0}), got alpha {self.alpha:g}"
            )
        if self.gss not in ("paper", "textbook"):
            raise ParameterError("gss", f"must be 'paper' or 'textbook', got {self.gss!r}")


def nearest(x: float) -> int:
    """int() of Eq. 2.1: the nearest integer (halves round up; ν is irrational, so no probe is a half)."""
    return math.floor(x + 0.5)


def gss_probe(l: int, m: int, r: int, variant: GssVariant = "paper") -> int:
    """Eq. 2.1: the next N inside the bracket (l, m, r); returns m when the bracket is closed."""
    if m - l > r - m:
        return nearest(l + (m - l) * NU) if variant == "paper" else nearest(m - (m - l) * NU)
    return nearest(m + (r - m) * NU)


@dataclass
class Step:
    """One measured interval: the N used, its goodput and what the controller did with it."""

    k: int  # 1-based step number
    n: int
    goodput_bps: float
    phase: Phase  # the phase this interval was measured in
    branch: str  # increase | decrease (the bracket is set) | saturated | eq2.3 | eq2.4 | steady
    l: int | None = None  # the bracket after this step (None in the bracket phase)
    m: int | None = None
    r: int | None = None
    next_n: int = 0  # the N of the next interval; equal to m once the search has stopped

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class AptController:
    """State machine of one APT run. ``n`` is the N for the next interval; ``observe`` feeds G(N)."""

    config: AptConfig = field(default_factory=AptConfig)
    n: int = 0
    phase: Phase = "bracket"
    saturated: bool = False
    steps: list[Step] = field(default_factory=list)
    bracket: tuple[int, int, int] | None = None
    _g_m: float = 0.0  # G(m), measured when m was probed
    _prev: tuple[int, float] | None = None  # (N, G) of the previous bracket-phase step
    _before_prev: int | None = None  # N measured before the previous step

    def __post_init__(self) -> None:
        self.n = self.config.n0

    @property
    def converged(self) -> bool:
        return self.phase == "fixed"

    @property
    def search_steps(self) -> int:
        """Measured intervals until N was fixed (the papers' "steps to converge")."""
        return sum(1 for s in self.steps if s.phase != "fixed")

    @property
    def n_star(self) -> int | None:
        return self.n if self.converged else None

    def observe(self, goodput_bps: float) -> Step:
        """Record G(N) of the interval just measured at ``self.n`` and choose the next N."""
        if not math.isfinite(goodput_bps) or goodput_bps < 0:
            raise ValueError(f"goodput must be a finite number ≥ 0, got {goodput_bps!r}")
        n, k = self.n, len(self.steps) + 1
        if self.phase == "bracket":
            step = self._bracket_step(k, n, goodput_bps)
        elif self.phase == "gss":
            step = self._gss_step(k, n, goodput_bps)
        else:
            step = Step(k, n, goodput_bps, "fixed", "steady", *self._lmr())
        step.next_n = self.n
        self.steps.append(step)
        return step

    def _lmr(self) -> tuple[int | None, int | None, int | None]:
        return self.bracket if self.bracket else (None, None, None)

    def _bracket_step(self, k: int, n: int, g: float) -> Step:
        cfg = self.config
        if self._prev is not None and g < self._prev[1]:
            prev_n, prev_g = self._prev
            l = self._before_prev if self._before_prev is not None else max(1, nearest(prev_n / cfg.alpha))
            self.bracket, self._g_m = (l, prev_n, n), prev_g
            return self._enter_gss(Step(k, n, g, "bracket", "decrease"))
        if n >= cfg.n_max:
            self.saturated, self.phase = True, "fixed"
            self.bracket = None
            return Step(k, n, g, "bracket", "saturated")
        self._before_prev = self._prev[0] if self._prev else None
        self._prev = (n, g)
        self.n = min(nearest(cfg.alpha * n), cfg.n_max)
        return Step(k, n, g, "bracket", "increase")

    def _enter_gss(self, step: Step) -> Step:
        """Probe Eq. 2.1 on the current bracket; a closed bracket fixes N at m."""
        l, m, r = self.bracket  # type: ignore[misc]
        probe = gss_probe(l, m, r, self.config.gss)
        if probe == m:
            self.phase, self.n = "fixed", m
        else:
            if not l < probe < r:  # cannot happen for integer brackets; a guard, not a branch
                raise AssertionError(f"Eq. 2.1 probed {probe} outside the bracket ({l}, {m}, {r})")
            self.phase, self.n = "gss", probe
        step.l, step.m, step.r = l, m, r
        return step

    def _gss_step(self, k: int, n: int, g: float) -> Step:
        l, m, r = self.bracket  # type: ignore[misc]
        if g > self._g_m:  # Eq. 2.2 holds -> Eq. 2.4: N becomes the midpoint
            self.bracket = (m, n, r) if m < n else (l, n, m)
            self._g_m = g
            branch = "eq2.4"
        else:  # Eq. 2.3: N becomes an end point
            self.bracket = (l, m, n) if m < n else (n, m, r)
            branch = "eq2.3"
        return self._enter_gss(Step(k, n, g, "gss", branch))

    def summary(self) -> dict[str, Any]:
        return {
            "probes": [s.n for s in self.steps if s.phase != "fixed"],
            "n_star": self.n_star,
            "steps": self.search_steps,
            "saturated": self.saturated,
            "bracket": list(self.bracket) if self.bracket else None,
        }


def simulate(
    goodput: Callable[[int], float] | dict[int, float],
    config: AptConfig | None = None,
    max_steps: int = 1000,
) -> AptController:
    """Run the controller on a goodput curve until N is fixed (no time passes)."""
    if isinstance(goodput, dict):
        table = goodput

        def curve(n: int) -> float:
            if n not in table:
                raise CurveError(f"the curve has no goodput for N = {n} (it gives N = {_span(table)})")
            return table[n]
    else:
        curve = goodput
    ctl = AptController(config or AptConfig())
    while not ctl.converged:
        if len(ctl.steps) >= max_steps:
            raise RuntimeError(f"APT did not converge in {max_steps} steps (last N {ctl.n})")
        ctl.observe(float(curve(ctl.n)))
    return ctl


def _span(curve: dict[int, float]) -> str:
    keys = sorted(curve)
    return (
        f"{keys[0]}-{keys[-1]}" if keys == list(range(keys[0], keys[-1] + 1)) else ", ".join(map(str, keys))
    )


def read_curve(lines: Iterable[str]) -> dict[int, float]:
    """A goodput curve from CSV lines ``N,goodput_bps`` (a header line and # comments are skipped)."""
    curve: dict[int, float] = {}
    header_allowed = True
    for lineno, raw in enumerate(lines, 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        first, header_allowed = header_allowed, False
        parts = [p.strip() for p in line.split(",")]
        if len(parts) != 2:
            raise CurveError(f"line {lineno}: expected 'N,goodput_bps', got {raw.strip()!r}")
        try:
            n, g = int(parts[0]), float(parts[1])
        except ValueError:
            if first:
                continue  # a header line
            raise CurveError(
                f"line {lineno}: expected an integer N and a number, got {raw.strip()!r}"
            ) from None
        if n < 1 or not math.isfinite(g) or g < 0:
            raise CurveError(
                f"line {lineno}: N must be ≥ 1 and goodput a finite number ≥ 0, got {raw.strip()!r}"
            )
        if n in curve:
            raise CurveError(f"line {lineno}: N = {n} given twice")
        curve[n] = g
    if not curve:
        raise CurveError("the curve has no 'N,goodput_bps' lines")
    return curve
