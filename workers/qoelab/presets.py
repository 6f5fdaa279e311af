"""One-click reproductions of the papers' experiments, collected from the job types that declare them.

Each job type names its :class:`~qoelab.preset.Chapter` (``JobType.presets``, kept in the engine
package's ``presets.py``); this module reads them from the registry for the backend's Reproduce page
and ``qoelab sweep run --preset`` and names no job type. Plain data: both build sweeps and campaigns
from the same specs.
"""

from __future__ import annotations

from qoelab import jobs
from qoelab.jobtype import resolve
from qoelab.preset import SIZES, Chapter, Preset, Size

__all__ = ["SIZES", "Chapter", "Preset", "Size", "chapter", "chapters", "get", "every"]


def chapters() -> tuple[Chapter, ...]:
    """Every job type's chapter, in registry order (the Reproduce page's sections)."""
    return tuple(resolve(job.presets) for job in jobs.REGISTRY.values() if job.presets)


def chapter(report: str) -> Chapter:
    """The chapter of the findings report ``report`` (``ch4``, ``tc002`` ...)."""
    found = {c.report: c for c in chapters()}
    try:
        return found[report]
    except KeyError:
        raise ValueError(f"no presets for report {report!r} (known: {', '.join(found)})") from None


def every() -> dict[str, Preset]:
    """Every preset by key, chapter by chapter; a key used twice is refused naming both chapters."""
    out: dict[str, Preset] = {}
    owner: dict[str, str] = {}
    for c in chapters():
        for p in c.presets:
            if p.key in out:
                raise ValueError(f"preset {p.key!r} declared in chapters {owner[p.key]} and {c.report}")
            out[p.key], owner[p.key] = p, c.report
    return out


def get(key: str) -> Preset:
    known = every()
    try:
        return known[key]
    except KeyError:
        raise ValueError(f"unknown preset {key!r} (known: {', '.join(known)})") from None
