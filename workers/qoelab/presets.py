"""One-click reproductions of a paper's experiments: sweep and rating-campaign specs at two sizes.

``quick`` has fewer grid points (still one on each side of every threshold the findings check, see
``qoelab.findings``), 3 repetitions and 5 pages; ``full`` is the paper's grid with 10 repetitions.
The thesis gives ranges, not grid points, for its figures (../shared/notes/seed-rd-qoe.md): the full
grids are log-spaced across them, as in ``examples/thesis-fig4.*.yaml`` (a test keeps the two equal).
Plain data: the backend's Reproduce page and the CLI build sweeps and campaigns from the same specs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

SIZES = ("quick", "full")
PROTOCOLS = ["vnc", "spice", "x2go"]
Size = Literal["quick", "full"]


@dataclass(frozen=True)
class Preset:
    """One experiment of a paper. ``grids[size]`` is the swept part; ``fixed`` is the same at both sizes."""

    key: str
    report: str  # the findings report that judges its results (qoelab.findings)
    figure: str
    title: str
    description: str
    kind: Literal["sweep", "campaign"]
    grids: dict[str, dict[str, list[Any]]]
    fixed: dict[str, Any] = field(default_factory=dict)
    repetitions: dict[str, int] = field(default_factory=lambda: {"quick": 3, "full": 10})
    seed: int = 1

    def sweep_spec(self, size: Size) -> dict[str, Any]:
        """A sweep spec for ``POST /api/sweeps/`` (kind ``sweep``)."""
        if self.kind != "sweep":
            raise ValueError(f"{self.key} is a rating campaign, not a sweep")
        return {
            "experiment": {"name": f"Thesis {self.figure}: {self.title}", "description": self.description},
            "job_type": "rd_qoe",
            "name": f"{self.figure} ({size})",
            "grid": {k: list(v) for k, v in self.grids[_size(size)].items()},
            "fixed": {**self.fixed, "pages": 5},
            "repetitions": self.repetitions[size],
            "order": "random",
            "seed": self.seed,
        }

    def points(self, size: Size) -> list[dict[str, Any]]:
        """Every combination of the grid over the fixed part, the grid's first key varying slowest."""
        fixed = self.sweep_spec(size)["fixed"] if self.kind == "sweep" else self.fixed
        out: list[dict[str, Any]] = [{}]
        for key, values in self.grids[_size(size)].items():
            out = [{**c, key: v} for c in out for v in values]
        return [{**fixed, **c} for c in out]

    def conditions(self, size: Size) -> list[dict[str, Any]]:
        """Rating conditions (kind ``campaign``): every combination of the grid, protocol first."""
        return [{"params": point} for point in self.points(size)]

    def trial_count(self, size: Size) -> int:
        n = 1
        for values in self.grids[_size(size)].values():
            n *= len(values)
        return n * (self.repetitions[size] if self.kind == "sweep" else 1)


def _size(size: str) -> str:
    if size not in SIZES:
        raise ValueError(f"size must be one of {', '.join(SIZES)}, got {size!r}")
    return size


# The thesis' ranges, log-spaced (Figs. 4.6-4.8) and 1-5 Mbit/s of TCP throughput (Figs. 4.3/4.4).
FULL_RATES = ["0.5mbit", "1mbit", "2mbit", "5mbit", "10mbit", "20mbit", "50mbit", "100mbit", "200mbit",
              "500mbit", "1000mbit"]  # fmt: skip
FULL_DELAYS = ["10ms", "25ms", "50ms", "100ms", "150ms", "200ms"]
FULL_LOSSES = ["0.01%", "0.03%", "0.1%", "0.3%", "1%", "3%", "5%", "10%"]
DCR_RATES = ["1mbit", "2mbit", "3mbit", "4mbit", "5mbit"]

