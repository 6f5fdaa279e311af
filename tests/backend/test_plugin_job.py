"""A job type kept outside the lab's code (tests/plugin_job/echo_job, loaded as ``QOELAB_JOB_MODULES``
loads it) appears in every place the lab shows job types: the API, the New-sweep form, the Reproduce
page, the findings, the CLI, ``qoelab run``, the capabilities and the cleanup, with no edit outside
its package."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from experiments.models import Sweep
from qoelab import findings, jobs
from qoelab.jobs import REGISTRY

pytestmark = pytest.mark.django_db

PLUGIN_DIR = Path(__file__).resolve().parents[1] / "plugin_job"
QOELAB = Path(sys.executable).with_name("qoelab")


@pytest.fixture
def echo_job() -> Iterator[Any]:
    """The plug-in registered for one test, as importing a QOELAB_JOB_MODULES module does."""
    sys.path.insert(0, str(PLUGIN_DIR))
    try:
        yield jobs.load_module("echo_job")
    finally:
        REGISTRY.pop("echo_job", None)
        sys.modules.pop("echo_job", None)
        sys.path.remove(str(PLUGIN_DIR))


def test_the_api_describes_it_with_its_parameters(echo_job, alice, api_client_for) -> None:
    c = api_client_for(alice)
    described = {j["name"]: j for j in c.get("/api/job-types/").json()}["echo_job"]
    assert described["requires"] == ["echo.program"]
    assert set(described["params_schema"]["properties"]) == {"message", "repeat", "leave"}
    assert c.get("/api/job-types/echo_job/").json()["title"] == "Echo (a test's plug-in)"
    bad = c.post("/api/sweeps/", {"experiment": {"name": "e"}, "job_type": "echo_job", "name": "s",
                                  "grid": {"repeat": [1, 9]}}, format="json")  # fmt: skip
    assert bad.status_code == 400 and bad.json()["errors"][0]["field"] == "grid.repeat[1]"


def test_the_new_sweep_form_offers_it_and_creates_its_sweep(echo_job, alice, client_for) -> None:
    browser = client_for(alice)
    assert 'value="echo_job"' in browser.get("/sweeps/new/").content.decode()
    form = browser.get("/sweeps/new/?job_type=echo_job").content.decode()
    assert "message: fixed value" in form and "repeat: values to sweep" in form
    r = browser.post("/sweeps/new/", {"job_type": "echo_job", "experiment": "", "new_experiment": "echoes",
                                      "name": "first", "repetitions": "1", "order": "grid", "seed": "",
                                      "grid_repeat": "1, 2", "fixed_message": "hey"})  # fmt: skip
    sweep = Sweep.objects.get(job_type="echo_job")
    assert r.status_code == 302 and sweep.trials.count() == 2
    assert {tuple(t.requires) for t in sweep.trials.all()} == {("echo.program",)}


def test_the_reproduce_page_shows_its_chapter_estimate_and_starts_its_preset(
    echo_job, alice, client_for
) -> None:
    browser = client_for(alice)
    page = browser.get("/reproduce/").content.decode()
    chapter = page.split('id="chapter-echo001"', 1)[1].split("<h2", 1)[0]
    assert "The echo paper: echo against its repeats" in chapter
    assert "Runs <code>echo</code> on the worker." in chapter
    quick = (
        chapter.split('data-preset="echo-fig1"', 1)[1].split('data-size="quick"', 1)[1].split("</tr>", 1)[0]
    )
    assert 'data-field="units">4<' in quick  # repeat 1 and 2, twice
    assert "half a second per trial (0 past trials here)" in quick
    r = browser.post("/reproduce/echo-fig1/start/", {"size": "quick"})
    sweep = Sweep.objects.get(job_type="echo_job")
    assert r.status_code == 302 and sweep.trial_count == 4
    sweep_page = browser.get(r["Location"]).content.decode()
    assert 'data-finding="echo_returns_message"' in sweep_page


def test_its_findings_report_judges_its_results(echo_job) -> None:
    assert findings.JOB_REPORTS["echo_job"] == "echo001"
    rows = [{"params": {"repeat": r}, "summary": {"echoed_ok": 1.0}} for r in (1, 1, 2, 2)]
    [found] = findings.evaluate("echo001", rows)
    assert found.verdict == findings.HOLDS, found.reason


def _qoelab(*args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("QOELAB_")}
    env.update(QOELAB_JOB_MODULES="echo_job", PYTHONPATH=str(PLUGIN_DIR), COLUMNS="100")
    return subprocess.run([str(QOELAB), *args], capture_output=True, text=True, env=env, timeout=120)


def test_the_cli_runs_it_probes_it_and_cleans_up_after_it() -> None:
    if os.geteuid() != 0:
        pytest.skip("qoelab run needs root")
    help_text = _qoelab("--help").stdout
    assert "\n    echo " in help_text  # its subcommand
    assert "\n  qoelab run echo_job --set message=hi --json\n" in help_text  # its example
    assert "qoelab run echo_job --set message=hi --json" in _qoelab("run", "--help").stdout
    assert _qoelab("echo", "hi").stdout == "echo job: hi\n"
    caps = json.loads(_qoelab("capabilities", "--json").stdout)
    assert caps["capabilities"]["echo.program"] is True
    before = set(Path(tempfile.gettempdir()).glob("qoelab-qjr*-echo"))
    out = _qoelab(
        "run", "echo_job", "--set", "message=hey", "--set", "repeat=3", "--set", "leave=true", "--json"
    )
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["summary"] == {"chars": 9.0, "echoed_ok": 1.0}
    [left] = set(Path(tempfile.gettempdir()).glob("qoelab-qjr*-echo")) - before
    prefix = left.name.removeprefix("qoelab-").removesuffix("-echo")
    cleaned = _qoelab("link", "cleanup", "--prefix", prefix)
    assert cleaned.returncode == 0 and f"echo marker {left}" in cleaned.stdout, (
        cleaned.stdout + cleaned.stderr
    )
    assert not left.exists()
    refused = _qoelab("run", "echo_job", "--set", "repeat=9")
    assert refused.returncode == 2 and "repeat" in refused.stderr and "5" in refused.stderr
