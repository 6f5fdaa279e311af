"""scripts/test_profile.py: the suite's profile by area from a junit file and the steps' times."""

import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

JUNIT = """<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="pytest" errors="0" failures="1" skipped="1" tests="5" time="100.5">
<testcase classname="tests.backend.test_listing" name="test_a" time="2.5"/>
<testcase classname="tests.backend.test_listing" name="test_b" time="1.5"/>
<testcase classname="tests.workers.vm.test_vm_trials" name="test_guest" time="60.0"/>
<testcase classname="tests.e2e.sweeps.test_sweep" name="test_page" time="30.0">
  <failure message="x"/></testcase>
<testcase classname="tests.workers.emulation.test_netem" name="test_skip" time="0.01">
  <skipped message="no"/></testcase>
</testsuite></testsuites>
"""


def load():
    spec = importlib.util.spec_from_file_location("test_profile_script", ROOT / "scripts" / "test_profile.py")
    module = sys.modules.setdefault(spec.name, importlib.util.module_from_spec(spec))
    spec.loader.exec_module(module)  # registered first: its dataclass looks its module up
    return module


def test_areas_sums_and_the_slowest_come_from_the_junit_file(tmp_path, capsys):
    (tmp_path / "junit.xml").write_text(JUNIT)
    (tmp_path / "steps.tsv").write_text("ruff (lint, format)\t12\nfront-end unit tests (node)\t3\n")
    assert load().main(["--results", str(tmp_path), "--slowest", "2"]) == 0
    out = capsys.readouterr().out
    assert "| ruff (lint, format) | | 12.0 s | |" in out
    assert "| VM guests (QEMU) | 1 | 1 min 00.0 s | 64 % |" in out  # 60 of 94.01 s summed
    assert "| backend (Django, PostgreSQL) | 2 | 4.0 s | 4 % |" in out
    assert "| **pytest wall time** | 5 (1 failed, 3 passed, 1 skipped) | 1 min 40.5 s | |" in out
    slowest = out.split("slowest tests:")[1]
    assert slowest.index("test_guest") < slowest.index("test_page") and "test_a" not in slowest


def test_without_a_junit_file_it_says_to_run_the_suite(tmp_path, capsys):
    assert load().main(["--results", str(tmp_path)]) == 1
    assert "run make test first" in capsys.readouterr().err


def test_a_two_lane_run_lists_each_lanes_busy_time(tmp_path, capsys):
    lanes = JUNIT.replace(
        'name="test_guest" time="60.0"/>',
        'name="test_guest" time="60.0"><properties><property name="lane" value="gw1"/></properties>'
        "</testcase>",
    ).replace(
        'name="test_a" time="2.5"/>',
        'name="test_a" time="2.5"><properties><property name="lane" value="gw0"/></properties></testcase>',
    )
    (tmp_path / "junit.xml").write_text(lanes)
    assert load().main(["--results", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "| lane gw0 (tests run one after another) | 1 | 2.5 s | |" in out
    assert "| lane gw1 (tests run one after another) | 1 | 1 min 00.0 s | |" in out


def test_the_hosts_cpu_during_each_test_gives_how_busy_the_cores_were(tmp_path, capsys):
    cpu = JUNIT.replace(
        'name="test_guest" time="60.0"/>',
        'name="test_guest" time="60.0"><properties><property name="host_cpu_s" value="90.0"/></properties>'
        "</testcase>",
    )
    (tmp_path / "junit.xml").write_text(cpu)
    (tmp_path / "run.json").write_text(
        '{"date": "d", "commit": "c", "cpu": "x", "cores": 2, "kernel": "k", "host_load": "quiet",'
        ' "how": "h", "ci_run_wall_minutes": 2, "before_pytest": "b"}'
    )
    assert load().main(["--results", str(tmp_path), "--slowest", "1"]) == 0
    out = capsys.readouterr().out
    assert "| step or area | tests | time | share of test time | host CPU | cores busy |" in out
    assert "| VM guests (QEMU) | 1 | 1 min 00.0 s | 64 % | 1 min 30.0 s | 75 % |" in out  # 90 of 2 x 60 s
    guest = "`tests.workers.vm.test_vm_trials::test_guest` | VM guests (QEMU)"
    assert f"| {guest} | 1 min 00.0 s | 1 min 30.0 s | 75 % |" in out


def test_the_host_cpu_plugin_reads_a_growing_busy_time():
    from fixtures.host_cpu import busy_seconds

    first = busy_seconds()
    while busy_seconds() == first:  # this loop itself keeps a core busy until the next tick
        pass
    assert busy_seconds() > first > 0


def test_the_table_of_runs_has_a_row_per_committed_run_naming_its_failures(tmp_path, capsys):
    import json

    run = {
        "commit": "abc1234",
        "cpu": "Intel Xeon",
        "how": "CI=true bash .ci/run on a fresh clone",
        "host_load": "one busy loop beside it",
        "ci_run_wall_minutes": 2.5,
        "cpu_busy_mean_percent": 91.0,
    }
    (tmp_path / "2026-12-04").mkdir()
    (tmp_path / "2026-12-04" / "junit.xml").write_text(JUNIT)
    (tmp_path / "2026-12-04" / "run.json").write_text(json.dumps(run))
    (tmp_path / "notes").mkdir()  # a folder without run.json is no run
    assert load().main(["--runs", str(tmp_path)]) == 0
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| `")]
    assert rows == [
        "| `2026-12-04` | abc1234 | Intel Xeon | fresh clone | 1 | one busy loop beside it | 2.5 min "
        "| 1 min 40.5 s | 91.0 % | 3 passed, failed: `test_page` |"
    ]
