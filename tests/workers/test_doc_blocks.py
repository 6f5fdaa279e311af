"""The docs' generated blocks are what their scripts print from the committed files today (issue 32).

A check, a threshold or a committed file that changes without the block being written again fails
here; the message names the command that writes it.
"""

from __future__ import annotations

import importlib.util
import json
import pathlib
import sys
from types import ModuleType

REPO = pathlib.Path(__file__).resolve().parents[2]


def load(name: str, path: pathlib.Path) -> ModuleType:
    sys.path.insert(0, str(path.parent))  # the script's own sibling modules (vose: report.py)
    spec = importlib.util.spec_from_file_location(name, path)
    module = sys.modules.setdefault(name, importlib.util.module_from_spec(spec))
    spec.loader.exec_module(module)
    return module


def block(doc: pathlib.Path, begin: str, end: str) -> str:
    return doc.read_text().split(begin, 1)[1].split(end, 1)[0].strip("\n")


def test_the_storage_apt_blocks_are_what_their_results_give():
    run = load("storage_apt_benchmark", REPO / "benchmarks" / "storage_apt" / "run.py")
    doc = REPO / "docs" / "storage-apt.md"
    for marker, results in (
        ("storage-apt-bench", "results.jsonl"),
        ("storage-apt-current", "results-epoll.jsonl"),
    ):
        path = REPO / "benchmarks" / "storage_apt" / results
        rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        expected = run.report(rows).strip("\n")
        assert block(doc, f"<!-- {marker}:begin -->", f"<!-- {marker}:end -->") == expected, (
            f"docs/storage-apt.md's {marker} block is stale: .venv/bin/python benchmarks/storage_apt/run.py "
            f"--report --out benchmarks/storage_apt/{results} --write-doc --marker {marker}"
        )


def test_the_vose_block_is_what_its_results_give():
    report = load("report", REPO / "benchmarks" / "vose" / "report.py")
    expected = report.render(REPO / "benchmarks" / "vose" / "results.jsonl").strip("\n")
    assert block(REPO / "docs" / "vose.md", report.BEGIN, report.END) == expected, (
        "docs/vose.md's block is stale: .venv/bin/python benchmarks/vose/run.py --report --write-doc"
    )


def test_the_sweep_list_blocks_are_what_their_results_give():
    bench = load("sweep_list_benchmark", REPO / "benchmarks" / "reliability" / "sweep_list.py")
    for marker, results in (
        ("sweep-list", "sweep-list-last-run.json"),
        ("sweep-list-before", "sweep-list-before.json"),
    ):
        path = REPO / "benchmarks" / "reliability" / results
        expected = bench.markdown(json.loads(path.read_text()))
        assert block(
            REPO / "docs" / "reliability.md", f"<!-- {marker}:begin -->", f"<!-- {marker}:end -->"
        ) == (expected), (
            f"docs/reliability.md's {marker} block is stale: .venv/bin/python "
            f"benchmarks/reliability/sweep_list.py --report --json benchmarks/reliability/{results} "
            f"--write-docs --marker {marker}"
        )


def test_the_suite_profile_block_is_what_the_committed_run_gives(capsys):
    profile = load("test_profile_script", REPO / "scripts" / "test_profile.py")
    results = REPO / "benchmarks" / "suite" / "2026-12-04"
    assert profile.main(["--results", str(results)]) == 0
    expected = capsys.readouterr().out.strip("\n")
    assert block(REPO / "docs" / "testing.md", profile.BEGIN, profile.END) == expected, (
        "docs/testing.md's profile is stale: .venv/bin/python scripts/test_profile.py "
        "--results benchmarks/suite/2026-12-04 --write-doc"
    )


def test_the_table_of_suite_runs_is_what_the_committed_runs_give(capsys):
    profile = load("test_profile_script", REPO / "scripts" / "test_profile.py")
    assert profile.main(["--runs", str(REPO / "benchmarks" / "suite")]) == 0
    expected = capsys.readouterr().out.strip("\n")
    assert block(REPO / "docs" / "testing.md", profile.RUNS_BEGIN, profile.RUNS_END) == expected, (
        "docs/testing.md's table of runs is stale: .venv/bin/python scripts/test_profile.py "
        "--runs benchmarks/suite --write-doc"
    )


def test_the_subjective_published_block_is_what_the_committed_sets_give():
    published = load("subjective_published", REPO / "benchmarks" / "subjective" / "published.py")
    assert block(REPO / "docs" / "ratings.md", published.BEGIN, published.END) == published.render(), (
        "docs/ratings.md's published-results block is stale: "
        ".venv/bin/python benchmarks/subjective/published.py --write-doc"
    )


def test_the_subjective_planning_block_is_what_the_committed_sets_give():
    published = load("subjective_published", REPO / "benchmarks" / "subjective" / "published.py")
    assert (
        block(REPO / "docs" / "ratings.md", published.PLAN_BEGIN, published.PLAN_END)
        == published.render_planning()
    ), (
        "docs/ratings.md's rater-planning block is stale: "
        ".venv/bin/python benchmarks/subjective/published.py --write-doc"
    )


def test_the_chapter_4_report_is_what_the_committed_files_give():
    ch4 = load("reproduce_ch4", REPO / "benchmarks" / "reproduce_ch4" / "run.py")
    paths = [REPO / s.path for s in ch4.COMMITTED["ch4"].sources]
    assert block(ch4.DOC, ch4.BEGIN, ch4.END) == ch4.report(paths).strip("\n"), (
        "docs/reproduction/ch4.md's block is stale: .venv/bin/python benchmarks/reproduce_ch4/run.py"
    )


def test_the_thin_client_stall_table_is_what_its_committed_runs_give():
    stall = load("thinclient_stall", REPO / "benchmarks" / "thinclient" / "stall.py")
    expected = stall.table(REPO / "benchmarks" / "thinclient" / "results" / "stall.jsonl")
    doc = REPO / "docs" / "thinclient-tcp.md"
    assert block(doc, "<!-- stall-table:begin -->", "<!-- stall-table:end -->") == expected, (
        "docs/thinclient-tcp.md's stall table is stale: "
        ".venv/bin/python benchmarks/thinclient/stall.py --table"
    )
