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


def test_gold_items_and_playback_screen_raters_and_gold_votes_are_not_scored(tmp_path: Path) -> None:
    """P.910's crowdsourcing rules on a file that carries their columns."""
    lines = ["rater,stimulus,score,gold,played_s,clip_s"]
    good = {"a": 5, "b": 4, "c": 2, "d": 1}
    for rater, bias in (("r1", 0), ("r2", 0), ("r3", 0), ("lazy", 0), ("skipper", 0), ("replayer", 0)):
        for stim, score in good.items():
            played = 4 if rater == "skipper" and stim == "a" else 20 if rater == "replayer" else 10
            lines.append(f"{rater},{stim},{score + bias},,{played},10")
        gold_vote = 1 if rater == "lazy" else 5  # the gold item's expected score is 5
        lines.append(f"{rater},gold-1,{gold_vote},5,10,10")
    path = tmp_path / "crowd.csv"
    path.write_text("\n".join(lines) + "\n")
    out = analyze(str(path), "--model", "mean", "--json")
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert [s["id"] for s in doc["stimuli"]] == ["a", "b", "c", "d"]  # the gold item is not scored
    reasons = {r["id"]: r["reasons"] for r in doc["raters"] if r["screened_out"]}
    assert reasons == {
        "lazy": ["1 gold item(s) answered more than 1 from the expected score"],
        "skipper": ["1 clip(s) not played to the end"],
        "replayer": ["played 180% of the clips' length (> 115%)"],  # (4 x 20 + 10) / 50 s
    }
    assert [r["clause"] for r in doc["screening"]["rules"]][-2:] == [
        "ITU-T P.910 crowdsourcing: gold questions", "ITU-T P.910 crowdsourcing: playback",
    ]  # fmt: skip
    assert "6 gold-item vote(s) used for screening only" in doc["fit"]["notes"]
    # A wider tolerance lets the lazy rater's 1 against 5 pass; a negative one is refused.
    wide = json.loads(analyze(str(path), "--model", "mean", "--json", "--gold-tolerance", "4").stdout)
    assert "lazy" not in {r["id"] for r in wide["raters"] if r["screened_out"]}
    assert "--gold-tolerance: must be 0..100 points" in analyze(str(path), "--gold-tolerance", "-1").stderr
    bad = tmp_path / "bad.csv"
    bad.write_text("rater,stimulus,score,played_s,clip_s\nr1,a,4,-3,10\n")
    assert "bad.csv: line 2, column 'played_s': -3 seconds is below 0" in analyze(str(bad)).stderr
    bad.write_text("rater,stimulus,score,gold\nr1,a,4,9\n")
    assert "line 2, column 'gold'" in analyze(str(bad), "--scale", "1", "5").stderr
