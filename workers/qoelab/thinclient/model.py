"""Paper 002's two-state model of thin-client server->client traffic, as a seeded generator.

The paper (Ogawa, Hasegawa, Murata; notes/seed-thinclient-tcp.md §1) splits a thin client's
response stream into **interactive flows** (one small packet per keystroke) and **bulk flows** (a
block of packets per screen update) and describes it by a two-state chain (Fig. 3, Table 1): after
an interactive flow the next is bulk with probability alpha, after a bulk flow the next is
interactive with probability beta; the time from one flow's start to the next's has a mean per
transition (t_II, t_IB, t_BI, t_BB); a bulk flow has c_B packets on average, 0.36 ms apart; packets
carry 137.2 B (interactive) and 936.2 B (bulk) on average (Table 2).

The paper gives **means only** and replayed real traces; a generator has to choose shapes. This
lab's choices (its assumption, not the paper's; all are parameters):

- **intervals**: exponential, shifted so that a flow starts at least ``threshold`` (the paper's
  6.3 ms flow-separation rule, §1.3) after the previous flow's last packet — otherwise the paper's
  own rule would read two flows as one. The mean stays the table's (the shift comes out of the
  exponential part);
- **bulk length**: geometric on 2, 3, … (a one-packet flow is interactive by the paper's rule) with
  mean c_B, cut at ``max_bulk`` (the paper's "less than about 100 packets"); or ``"pareto"``, a
  bounded power law on 2 … ``max_bulk`` with the same mean, for the heavy tail the paper's real
  traces had ("more than a few hundred packets in some cases", §3.3);
- **packet sizes**: the table's means, constant.

``generate`` returns the writes of one server, seeded; ``trace.fit`` reads the same parameters
back from any timeline (this generator's, or a real capture's), which is how the tests hold the
generator to Tables 1 and 2.
"""

from __future__ import annotations

import bisect
import functools
import math
import random
from dataclasses import asdict, dataclass
from typing import Literal

INTERACTIVE, BULK = "interactive", "bulk"
FLOW_THRESHOLD_S = 10**-2.2  # 6.3 ms: the paper's gap that starts a new flow (§1.3)


@dataclass(frozen=True)
class TwoStateModel:
    """Table 1 and 2 of paper 002 (defaults) and the lab's distribution shapes."""

    alpha: float = 0.09  # P(next flow bulk | this flow interactive)
    beta: float = 0.42  # P(next flow interactive | this flow bulk)
    t_ii: float = 0.27  # s, start of an interactive flow -> start of the next interactive one
    t_ib: float = 0.22
    t_bi: float = 0.24
    t_bb: float = 0.11
    c_b: float = 7.4  # packets per bulk flow (mean)
    bytes_interactive: float = 137.2  # per packet (mean)
    bytes_bulk: float = 936.2
    gap_bulk: float = 0.36e-3  # s between packets of one bulk flow
    threshold: float = FLOW_THRESHOLD_S
    max_bulk: int = 100
    intervals: Literal["exponential", "constant"] = "exponential"
    bulk_length: Literal["geometric", "pareto", "constant"] = "geometric"

    def __post_init__(self) -> None:
        problems = []
        for name in ("alpha", "beta"):
            if not 0 < getattr(self, name) <= 1:
                problems.append(f"{name} must be in (0, 1], got {getattr(self, name)}")
        for name in ("t_ii", "t_ib", "t_bi", "t_bb", "bytes_interactive", "bytes_bulk"):
            if not getattr(self, name) > 0:
                problems.append(f"{name} must be > 0, got {getattr(self, name)}")
        if not 2 <= self.c_b < self.max_bulk:
            problems.append(f"c_b must be from 2 to below max_bulk ({self.max_bulk}), got {self.c_b}")
        if not 0 <= self.gap_bulk < self.threshold:
            problems.append(
                f"gap_bulk must be from 0 to below threshold ({self.threshold}), got {self.gap_bulk}"
            )
        longest = (self.max_bulk - 1) * self.gap_bulk + self.threshold
        if min(self.t_bi, self.t_bb) <= longest:
            problems.append(
                f"t_bi and t_bb must exceed the longest bulk block plus the threshold ({longest:.4f} s)"
            )
        if problems:
            raise ValueError("; ".join(problems))

    @property
    def p_interactive(self) -> float:
        """Stationary share of interactive flows: beta / (alpha + beta) (0.82 in Table 2)."""
        return self.beta / (self.alpha + self.beta)

    @property
    def mean_interval(self) -> float:
        """Mean time from one flow's start to the next's, s (Table 1: 0.248 s, so 1,211 flows per 300 s;
        Table 2 counts 1,132.5: the paper's two tables disagree by 7 %, and this generator follows
        Table 1's intervals, docs/thinclient-tcp.md)."""
        a, b, pi = self.alpha, self.beta, self.p_interactive
        return pi * ((1 - a) * self.t_ii + a * self.t_ib) + (1 - pi) * (b * self.t_bi + (1 - b) * self.t_bb)

    def interval(self, this: str, nxt: str) -> float:
        return {
            (INTERACTIVE, INTERACTIVE): self.t_ii,
            (INTERACTIVE, BULK): self.t_ib,
            (BULK, INTERACTIVE): self.t_bi,
            (BULK, BULK): self.t_bb,
        }[this, nxt]

    def as_dict(self) -> dict[str, object]:
        return asdict(self)


