"""The one place job types are registered. Add a module's name to ``BUILT_IN`` and it exists everywhere."""

from __future__ import annotations

import importlib
import os

from qoelab.errors import QoelabError
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


# The lab's job types, in the order forms, the API and the Reproduce page show them (the order
# they came to the lab: the thesis' chapters 4, 2 and 3, then paper 002 and thesis 001).
BUILT_IN = ("link_check", "live_session", "rd_qoe", "storage_apt", "vose", "thinclient_tcp", "storage_bench")


# Job types from outside the lab's code: module names, comma-separated, each registering its job
# type on import as the built-in ones do (docs/architecture.md, "Add a job type").
PLUGINS_ENV = "QOELAB_JOB_MODULES"


def _load() -> None:
    # Each job module calls register(...) at import time.
    for name in BUILT_IN:
        importlib.import_module(f"qoelab.jobs.{name}")
    for name in filter(None, (m.strip() for m in os.environ.get(PLUGINS_ENV, "").split(","))):
        try:
            importlib.import_module(name)
        except ImportError as err:
            raise QoelabError(f"{PLUGINS_ENV}: cannot import job module {name!r}: {err}") from err


_load()
