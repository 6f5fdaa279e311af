"""Where the suite's time goes: the steps of scripts/test.sh and pytest's tests by area (issue 34).

Reads what ``make test`` leaves in test-results/: ``steps.tsv`` (each static step's seconds, written
by scripts/test.sh) and ``junit.xml`` (pytest's, each test's setup + call + teardown). A test's area
is the folder it lives in; a module-scoped fixture's start-up counts in the first test that uses it.
Where junit.xml has each test's ``host_cpu_s`` (tests/fixtures/host_cpu.py), the tables also give
the host's CPU time meanwhile and how busy that kept its cores.

    .venv/bin/python scripts/test_profile.py              # the tables, as markdown
    .venv/bin/python scripts/test_profile.py --slowest 50 --results /tmp/ci1/main/test-results

A committed run (``benchmarks/suite/<date>/``: junit.xml, steps.tsv, and run.json with the commit,
machine and whole-run time) goes into docs/testing.md with ``--results <that folder> --write-doc``;
``--runs benchmarks/suite --write-doc`` puts the table of every committed run there.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import xml.etree.ElementTree as ET
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "testing.md"
BEGIN, END = "<!-- suite-profile:begin -->", "<!-- suite-profile:end -->"
RUNS_BEGIN, RUNS_END = "<!-- suite-runs:begin -->", "<!-- suite-runs:end -->"

# First match wins: a test module's dotted name (junit's classname) by prefix.
AREAS: tuple[tuple[str, str], ...] = (
    ("tests.e2e.", "Playwright (browser pages)"),
    ("tests.workers.vm.", "VM guests (QEMU)"),
    ("tests.workers.rd.", "remote-desktop sessions (namespaces)"),
    ("tests.workers.emulation.", "link emulation (namespaces)"),
    ("tests.workers.storage.", "storage (namespaces, guests)"),
    ("tests.workers.thinclient.", "thin-client TCP"),
    ("tests.workers.apt.", "storage APT"),
    ("tests.integration.", "Celery integration"),
    ("tests.backend.", "backend (Django, PostgreSQL)"),
    ("tests.workers.", "worker library, other"),
    ("tests.", "repository checks"),
)


@dataclass
class Case:
    name: str
    area: str
    seconds: float
    outcome: str
    lane: str = ""  # the xdist worker that ran it (gw0, gw1), empty in a one-lane run
    host_cpu: float | None = None  # the host's CPU seconds meanwhile (tests/fixtures/host_cpu.py)


def area_of(classname: str) -> str:
    return next((area for prefix, area in AREAS if classname.startswith(prefix)), "other")


def read_cases(junit: Path) -> tuple[list[Case], float]:
    """Every test case and pytest's own wall time (the testsuite's ``time``)."""
    root = ET.parse(junit).getroot()
    suites = [root] if root.tag == "testsuite" else list(root.iter("testsuite"))
    cases = []
    for tc in root.iter("testcase"):
        outcome = "passed"
        for tag in ("failure", "error", "skipped"):
            if tc.find(tag) is not None:
                outcome = {"failure": "failed", "error": "error", "skipped": "skipped"}[tag]
        classname, seconds = tc.get("classname", ""), float(tc.get("time", 0))
        props = {p.get("name"): p.get("value", "") for p in tc.iter("property")}
        cpu = float(props["host_cpu_s"]) if "host_cpu_s" in props else None
        name = f"{classname}::{tc.get('name')}"
        cases.append(Case(name, area_of(classname), seconds, outcome, props.get("lane", ""), cpu))
    return cases, sum(float(s.get("time", 0)) for s in suites)


def read_steps(path: Path) -> list[tuple[str, float]]:
    if not path.exists():
        return []
    rows = (line.split("\t") for line in path.read_text().splitlines() if "\t" in line)
    return [(name, float(seconds)) for name, seconds in rows]


def minutes(seconds: float) -> str:
    return f"{int(seconds // 60)} min {seconds % 60:04.1f} s" if seconds >= 60 else f"{seconds:.1f} s"


def provenance(results: Path) -> list[str]:
    """One sentence from run.json, where a committed run has one."""
    path = results / "run.json"
    if not path.exists():
        return []
    run = json.loads(path.read_text())
    return [
        f"Measured {run['date']} at commit {run['commit']} on {run['cpu']} ({run['cores']} cores, Linux "
        f"{run['kernel']}; {run['host_load']}): {run['how']}. The whole run took "
        f"{run['ci_run_wall_minutes']:g} min; before pytest: {run['before_pytest']}.",
        "",
    ]


class Cpu:
    """The host-CPU columns, for a run whose junit file has them (older committed runs do not)."""

    def __init__(self, cases: list[Case], cores: int) -> None:
        self.on, self.cores = any(c.host_cpu is not None for c in cases), cores

    def head(self) -> tuple[str, str]:
        return (" host CPU | cores busy |", "---|---|") if self.on else ("", "")

    def cells(self, group: list[Case]) -> str:
        if not self.on:
            return ""
        cpu, t = sum(c.host_cpu or 0.0 for c in group), sum(c.seconds for c in group)
        busy = f"{100 * cpu / (t * self.cores):.0f} %" if t else ""
        return f" {minutes(cpu)} | {busy} |"

    def blank(self) -> str:
        return " | |" if self.on else ""


def markdown(
    cases: list[Case], pytest_wall: float, steps: list[tuple[str, float]], slowest: int, cores: int = 2
) -> str:
    by_area: dict[str, list[Case]] = defaultdict(list)
    for case in cases:
        by_area[case.area].append(case)
    summed = sum(c.seconds for c in cases)
    cpu = Cpu(cases, cores)
    head, rule = cpu.head()
    lines = [f"| step or area | tests | time | share of test time |{head}", f"|---|---|---|---|{rule}"]
    lines += [f"| {name} | | {minutes(seconds)} | |{cpu.blank()}" for name, seconds in steps]
    for area, group in sorted(by_area.items(), key=lambda kv: -sum(c.seconds for c in kv[1])):
        t = sum(c.seconds for c in group)
        lines.append(f"| {area} | {len(group)} | {minutes(t)} | {100 * t / summed:.0f} % |{cpu.cells(group)}")
    outcomes = defaultdict(int)
    for case in cases:
        outcomes[case.outcome] += 1
    counted = ", ".join(f"{n} {outcome}" for outcome, n in sorted(outcomes.items()))
    lanes: dict[str, list[Case]] = defaultdict(list)
    for case in cases:
        if case.lane:
            lanes[case.lane].append(case)
    for lane, group in sorted(lanes.items()):  # each lane's busy time; the wall time is the longest
        t = sum(c.seconds for c in group)
        row = f"| lane {lane} (tests run one after another) | {len(group)} | {minutes(t)} | |"
        lines.append(row + cpu.blank())
    lines.append(
        f"| **pytest wall time** | {len(cases)} ({counted}) | {minutes(pytest_wall)} | |{cpu.cells(cases)}"
    )
    lines += ["", f"The {slowest} slowest tests:", ""]
    lines += [f"| test | area | time |{head}", f"|---|---|---|{rule}"]
    for case in sorted(cases, key=lambda c: -c.seconds)[:slowest]:
        lines.append(f"| `{case.name}` | {case.area} | {minutes(case.seconds)} |{cpu.cells([case])}")
    return "\n".join(lines)


def runs_table(folder: Path) -> str:
    """One row per committed run (a folder with run.json and junit.xml), oldest first."""
    lines = [
        "| run | commit | machine | checkout | lanes | beside it | whole run | pytest | cores busy "
        "| result |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for results in sorted(folder.iterdir()):
        if not (results / "run.json").exists() or not (results / "junit.xml").exists():
            continue
        run = json.loads((results / "run.json").read_text())
        cases, wall = read_cases(results / "junit.xml")
        lanes = len({c.lane for c in cases if c.lane}) or 1
        load = run["host_load"]
        quiet = load.startswith(("quiet", "nothing else ran"))
        busy = run.get("cpu_busy_mean_percent")
        failed = [c.name.rsplit("::", 1)[1] for c in cases if c.outcome in ("failed", "error")]
        passed = sum(c.outcome == "passed" for c in cases)
        result = f"{passed} passed" + (f", failed: {', '.join(f'`{n}`' for n in failed)}" if failed else "")
        lines.append(
            f"| `{results.name}` | {run['commit']} | {run['cpu']} | "
            f"{'fresh clone' if 'fresh clone' in run['how'] else 'development checkout'} | {lanes} | "
            f"{'nothing' if quiet else load} | {run['ci_run_wall_minutes']:g} min | {minutes(wall)} | "
            f"{'' if busy is None else f'{busy:.1f} %'} | {result} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--results", type=Path, default=ROOT / "test-results", help="make test's test-results/")
    ap.add_argument("--slowest", type=int, default=30, help="how many of the slowest tests to list")
    ap.add_argument("--write-doc", action="store_true", help=f"put the tables into {DOC.relative_to(ROOT)}")
    ap.add_argument("--runs", type=Path, help="a folder of committed runs (benchmarks/suite): one row each")
    args = ap.parse_args(argv)
    if args.runs:
        text = runs_table(args.runs)
        print(text)
        if args.write_doc:
            write_doc(RUNS_BEGIN, RUNS_END, text)
        return 0
    junit = args.results / "junit.xml"
    if not junit.exists():
        print(f"{junit} does not exist: run make test first", file=sys.stderr)
        return 1
    cases, wall = read_cases(junit)
    run = args.results / "run.json"
    cores = int(json.loads(run.read_text())["cores"]) if run.exists() else os.cpu_count() or 1
    text = "\n".join(
        [
            *provenance(args.results),
            markdown(cases, wall, read_steps(args.results / "steps.tsv"), args.slowest, cores),
        ]
    )
    print(text)
    if args.write_doc:
        write_doc(BEGIN, END, text)
    return 0


def write_doc(begin: str, end: str, text: str) -> None:
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from docblock import write_block

    write_block(DOC, begin, end, text)


if __name__ == "__main__":
    sys.exit(main())
