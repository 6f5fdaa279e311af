"""A job type kept outside the lab's code: everything the lab needs to know about it is declared
here as ``JOB``, and ``QOELAB_JOB_MODULES=echo_job`` (with this directory on the Python path)
brings it in.

A trial runs ``echo`` with a message and counts the characters that came back; ``leave`` makes it
leave its marker file behind, as a killed trial would, for its cleanup to find. It declares every
part a job type may: parameters, runner, capability probe, cleanup, presets, a findings report with
one check, a duration estimate and a command. tests/backend/test_plugin_job.py looks for it in each
place the lab shows job types.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from qoelab.estimate import Estimate, PastRun
from qoelab.findings.base import Check, Comparison, Report, Scope, at_least
from qoelab.jobtype import Cleanup, HostProbe, JobType, Metric, TrialContext, TrialResult
from qoelab.preset import Chapter, Preset
from qoelab.stats import mean_ci

NAME = "echo_job"
HERE = __name__


class EchoParams(BaseModel):
    model_config = ConfigDict(extra="forbid")
    message: str = Field("hello", min_length=1, max_length=40, description="what echo prints")
    repeat: int = Field(1, ge=1, le=5, description="how many times")
    leave: bool = Field(False, description="leave the marker file behind, as a killed trial would")


def _marker(prefix: str) -> Path:
    return Path(tempfile.gettempdir(), f"qoelab-{prefix}-echo")


def run(p: EchoParams, ctx: TrialContext) -> TrialResult:
    echoed = [subprocess.run(["echo", p.message], capture_output=True, text=True, check=True).stdout.strip()
              for _ in range(p.repeat)]  # fmt: skip
    _marker(ctx.prefix).write_text("\n".join(echoed))
    if not p.leave:
        _marker(ctx.prefix).unlink()
    ok = all(e == p.message for e in echoed)
    return TrialResult(summary={"chars": float(sum(map(len, echoed))), "echoed_ok": float(ok)})


def cleanup(prefix: str) -> list[str]:
    removed = []
    for path in Path(tempfile.gettempdir()).glob(f"qoelab-{prefix}*-echo"):
        path.unlink(missing_ok=True)
        removed.append(f"echo marker {path}")
    return removed


def probe(found: HostProbe) -> None:
    found.set(
        "echo.program", shutil.which("echo") is not None, "echo is not installed (Debian package 'coreutils')"
    )


def _every_echo_came_back(scope: Scope) -> tuple[list[Comparison], list[str]]:
    s = mean_ci(r["summary"].get("echoed_ok") for r in scope.rows)
    return [at_least(s, 1.0, "share echoed back", "every repeat")], []


REPORT = Report(
    "echo001",
    "The echo paper (§1): echo prints what it is given",
    (
        Check(
            "echo_returns_message",
            "echo returns its message",
            "echo prints its argument",
            "§1",
            "repeat",
            (),
            _every_echo_came_back,
        ),
    ),  # fmt: skip
    {"echo_returns_message": "always"},
)

CHAPTER = Chapter(
    "echo001",
    "The echo paper: echo against its repeats",
    (
        Preset(
            key="echo-fig1",
            report="echo001",
            figure="Fig. 1",
            title="repeats",
            description="echo 'hi' once to five times",
            kind="sweep",
            job_type=NAME,
            grids={"quick": {"repeat": [1, 2]}, "full": {"repeat": [1, 2, 3, 4, 5]}},
            fixed={"message": "hi"},
            repetitions={"quick": 2, "full": 3},
        ),
    ),  # fmt: skip
    note="Runs `echo` on the worker.",
)


def estimate(
    points: Sequence[Mapping[str, Any]], repetitions: int, past: Sequence[PastRun]
) -> tuple[float, str]:
    return 0.5 * len(points) * repetitions, f"half a second per trial ({len(past)} past trials here)"


def register_cli(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("echo", help="the echo job type's own command (a test's plug-in)")
    p.add_argument("message")
    p.set_defaults(func=lambda args: print(f"echo job: {args.message}") or 0)


JOB = JobType(
    name=NAME,
    title="Echo (a test's plug-in)",
    description="Runs echo and counts what came back.",
    params=EchoParams,
    requires=frozenset({"echo.program"}),
    run=run,  # type: ignore[arg-type]
    metrics=(Metric("chars", "characters echoed", "chars"), Metric("echoed_ok", "echoed back", "")),
    timeout_s=30,
    max_attempts=1,
    probes=(f"{HERE}:probe",),
    cleanups=(Cleanup(f"{HERE}:cleanup", after_link=True),),
    reports=(f"{HERE}:REPORT",),
    presets=f"{HERE}:CHAPTER",
    estimate=Estimate(f"{HERE}:estimate"),
    cli=(f"{HERE}:register_cli",),
    examples=(f"qoelab run {NAME} --set message=hi --json",),
)
