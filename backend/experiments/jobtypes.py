"""The backend's view of the job-type registry in ``qoelab.jobs`` (the worker library).

The registry is plain data, so the backend validates sweeps, routes trials and describes charts
from the same declaration the worker runs; nothing here is stored in the database.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from qoelab.jobtype import JobType


@functools.cache
def registry() -> dict[str, JobType]:
    # Imported on first use: the job modules import runners' dependencies, which Django start-up
    # (migrate, check) does not need. Cached: a listed page asks once per sweep.
    from qoelab import jobs

    return jobs.REGISTRY


def offered() -> dict[str, JobType]:
    """The job types a researcher may pick in the New-sweep form (not the lab's internal ones)."""
    return {name: job for name, job in registry().items() if not job.internal}


def get_job(name: str) -> JobType | None:
    return registry().get(name)


def known_names() -> str:
    return ", ".join(sorted(registry())) or "none"


def runnable_by(capabilities: frozenset[str]) -> list[str]:
    """Names of job types whose required capabilities are all in ``capabilities``."""
    return sorted(name for name, job in registry().items() if job.requires <= capabilities)


def stimulus_job_types() -> list[str]:
    """Job types whose trials record sessions a rating campaign can show."""
    return sorted(name for name, job in registry().items() if job.stimuli)


def produces_stimuli(name: str) -> bool:
    job = get_job(name)
    return job is not None and job.stimuli


def param_names(job: JobType) -> list[str]:
    return list(job.params.model_fields)


def describe(job: JobType) -> dict[str, Any]:
    """JSON description for /api/job-types/ and the dashboard."""
    return {
        "name": job.name,
        "title": job.title,
        "description": job.description,
        "params_schema": job.params.model_json_schema(),
        "requires": sorted(job.requires),
        "metrics": [dataclasses.asdict(m) for m in job.metrics],
        "charts": [dataclasses.asdict(c) for c in job.charts],
        "timeout_s": job.timeout_s,
        "max_attempts": job.max_attempts,
        "stimuli": job.stimuli,
    }
