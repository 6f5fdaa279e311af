"""``qoelab ratings analyze`` as a researcher runs it: the console script, JSON, Markdown, errors."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

DATA = Path(__file__).resolve().parents[2] / "data" / "ratings"
QOELAB = Path(sys.executable).with_name("qoelab")


def analyze(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(QOELAB), "ratings", "analyze", *args], capture_output=True, text=True, timeout=120, check=False
    )


def test_json_of_the_p910_sample_in_the_issue_shape() -> None:
    out = analyze(str(DATA / "p910_appvi_sample.csv"), "--format", "matrix", "--model", "p910", "--json")
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert report["model"] == "p910"
    assert len(report["stimuli"]) == 79 and len(report["raters"]) == 26
    first = report["stimuli"][0]
    assert set(first) == {"id", "mos", "ci_low", "ci_high", "sos", "n"}
    assert first["id"] == "0" and abs(first["mos"] - 4.926232195563247) < 1e-4
    assert first["ci_low"] < first["mos"] < first["ci_high"]
    rater = report["raters"][0]
    assert {"id", "bias", "inconsistency", "screened_out", "reasons"} <= set(rater)
    assert abs(rater["bias"] - -0.189852445792812) < 1e-4
    # The first five raters' votes are the corrupted ones (r near 0); rater 6 is an original rater
    # just below the bound (r = 0.748).
    flagged = {
        r["id"]: report["screening"]["correlation"][r["id"]] for r in report["raters"] if r["screened_out"]
    }
    assert set(flagged) == {"0", "1", "2", "3", "4", "6"}
    assert max(flagged[i] for i in "01234") < 0.2 and 0.74 < flagged["6"] < 0.75
    assert set(report["alpha"]) == {"interval", "ordinal"} and 0 < report["alpha"]["interval"]["value"] < 1


def test_markdown_names_the_quantity_and_the_conditions() -> None:
    out = analyze(str(DATA / "vqeg_hd3.csv"), "--model", "mean", "--scale", "1", "5")
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("# ACR MOS by the plain mean of the votes\n")
    assert "| vqeghd3_src01_hrc16_cut (vqeghd3_src01) | 24 |" in out.stdout
    assert "Krippendorff's alpha (interval): 0." in out.stdout


def test_a_bad_file_is_one_sentence_and_exit_2(tmp_path: Path) -> None:
    bad = tmp_path / "votes.csv"
    bad.write_text("rater,stimulus,score\na,x,4\nb,x,9\n")
    out = analyze(str(bad), "--scale", "1", "5")
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert out.stderr.strip() == (
        "qoelab: error: votes.csv: line 3, column 'score': score 9 is outside the scale 1..5"
    )
    out = analyze(str(tmp_path / "missing.csv"))
    assert out.returncode == 2 and out.stderr.startswith("qoelab: error: ") and "cannot read it" in out.stderr