@dataclass(frozen=True)
class Write:
    """One application write of the server: time from the start (s), bytes, flow kind and number."""

    t: float
    nbytes: int
    kind: str
    flow: int


@functools.lru_cache(maxsize=16)
def pareto_cdf(mean: float, top: int) -> tuple[float, ...]:
    """CDF over n = 2 .. top of P(n) ~ n^-s, with s found so that the mean is ``mean``."""
    sizes = range(2, top + 1)

    def mean_of(s: float) -> float:
        w = [n**-s for n in sizes]
        return sum(n * x for n, x in zip(sizes, w, strict=True)) / sum(w)

    lo, hi = 0.0, 20.0  # the mean falls as s grows: from (2 + top) / 2 at s = 0 towards 2
    for _ in range(80):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if mean_of(mid) > mean else (lo, mid)
    w = [n ** -((lo + hi) / 2) for n in sizes]
    total, acc, out = sum(w), 0.0, []
    for x in w:
        acc += x / total
        out.append(acc)
    return tuple(out)


def _bulk_packets(model: TwoStateModel, rng: random.Random) -> int:
    if model.bulk_length == "constant":
        return max(2, round(model.c_b))
    if model.bulk_length == "pareto":
        return 2 + bisect.bisect_left(pareto_cdf(model.c_b, model.max_bulk), rng.random() * (1 - 1e-12))
    # Geometric on {2, 3, ...} with mean c_b: 2 + failures before a success of p = 1/(c_b - 1).
    p = 1.0 / (model.c_b - 1.0)
    while True:
        n = 2 + int(math.log(1.0 - rng.random()) / math.log(1.0 - p)) if p < 1 else 2
        if n <= model.max_bulk:
            return n


def _gap(model: TwoStateModel, mean: float, shift: float, rng: random.Random) -> float:
    if model.intervals == "constant":
        return max(mean, shift)
    # Shifted exponential: at least ``shift``, mean ``mean`` (the shift is taken from the tail).
    return shift + rng.expovariate(1.0 / max(mean - shift, 1e-9))


def generate(model: TwoStateModel, duration: float, seed: int, start: float = 0.0) -> list[Write]:
    """The writes of one server for ``duration`` seconds, reproducible from ``seed``.

    The first flow's kind is drawn from the stationary distribution and it starts at ``start`` plus
    a uniform share of its interval, so that servers started together are not in step.
    """
    if duration <= 0:
        raise ValueError(f"duration must be > 0 s, got {duration}")
    rng = random.Random(seed)
    kind = INTERACTIVE if rng.random() < model.p_interactive else BULK
    t = start + rng.random() * model.interval(kind, kind)
    writes: list[Write] = []
    flow = 0
    end = start + duration
    while t < end:
        if kind == INTERACTIVE:
            packets = 1
            writes.append(Write(t, round(model.bytes_interactive), kind, flow))
        else:
            packets = _bulk_packets(model, rng)
            size = round(model.bytes_bulk)
            writes += [Write(t + i * model.gap_bulk, size, kind, flow) for i in range(packets)]
        if kind == INTERACTIVE:
            nxt = BULK if rng.random() < model.alpha else INTERACTIVE
        else:
            nxt = INTERACTIVE if rng.random() < model.beta else BULK
        block = (packets - 1) * model.gap_bulk
        t += _gap(model, model.interval(kind, nxt), block + model.threshold, rng)
        kind = nxt
        flow += 1
    return [w for w in writes if w.t < end]
