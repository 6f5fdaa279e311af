"""benchmarks/presets/run.py: a preset's trials run here, in parts, into a result file the findings read.

The trials are real (link_check: namespaces, the emulated link, iperf3); the preset is a small one
made for the test, since the papers' presets take minutes per trial.
"""

from __future__ import annotations

import importlib.util
import json
import pathlib
import sys

import pytest

from qoelab import presets
from qoelab.findings.committed import read_rows

_RUN = pathlib.Path(__file__).resolve().parents[2] / "benchmarks" / "presets" / "run.py"
_spec = importlib.util.spec_from_file_location("preset_runner", _RUN)
runner = sys.modules.setdefault("preset_runner", importlib.util.module_from_spec(_spec))
_spec.loader.exec_module(runner)

SMALL = presets.Preset(
    key="test-links", report="ch4", figure="—", title="two links", description="two short link checks",
    kind="sweep", grids={"quick": {"delay": ["5ms", "10ms"]}, "full": {"delay": ["5ms"]}},
    fixed={"rate": "10mbit", "duration": "1s"}, repetitions={"quick": 1, "full": 1}, job_type="link_check",
)  # fmt: skip


@pytest.mark.netns
def test_a_preset_runs_in_parts_and_resumes_where_it_stopped(tmp_path, monkeypatch, capsys):
    from qoelab.emulation.system import has_net_admin

    if not has_net_admin():
        pytest.skip("needs root or CAP_NET_ADMIN to create network namespaces")
    monkeypatch.setattr(presets, "get", lambda key: SMALL)
    out = tmp_path / "links.jsonl"
    assert runner.main(["--preset", "test-links", "--out", str(out), "--limit", "1"]) == 0
    first = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(first) == 1 and "error" not in first[0], first
    row = first[0]
    assert row["params"]["rate"] == 10e6 and row["summary"]["tcp_down_bps"] > 0
    assert row["host"]["cpu"] and row["host"]["code_revision"] and row["rep"] == 0
    assert row["link"]["tcp"]["cc"], row["link"]  # the TCP settings read back, part of the provenance
    # A second start without --resume would overwrite a part: refused.
    with pytest.raises(SystemExit):
        runner.main(["--preset", "test-links", "--out", str(out)])
    assert "exists: pass --resume" in capsys.readouterr().err
    assert runner.main(["--preset", "test-links", "--out", str(out), "--resume"]) == 0
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert sorted(r["point"]["delay"] for r in rows) == ["10ms", "5ms"]
    assert runner.main(["--preset", "test-links", "--out", str(out), "--resume"]) == 0  # nothing left
    assert len(read_rows(out)) == 2  # the findings read the file as they read an exported sweep
