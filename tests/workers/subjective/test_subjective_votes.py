"""Bad rating sets: one sentence naming the line and column, or a documented treatment; never NaN out."""

from __future__ import annotations

import json
import math

import pytest

from qoelab.subjective import models, report, screening, votes


def bad_long(text: str, **kw: object) -> str:
    with pytest.raises(votes.VotesError) as err:
        votes.parse_long(text, name="v.csv", **kw)
    return str(err.value)


def test_duplicate_vote_names_both_lines() -> None:
    msg = bad_long("rater,stimulus,score\na,x,4\nb,x,3\na,x,5\n")
    assert msg.startswith("v.csv: line 4 is a second vote of rater 'a' on stimulus 'x'") and "line 2" in msg
    assert "repeat" in msg
    # Marked as a repeat it is a vote of its own.
    v = votes.parse_long("rater,stimulus,score,repeat\na,x,4,0\nb,x,3,0\na,x,5,1\n")
    assert v.n == 3


def test_score_outside_the_scale_names_line_column_and_bound() -> None:
    assert bad_long("rater,stimulus,score\na,x,4\na,y,7\n", scale=(1, 5)) == (
        "v.csv: line 3, column 'score': score 7 is outside the scale 1..5"
    )


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", "v.csv: empty file"),
        ("rater,score\na,1\n", "v.csv: line 1 has no column 'stimulus'"),
        ("rater,stimulus,score,mood\na,x,1,ok\n", "v.csv: line 1: unknown column 'mood'"),
        ("rater,stimulus,score\na,x,good\n", "v.csv: line 2, column 'score': 'good' is not a number"),
        (
            "rater,stimulus,score\na,x,nan\n",
            "v.csv: line 2, column 'score': a missing vote is a missing line",
        ),
        ("rater,stimulus,score\na,x\n", "v.csv: line 2 has 2 columns, the header has 3"),
        ("rater,stimulus,score\n,x,3\n", "v.csv: line 2, column 'rater' is empty"),
        ("rater,stimulus,score\n", "v.csv: no votes after the header"),
        (
            "rater,stimulus,score,condition\na,x,3,c1\nb,x,4,c2\n",
            "v.csv: line 3, column 'condition': stimulus 'x'",
        ),
        (
            "rater,stimulus,score,reference\na,x,3,r\n",
            "v.csv: line 2, column 'reference': 'r' is not a stimulus",
        ),
    ],
)
def test_bad_long_files(text: str, expected: str) -> None:
    assert bad_long(text).startswith(expected)


def test_bad_matrix_files() -> None:
    with pytest.raises(votes.VotesError, match=r"^m.csv: line 2 has 2 columns, line 1 has 3$"):
        votes.parse_matrix("1,2,3\n4,5\n", name="m.csv")
    with pytest.raises(votes.VotesError, match=r"^m.csv: line 1, column 2: 'x' is not a number$"):
        votes.parse_matrix("1,x,3\n", name="m.csv")
    with pytest.raises(
        votes.VotesError, match=r"^m.csv: line 2, column 1: score 0 is outside the scale 1..5$"
    ):
        votes.parse_matrix("1,2\n0,3\n", name="m.csv", scale=(1, 5))


def test_all_equal_votes_the_mean_applies_and_the_subject_model_says_why() -> None:
    v = votes.parse_matrix("3,3,3\n3,3,3\n3,3,3\n")
    with pytest.raises(votes.VotesError, match=r"^all 9 votes are 3: no spread"):
        models.fit(v, "p910")
    out = report.analyze(v, "mean")
    assert [s["mos"] for s in out["stimuli"]] == [3.0, 3.0, 3.0]
    assert (
        out["alpha"]["interval"]["value"] is None
        and "all votes are identical" in out["alpha"]["interval"]["reason"]
    )
    assert out["fit"]["nbic"] is None and "unbounded" in out["fit"]["notes"][0]
    assert "NaN" not in json.dumps(out)


def test_unrated_stimulus_and_single_vote_rater_are_listed_without_estimates() -> None:
    # Stimulus 1 has no vote; rater 3 voted once.
    v = votes.parse_matrix("4,5,3,nan\nnan,nan,nan,nan\n2,1,2,nan\n5,4,5,2\n1,2,1,nan\n")
    for model in models.MODELS:
        out = report.analyze(v, model)
        text = json.dumps(out, allow_nan=False)  # raises on NaN or inf
        assert "NaN" not in text
        s1 = out["stimuli"][1]
        assert (s1["n"], s1["mos"], s1["ci_low"]) == (0, None, None)
        assert any("without any vote" in n for n in out["fit"]["notes"])
    fit = models.fit(v, "p913")
    assert fit.raters[3].bias is None and "single vote" in fit.raters[3].note
    assert fit.stimuli[3].n == 3  # the single vote is not in the model's count
    assert math.isfinite(fit.nbic)


