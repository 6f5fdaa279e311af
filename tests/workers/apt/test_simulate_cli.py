"""``qoelab apt simulate``: the probe sequence as JSON, errors as one sentence with status 2."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from qoelab.cli import main

CURVE = Path(__file__).resolve().parents[3] / "examples" / "apt_curve_fig29.csv"


def test_json_gives_the_probes_of_fig_2_9(capsys):
    assert main(["apt", "simulate", "--goodput", str(CURVE), "--n0", "4", "--alpha", "2", "--n-max", "128",
                 "--json"]) == 0  # fmt: skip
    out = json.loads(capsys.readouterr().out)
    assert out["probes"] == [4, 8, 16, 32, 64, 44, 22, 37, 40, 34, 35, 33]
    assert (out["n_star"], out["steps"], out["saturated"]) == (33, 12, False)
    assert [s["n"] for s in out["steps_detail"]] == out["probes"]


def test_the_table_ends_with_the_outcome_and_stdin_works():
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "qoelab.cli",
            "apt",
            "simulate",
            "--goodput",
            "-",
            "--gss",
            "textbook",
            "--n-max",
            "128",
        ],  # fmt: skip
        input=CURVE.read_text(),
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    assert run.stdout.splitlines()[-1].startswith("N* = 33 after ")
    assert " 26 " in run.stdout  # the textbook left case probes 26 where the paper's probes 22


def test_bad_input_is_one_sentence_naming_the_field(capsys, tmp_path):
    assert main(["apt", "simulate", "--goodput", str(CURVE), "--n0", "200", "--n-max", "128"]) == 2
    assert "n0: must be an integer from 1 to n_max (128), got 200" in capsys.readouterr().err
    short = tmp_path / "short.csv"
    short.write_text("1,1e8\n2,2e8\n4,3e8\n")
    assert main(["apt", "simulate", "--goodput", str(short), "--n0", "1"]) == 2
    assert "no goodput for N = 8 (it gives N = 1, 2, 4)" in capsys.readouterr().err
    assert main(["apt", "simulate", "--goodput", str(tmp_path / "missing.csv")]) == 2
    assert "no such file" in capsys.readouterr().err