CH4: tuple[Preset, ...] = (
    Preset(
        key="ch4-fig46",
        report="ch4",
        figure="Fig. 4.6",
        title="bandwidth",
        description="T, X and X/T vs bottleneck bandwidth 0.5-1000 Mbit/s at 10 ms one-way delay",
        kind="sweep",
        grids={
            # quick: 1 Mbit/s (<= "a few"), 10 and 100 Mbit/s (SPICE's side of its 10 Mbit/s switch).
            "quick": {"protocol": PROTOCOLS, "rate": ["1mbit", "10mbit", "100mbit"]},
            "full": {"protocol": PROTOCOLS, "rate": FULL_RATES},
        },
        fixed={"delay": "10ms", "loss": "0%", "verify_duration": "2s"},
        seed=46,
    ),
    Preset(
        key="ch4-fig47",
        report="ch4",
        figure="Fig. 4.7",
        title="delay",
        description="T vs one-way delay 10-200 ms at 1 Mbit/s (a) and 10 Mbit/s (b)",
        kind="sweep",
        grids={
            # quick: two delays at or below the 50 ms crossing of Fig. 4.7a and one far above it.
            "quick": {"protocol": PROTOCOLS, "rate": ["1mbit", "10mbit"], "delay": ["10ms", "50ms", "200ms"]},
            "full": {"protocol": PROTOCOLS, "rate": ["1mbit", "10mbit"], "delay": FULL_DELAYS},
        },
        fixed={"loss": "0%", "verify_duration": "2s"},
        seed=47,
    ),
    Preset(
        key="ch4-fig48",
        report="ch4",
        figure="Fig. 4.8",
        title="loss",
        description="T vs random loss 0.01-10 % at 1 and 10 Mbit/s, 100 ms one-way delay",
        kind="sweep",
        grids={
            # quick: two losses below the 3 % and one above the 5 % the finding compares.
            "quick": {"protocol": PROTOCOLS, "rate": ["1mbit", "10mbit"], "loss": ["0.1%", "1%", "10%"]},
            "full": {"protocol": PROTOCOLS, "rate": ["1mbit", "10mbit"], "loss": FULL_LOSSES},
        },
        # Q = 1 s: at 100 ms a retransmission timeout can exceed 0.5 s and split one update in two.
        fixed={"delay": "100ms", "verify_duration": "2s", "quiet": "1s"},
        seed=48,
    ),
    Preset(
        key="ch4-table42",
        report="ch4",
        figure="Table 4.2",
        title="DCR at 1 Mbit/s",
        description="Live DCR ratings of screen, mouse and keyboard response and image clarity at "
        "1 Mbit/s with 10, 100 and 200 ms one-way delay (ITU-T P.910)",
        kind="campaign",
        grids={
            "quick": {"protocol": PROTOCOLS, "delay": ["10ms", "200ms"]},
            "full": {"protocol": PROTOCOLS, "delay": ["10ms", "100ms", "200ms"]},
        },
        fixed={"rate": "1mbit", "loss": "0%"},
    ),
    Preset(
        key="ch4-fig43-44",
        report="ch4",
        figure="Figs. 4.3/4.4",
        title="DCR vs throughput and delay",
        description="Live DCR ratings vs TCP throughput 1-5 Mbit/s at 10, 50 and 100 ms one-way delay",
        kind="campaign",
        grids={
            "quick": {"protocol": PROTOCOLS, "rate": ["1mbit", "3mbit", "5mbit"], "delay": ["10ms", "100ms"]},
            "full": {"protocol": PROTOCOLS, "rate": DCR_RATES, "delay": ["10ms", "50ms", "100ms"]},
        },
        fixed={"loss": "0%"},
    ),
)

REGISTRY: dict[str, Preset] = {p.key: p for p in CH4}


def get(key: str) -> Preset:
    try:
        return REGISTRY[key]
    except KeyError:
        raise ValueError(f"unknown preset {key!r} (known: {', '.join(REGISTRY)})") from None