def test_screening_flags_the_reversed_and_the_flat_rater() -> None:
    rows = ["rater,stimulus,score"]
    base = [1, 2, 3, 4, 5, 2, 4]
    for rater, scores in {
        "a": base,
        "b": [min(5, s + 1) for s in base],
        "c": [max(1, s - 1) for s in base],
        "reversed": [6 - s for s in base],
        "flat": [3, 3, 3, 3, 3, 3, 4],
    }.items():
        rows += [f"{rater},st{j},{s}" for j, s in enumerate(scores)]
    v = votes.parse_long("\n".join(rows))
    out = report.analyze(v, "p910")
    flagged = {r["id"]: r["reasons"] for r in out["raters"] if r["screened_out"]}
    assert set(flagged) == {"reversed", "flat"}
    assert flagged["reversed"][0].startswith("correlation with the other raters r = -")
    assert any(reason.startswith("vote variance 0.143 < 0.15") for reason in flagged["flat"])
    kept = report.analyze(v, "p910", exclude_screened=True)
    assert kept["screening"]["excluded_from_fit"] is True
    assert kept["fit"]["votes"] == 3 * 7


def test_acr_with_hidden_reference_scores_each_vote_against_the_same_raters_reference() -> None:
    v = votes.parse_long(
        "rater,stimulus,score,reference\n"
        "a,ref,5,\nb,ref,4,\nc,ref,3,\n"
        "a,t1,4,ref\nb,t1,4,ref\nc,t1,1,ref\n"
        "a,t2,2,ref\nb,t2,3,ref\n"
        "d,t2,5,ref\n"  # d never rated the reference: left out, and said
    )
    out = report.analyze(v, "mean", method="acr-hr")
    assert out["quantity"] == "ACR-HR DMOS by the plain mean of the votes" and out["method"] == "acr-hr"
    by_id = {s["id"]: s for s in out["stimuli"]}
    assert set(by_id) == {"t1", "t2"}  # the reference itself is not scored
    assert by_id["t1"]["mos"] == pytest.approx(((4 - 5 + 5) + (4 - 4 + 5) + (1 - 3 + 5)) / 3)
    assert by_id["t2"]["mos"] == pytest.approx(((2 - 5 + 5) + (3 - 4 + 5)) / 2) and by_id["t2"]["n"] == 2
    assert out["fit"]["notes"][0] == "1 test vote(s) left out: the rater did not rate the hidden reference"
    with pytest.raises(votes.VotesError, match="needs a 'reference' column"):
        report.analyze(votes.parse_long("rater,stimulus,score\na,x,3\n"), "mean", method="acr-hr")
    with pytest.raises(votes.VotesError, match="method 'abx' is not one of: acr, acr-hr, dcr"):
        report.analyze(v, "mean", method="abx")


def test_a_campaigns_votes_become_acr_hr_differential_scores_keyed_as_given() -> None:
    # A campaign's {rater: {(condition, aspect): vote}}: the same rule as a file's reference column.
    hr = {("c1", "clarity"): ("ref", "clarity"), ("c2", "clarity"): ("ref", "clarity")}
    matrix = {
        7: {("ref", "clarity"): 4, ("c1", "clarity"): 5, ("c2", "clarity"): 1},
        8: {("ref", "clarity"): 5, ("c1", "clarity"): 3},
        9: {("c1", "clarity"): 2},  # never rated the reference: left out, and said
    }
    scored, notes = votes.differential(matrix, hr, top=5)
    assert scored == {7: {("c1", "clarity"): 6.0, ("c2", "clarity"): 2.0}, 8: {("c1", "clarity"): 3.0}}
    assert notes == ["1 test vote(s) left out: the rater did not rate the hidden reference"]
    # Nobody rated the reference: no score, one sentence, no exception.
    assert votes.differential({9: {("c1", "clarity"): 2}}, hr) == (
        {}, ["ACR-HR: no test vote has its rater's vote on the hidden reference"]
    )  # fmt: skip


def test_single_outlier_votes_are_dropped_only_when_asked() -> None:
    # 24 raters vote 4 or 5; one votes 1: z = 3.6 >= 3.29 (z of one vote among n is below (n-1)/sqrt(n)).
    rows = ["rater,stimulus,score"] + [f"r{i},x,{4 if i % 2 else 5}" for i in range(24)] + ["odd,x,1"]
    rows += [f"r{i},y,{2 if i % 3 else 3}" for i in range(24)] + ["odd,y,2"]
    v = votes.parse_long("\n".join(rows))
    assert [v.raters[r] for r in v.rater[screening.outlier_votes(v)]] == ["odd"]
    kept = report.analyze(v, "mean", drop_outlier_votes=True)
    assert kept["stimuli"][0]["n"] == 24 and kept["stimuli"][0]["mos"] == pytest.approx(4.5)
    assert "1 vote(s) at |z| >= 3.29 within their stimulus left out" in kept["fit"]["notes"]
    assert report.analyze(v, "mean")["stimuli"][0]["n"] == 25
    # Fewer than three votes or no spread: nothing to call an outlier.
    assert not screening.outlier_votes(votes.parse_long("rater,stimulus,score\na,x,1\nb,x,5\n")).any()
