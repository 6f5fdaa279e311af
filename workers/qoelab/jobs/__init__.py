"""The one place job types are registered. Add a module here and it exists everywhere."""

from __future__ import annotations

from qoelab.jobtype import JobType

REGISTRY: dict[str, JobType] = {}


def register(job: JobType) -> JobType:
    if job.name in REGISTRY:
        raise ValueError(f"job type {job.name!r} registered twice")
    REGISTRY[job.name] = job
    return job


def get(name: str) -> JobType:
    try:
        return REGISTRY[name]
    except KeyError:
        known = ", ".join(sorted(REGISTRY)) or "none"
        raise KeyError(f"unknown job type {name!r} (known: {known})") from None


def _load() -> None:
    # Each job module calls register(...) at import time; add new job types to this import.
    from qoelab.jobs import (  # noqa: F401
        link_check,
        live_session,
        rd_qoe,
        storage_apt,
        storage_bench,
        thinclient_tcp,
        vose,
    )


_load()
