"""What a preset is: one experiment of a paper as sweep or rating-campaign specs at two sizes.

``quick`` has fewer grid points (still one on each side of every threshold the findings check) and
fewer repetitions; ``full`` is the paper's grid. A job type declares its presets as a
:class:`Chapter` (``JobType.presets``); ``qoelab.presets`` collects every job type's for the
Reproduce page and ``qoelab sweep run --preset``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

SIZES = ("quick", "full")
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
    job_type: str = ""  # the job type that runs it (a sweep) or whose sessions are rated (a campaign)
    source: str = "Thesis"  # names the sweep's experiment: "Thesis Fig. 4.6: ...", "Paper 002 E7: ..."
    # Fixed parameters that differ by size (paper 002: 20 pairs for 30 s quick, 100 for 300 s full).
    sized: dict[str, dict[str, Any]] = field(default_factory=dict)

    def sweep_spec(self, size: Size) -> dict[str, Any]:
        """A sweep spec for ``POST /api/sweeps/`` (kind ``sweep``)."""
        if self.kind != "sweep":
            raise ValueError(f"{self.key} is a rating campaign, not a sweep")
        return {
            "experiment": {
                "name": f"{self.source} {self.figure}: {self.title}",
                "description": self.description,
            },
            "job_type": self.job_type,
            "name": f"{self.figure} ({size})",
            "grid": {k: list(v) for k, v in self.grids[_size(size)].items()},
            "fixed": {**self.fixed, **self.sized.get(size, {})},
            "repetitions": self.repetitions[size],
            "order": "random",
            "seed": self.seed,
        }

    def recording_sweep_spec(self, size: Size) -> dict[str, Any]:
        """For a campaign preset: a sweep that records one session per condition (``record``), for
        the recorded variant of the campaign (its evaluators watch the videos)."""
        if self.kind != "campaign":
            raise ValueError(f"{self.key} is a sweep; its spec is sweep_spec")
        return {
            "experiment": {"name": f"{self.source} {self.figure}: {self.title} (recorded sessions)",
                           "description": self.description},
            "job_type": self.job_type,
            "name": f"{self.figure} ({size}, recorded)",
            "grid": {k: list(v) for k, v in self.grids[_size(size)].items()},
            "fixed": {**self.fixed, **self.sized.get(size, {}), "record": True},
            "repetitions": 1,
            "order": "random",
            "seed": self.seed,
        }  # fmt: skip

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

    def unique_points(self, size: Size) -> list[dict[str, Any]]:
        """The points a sweep runs: a job type may drop parameters that do not apply to a point
        (storage APT's ``sessions`` outside fixed mode), and points that become equal run once."""
        if self.kind != "sweep":
            return self.points(size)
        # Read from the registry on use: the job types declare their presets, not the other way.
        from qoelab import jobs
        from qoelab.params import validate_params

        job = jobs.get(self.job_type)
        out, seen = [], set()
        for point in self.points(size):
            valid = validate_params(job.params, point)
            dropped = job.inapplicable(valid) if job.inapplicable else frozenset()
            key = repr(sorted((k, v) for k, v in valid.model_dump(mode="json").items() if k not in dropped))
            if key not in seen:
                seen.add(key)
                out.append({k: v for k, v in point.items() if k not in dropped})
        return out

    def trial_count(self, size: Size) -> int:
        return len(self.unique_points(size)) * (self.repetitions[size] if self.kind == "sweep" else 1)


def _size(size: str) -> str:
    if size not in SIZES:
        raise ValueError(f"size must be one of {', '.join(SIZES)}, got {size!r}")
    return size


@dataclass(frozen=True)
class Chapter:
    """A paper's experiments as one section of the Reproduce page: the findings report that judges
    them, the heading, a note on the set-up (backticks mark code), and the presets in order."""

    report: str
    heading: str
    presets: tuple[Preset, ...]
    note: str = ""
