"""Run one trial of a job type on this host, outside a worker: ``qoelab apt run``, ``qoelab vose run``.

The same runner a worker calls, with a throwaway work dir, a prefix that a starting worker does not
clean up (not ``ql``), and the trial's log lines on standard output unless JSON is asked for.
"""

from __future__ import annotations

import logging
import secrets
import shutil
import signal
import sys
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from qoelab.errors import ParameterError
from qoelab.jobtype import JobType, TrialContext, TrialResult


def apply_sets(raw: dict[str, Any], items: Iterable[str]) -> dict[str, Any]:
    """``--set NAME=VALUE`` options into the raw parameters (the job's model checks the values)."""
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name:
            raise ParameterError("--set", f"takes NAME=VALUE, got {item!r}")
        raw[name.strip()] = value.strip()
    return raw


def run_here(job: JobType, params: Any, prefix_base: str, live: bool) -> TrialResult:
    """Run ``job`` with validated ``params``; ``live`` prints its log lines as they come."""
    log = logging.getLogger(f"qoelab.{job.name}.run")
    if live:
        handler = logging.StreamHandler(sys.stdout)
        handler.setFormatter(logging.Formatter("%(message)s"))
        log.addHandler(handler)
        log.setLevel(logging.INFO)
        log.propagate = False
    workdir = Path(tempfile.mkdtemp(prefix=f"qoelab-{job.name}-run-"))
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # unwind through the teardown
    # Not "ql": a worker starting on this host cleans every ql* trial it finds.
    ctx = TrialContext(trial_id=f"{job.name}-run", workdir=workdir, prefix=prefix_base + secrets.token_hex(3),
                       log=log)  # fmt: skip
    try:
        return job.run(params, ctx)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
