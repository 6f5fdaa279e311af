"""Chapter 4's subjective half as checks over DCR ratings (qoelab.findings.ch4_dcr).

The rows are the thesis' own Table 4.2 (seed-rd-qoe.md, §4.5), each cell's mean made of five
evaluators' whole-grade answers, so each check is seen deciding on the published numbers."""

from __future__ import annotations

import math
from typing import Any

from qoelab import findings

TABLE42 = {  # aspect -> delay (ms) -> (VNC, SPICE, X2Go)
    "screen_response": {10: (2.2, 3, 4), 100: (2.4, 3, 2.4), 200: (2.2, 2.6, 1.8)},
    "mouse_response": {10: (3.6, 2, 5), 100: (1.8, 1.2, 4.6), 200: (2.2, 1.2, 4.8)},
    "image_clarity": {10: (5, 5, 5), 100: (4.8, 4.8, 4.4), 200: (5, 4.6, 4.6)},
}
PROTOCOLS = ("vnc", "spice", "x2go")


def five_answers(mean: float) -> list[int]:
    """Five whole grades with this mean (4.4 -> 5, 5, 4, 4, 4)."""
    base = math.floor(mean)
    up = round((mean - base) * 5)
    return [base + 1] * up + [base] * (5 - up)


def table42_rows(table: dict = TABLE42, rate: float = 1e6) -> list[dict[str, Any]]:
    rows = []
    for i, protocol in enumerate(PROTOCOLS):
        for delay_ms in (10, 100, 200):
            answers = {aspect: five_answers(cells[delay_ms][i]) for aspect, cells in table.items()}
            for evaluator in range(5):
                rows.append({"params": {"protocol": protocol, "rate": rate, "delay": delay_ms / 1000},
                             "summary": {a: float(v[evaluator]) for a, v in answers.items()}})  # fmt: skip
    return rows


def by_name(checks: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for c in checks:
        out.setdefault(c["name"], c)
    return out


def test_the_rd_qoe_job_type_declares_the_ratings_report_beside_its_sweep_report() -> None:
    assert findings.RATING_REPORTS["rd_qoe"] == "ch4-dcr"
    assert findings.JOB_REPORTS["rd_qoe"] == "ch4"  # the sweep page's report is unchanged


def test_without_ratings_every_check_says_not_run_needs_ratings() -> None:
    checks = findings.rating_findings("ch4-dcr", [])
    assert [c["name"] for c in checks] == [c.name for c in findings.REPORTS["ch4-dcr"]]
    assert {c["verdict"] for c in checks} == {"not run"}
    assert all(c["reason"].startswith("needs ratings") and c["paper_value"] for c in checks)


def test_the_thesis_own_table_4_2_decides_its_claims_as_five_raters_can() -> None:
    got = by_name(findings.rating_findings("ch4-dcr", table42_rows()))
    assert got["dcr_mouse_x2go_best"]["verdict"] == "holds", got["dcr_mouse_x2go_best"]
    assert got["dcr_x2go_screen_drops_with_delay"]["verdict"] == "holds"
    assert "X2Go at delay 200 ms is lower" in got["dcr_x2go_screen_drops_with_delay"]["reason"]
    # 4.6 from five raters (5, 5, 5, 4, 4) has a 95 % interval of 3.92-5.28: it cannot show >= 4;
    # neither can X2Go's 4.4 and 4.6 at 100 and 200 ms.
    clarity = got["dcr_image_clarity_high"]
    assert clarity["verdict"] == "inconclusive", clarity
    assert clarity["reason"] == (
        "the 95 % CI straddles 4: SPICE 4.6 (CI 3.92–5.28) at delay 200 ms (and 2 more undecided comparisons)"
    )
    # Table 4.2 is one rate: the throughput claim of Fig. 4.3 cannot run on it, and says why.
    fig43 = got["dcr_spice_better_above_3mbit"]
    assert fig43["verdict"] == "not run" and "rate is not swept" in fig43["reason"]


def test_a_campaign_whose_ratings_contradict_the_thesis_gets_does_not_hold() -> None:
    flipped = {a: {d: tuple(reversed(v)) for d, v in cells.items()} for a, cells in TABLE42.items()}
    got = by_name(findings.rating_findings("ch4-dcr", table42_rows(flipped)))
    mouse = got["dcr_mouse_x2go_best"]
    assert mouse["verdict"] == "does not hold" and "VNC is lower" not in mouse["reason"], mouse


def test_fig_4_3_spice_above_the_knee_holds_and_fails_on_the_numbers() -> None:
    def rows(low: list[int], high: list[int]) -> list[dict[str, Any]]:
        at = [(rate, s) for rate, scores in ((1e6, low), (5e6, high)) for s in scores]
        return [{"params": {"protocol": "spice", "rate": r, "delay": 0.01}, "summary": {"screen_response": s}}
                for r, s in at]  # fmt: skip

    better = by_name(findings.rating_findings("ch4-dcr", rows([2, 2, 2, 3, 2], [4, 5, 4, 4, 5])))
    assert better["dcr_spice_better_above_3mbit"]["verdict"] == "holds"
    worse = by_name(findings.rating_findings("ch4-dcr", rows([4, 5, 4, 4, 5], [2, 2, 2, 3, 2])))
    assert worse["dcr_spice_better_above_3mbit"]["verdict"] == "does not hold"


def test_the_cli_reads_rating_rows_from_a_file_and_refuses_sweeps(tmp_path) -> None:
    import json
    import subprocess
    import sys

    qoelab = [sys.executable, "-m", "qoelab.cli"]
    wrong = subprocess.run([*qoelab, "report", "ch4-dcr", "3"], capture_output=True, text=True, timeout=60)
    assert wrong.returncode != 0 and "reads a rating campaign's ratings, not sweeps" in wrong.stderr
    rows = tmp_path / "table42.jsonl"
    rows.write_text("".join(json.dumps(r) + "\n" for r in table42_rows()))
    out = subprocess.run([*qoelab, "report", "ch4-dcr", "--from", str(rows), "--json"],
                         capture_output=True, text=True, timeout=60, check=True)  # fmt: skip
    checks = by_name(json.loads(out.stdout)["families"]["ch4-dcr"]["checks"])
    assert checks["dcr_mouse_x2go_best"]["verdict"] == "holds" and checks["dcr_mouse_x2go_best"]["n"] == 45
