"""The one place job types are registered. A job module declares ``JOB`` (a JobType) and imports
nothing from here; add its name to ``BUILT_IN`` and it exists everywhere."""

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


# Job types from outside the lab's code: module names, comma-separated, each declaring its job type
# as ``JOB`` as the built-in ones do (docs/architecture.md, "Add a job type").
PLUGINS_ENV = "QOELAB_JOB_MODULES"


def load_module(name: str) -> JobType:
    """Import a job module and register the ``JOB`` it declares (a built-in one or a plug-in)."""
    try:
        module = importlib.import_module(name)
    except ImportError as err:
        raise QoelabError(f"cannot import job module {name!r}: {err}") from err
    job = getattr(module, "JOB", None)
    if not isinstance(job, JobType):
        raise QoelabError(f"job module {name!r} declares no JOB (a qoelab.jobtype.JobType)")
    return register(job)


def _load() -> None:
    for name in BUILT_IN:
        load_module(f"qoelab.jobs.{name}")
    for name in filter(None, (m.strip() for m in os.environ.get(PLUGINS_ENV, "").split(","))):
        try:
            load_module(name)
        except QoelabError as err:
            raise QoelabError(f"{PLUGINS_ENV}: {err}") from err


_load()
