"""The vose example specs, the chart declarations and the `qoelab vose` command's refusals."""

from __future__ import annotations

import itertools
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from qoelab.jobs import get
from qoelab.params import validate_params

REPO = Path(__file__).resolve().parents[2]
JOB = get("vose")
EXAMPLES = sorted((REPO / "examples").glob("vose_*.yaml"))


def qoelab(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "qoelab.cli", *args], capture_output=True, text=True, timeout=60
    )


def test_there_is_an_example_for_each_figure_family():
    names = {p.name for p in EXAMPLES}
    assert {"vose_fig311_checksum.yaml", "vose_fig312_ipsec.yaml", "vose_quota.yaml"} <= names


@pytest.mark.parametrize("spec", EXAMPLES, ids=lambda p: p.name)
def test_every_point_of_the_example_specs_is_valid(spec):
    doc = yaml.safe_load(spec.read_text())
    assert doc["job_type"] == "vose"
    grid = doc.get("grid", {})
    for combo in itertools.product(*grid.values()):
        validate_params(JOB.params, {**doc.get("fixed", {}), **dict(zip(grid, combo, strict=True))})


def test_the_charts_name_the_quota_as_a_quota_not_a_frequency():
    quota_charts = [c for c in JOB.charts if c.x == "cpu_quota"]
    assert len(quota_charts) == 3
    for chart in quota_charts:
        assert "quota" in chart.title.lower() and "quota" in chart.x_label.lower()
        assert "frequency" not in chart.title.lower()
    assert {c.key for c in JOB.charts} >= {"fig35", "fig37", "fig39", "fig311", "fig312"}
    metrics = {m.name for m in JOB.metrics}
    assert {c.y for c in JOB.charts if c.source == "summary"} <= metrics


def test_vose_help_lists_its_commands():
    out = qoelab("vose", "--help")
    assert out.returncode == 0
    for cmd in ("run", "validate", "calibrate"):
        assert cmd in out.stdout


@pytest.mark.parametrize(
    ("args", "field"),
    [
        (["run", "--mode", "vose", "--speedup", "0.5"], "speedup"),
        (["run", "--mode", "vose", "--speedup", "fast"], "speedup"),
        (["run", "--duration", "2h"], "duration"),
        (["run", "--set", "record=100"], "record"),
        (["run", "--set", "cpu_quota=3"], "cpu_quota"),
        (["run", "--mode", "hardware", "--device", "checksum"], "device"),
        (["validate", "--primitive", "aes", "--reps", "0"], "--reps"),
        (["validate", "--primitive", "aes", "--duration", "0.1s"], "--duration"),
    ],
)
def test_bad_arguments_get_one_sentence_naming_the_field(args, field):
    out = qoelab("vose", *args)
    assert out.returncode != 0
    assert field in out.stderr
    assert "Traceback" not in out.stderr
