"""``qoelab run JOB --set NAME=VALUE``: any job type's trial on this host, with the API's validation,
and the per-family commands every job type declares (``JobType.cli``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from pyroute2 import netns

from qoelab import jobs

QOELAB = Path(sys.executable).with_name("qoelab")


def qoelab(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("QOELAB_")}
    return subprocess.run([str(QOELAB), *args], capture_output=True, text=True, env={**env, "COLUMNS": "100"},
                          timeout=timeout)  # fmt: skip


def one_sentence(out: subprocess.CompletedProcess) -> str:
    assert out.returncode == 2 and "Traceback" not in out.stderr, out.stderr
    [line] = [ln for ln in out.stderr.splitlines() if ln.strip() and "WARNING" not in ln]
    return line


def test_a_parameter_out_of_bounds_is_refused_naming_the_field_and_bound_before_anything_runs() -> None:
    line = one_sentence(qoelab("run", "link_check", "--set", "rate=99tbit"))
    assert line == "qoelab: error: rate: must be at most 10gbit/s, got '99tbit'"
    line = one_sentence(qoelab("run", "vose", "--set", "durtion=3s"))
    assert line.startswith("qoelab: error: durtion:"), line


def test_an_unknown_or_internal_job_type_is_refused_naming_the_ones_there_are() -> None:
    for name in ("nope", "live_session"):
        line = one_sentence(qoelab("run", name))
        assert "JOB: must be one of link_check, rd_qoe" in line and f"got '{name}'" in line
    assert "NAME=VALUE" in one_sentence(qoelab("run", "link_check", "--set", "rate"))


def test_every_job_types_own_commands_are_in_the_help() -> None:
    out = qoelab("--help")
    assert out.returncode == 0
    for command in ("link", "rd", "vm", "apt", "vose", "thinclient", "storage", "run"):
        assert f"\n    {command} " in out.stdout, command
    assert all(job.cli for job in jobs.REGISTRY.values() if not job.internal)  # each declares its own


@pytest.mark.netns
def test_a_link_check_runs_here_and_prints_its_result_as_json_leaving_nothing() -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root to create network namespaces")
    out = qoelab("run", "link_check", "--set", "rate=10mbit", "--set", "delay=5ms", "--set", "duration=1s",
                 "--json")  # fmt: skip
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert result["job"] == "link_check"
    assert result["params"]["rate"] == 10e6 and result["params"]["delay"] == 0.005
    assert result["summary"]["configured_rate_bps"] == 10e6 and result["summary"]["tcp_down_bps"] > 0
    assert result["link"] and result["provenance"]
    assert not [n for n in netns.listnetns() if n.startswith("qjr")]


@pytest.mark.netns
def test_without_json_it_prints_the_log_and_each_metric_with_its_label_and_unit() -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root to create network namespaces")
    out = qoelab("run", "link_check", "--set", "rate=10mbit", "--set", "duration=1s")
    assert out.returncode == 0, out.stderr
    labels = {m.name: m.label for m in jobs.get("link_check").metrics}
    assert f"{labels['tcp_down_bps']}: " in out.stdout
