"""``qoelab run JOB --set NAME=VALUE …``: one trial of any job type on this host, outside a worker.

The parameters go through the job type's model as an API sweep's do (the error names the field and
its bound); the trial runs with the worker's runner function in a throwaway work dir, with its log
lines on standard output, or its summary, link check and provenance as JSON with ``--json``. A job
type's own commands (its ``JobType.cli``) run the same trials with flags named for their family.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

from qoelab import jobs
from qoelab.errors import ParameterError
from qoelab.jobs.local import apply_sets, run_here
from qoelab.params import validate_params
from qoelab.units import require_ascii

PREFIX = "qjr"  # not "ql": a worker starting on this host cleans every ql* trial it finds


def runnable() -> list[str]:
    """Job types a researcher may run (the lab's internal ones, such as live sessions, excepted)."""
    return [name for name, job in jobs.REGISTRY.items() if not job.internal]


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "run",
        help="run one trial of any job type on this host (needs root), parameters as --set NAME=VALUE",
        description="Validate the parameters as the API does, build the trial's link and run it here, "
        "as a worker would; print its log and summary (or JSON). Job types: "
        + ", ".join(runnable())
        + ". GET /api/job-types/ lists each one's parameters with their units and bounds.",
        epilog="examples:\n"
        + "".join(
            f"  {line}\n"
            for job in jobs.REGISTRY.values()
            for line in job.examples
            if line.startswith("qoelab run ")
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("job", metavar="JOB", help="the job type's name")
    p.add_argument("--set", metavar="NAME=VALUE", action="append", default=[],
                   help="a parameter, as in a sweep spec's fixed part (repeatable)")  # fmt: skip
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.set_defaults(func=cmd_run)


def cmd_run(args: argparse.Namespace) -> int:
    require_ascii("JOB", args.job)
    if args.job not in runnable():
        raise ParameterError("JOB", f"must be one of {', '.join(runnable())}, got {args.job!r}")
    job = jobs.get(args.job)
    params = validate_params(job.params, apply_sets({}, args.set))
    if os.geteuid() != 0:
        print(f"qoelab run {job.name}: needs root (network namespaces); run it with sudo", file=sys.stderr)
        return 2
    result = run_here(job, params, PREFIX, live=not args.json)
    if args.json:
        out: dict[str, Any] = {"job": job.name, "params": job.stored_params(params),
                               "summary": result.summary, "link": result.link,
                               "provenance": result.provenance}  # fmt: skip
        print(json.dumps(out, default=str))
        return 0
    labels = {m.name: (m.label, m.unit) for m in job.metrics}
    for name, value in result.summary.items():
        label, unit = labels.get(name, (name, ""))
        print(
            f"{label}: {value:.6g}{' ' + unit if unit else ''}"
            if isinstance(value, float)
            else f"{label}: {value}"
        )
    return 0
