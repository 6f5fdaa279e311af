"""`qoelab report` from result files alone: the committed files, or any the user names (issue 32)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from qoelab.cli import main
from qoelab.errors import QoelabError
from qoelab.findings import REPORTS
from qoelab.findings.committed import (
    COMMITTED,
    REPO,
    Source,
    committed_report,
    decisive_share,
    doc_block,
    evaluate_files,
    read_rows,
    render_all,
)

VERDICTS = {"holds", "does not hold", "inconclusive", "not run"}
KEYS = {"name", "claim", "figure", "paper_value", "lab_value", "scope", "n", "verdict", "reason", "condition"}


def test_every_family_reports_from_the_committed_files_alone(capsys):
    assert main(["report", "all", "--from-committed", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert set(report["families"]) == set(REPORTS) == set(COMMITTED)
    for name, fam in report["families"].items():
        assert all((REPO / f).is_file() for f in fam["files"]), name
        # Every coded check appears, judged or "not run" with a reason.
        assert {c["name"] for c in fam["checks"]} == {c.name for c in REPORTS[name]}, name
        for c in fam["checks"]:
            assert set(c) == KEYS and c["verdict"] in VERDICTS and c["reason"], (name, c)
            assert c["condition"] in ("paper", "scaled", "substituted")
            assert c["paper_value"], (name, c["name"])  # every check states the paper's number
            # A decided check names the lab's deciding numbers; "not run" has none.
            if c["verdict"] in ("holds", "does not hold"):
                assert c["lab_value"], c
            if c["verdict"] == "not run":
                assert c["lab_value"] is None, c
    # ch4's committed runs are the Fig. 4.6, 4.7 and 4.8 presets' (benchmarks/presets/run.py): every
    # figure's checks are judged.
    ch4 = report["families"]["ch4"]
    assert ch4["files"] == [
        f"benchmarks/presets/results/ch4-{name}.jsonl"
        for name in ("fig46-quick", "fig46-full", "fig47-quick", "fig48-quick")
    ]
    verdicts = {c["name"]: c["verdict"] for c in ch4["checks"]}
    assert all(
        verdicts[n] != "not run" for n in ("x2go_best_t_low_rate", "t_rises_with_delay", "best_t_by_loss")
    )
    # The superseded apt-bdl build does not feed the CPU check (its per-bit CPU measured its loop).
    cpu = [c for c in report["families"]["ch2"]["checks"] if c["name"] == "session_cpu_overhead"]
    apt = [c for c in report["families"]["ch2"]["checks"] if c["name"] == "apt_converges"]
    assert cpu and apt and all(c["n"] < a["n"] for c, a in zip(cpu, apt, strict=True))
    shares = decisive_share(report)
    assert shares["ch4"][1] == len(REPORTS["ch4"])


def write(path: Path, rows: list) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def apt_rows(mode: str, ticks: float, n: int = 3) -> list[dict]:
    summary = [{"cpu_ticks_per_bit_client": ticks * (1 + 0.01 * i), "cpu_ticks_per_bit_storage": ticks,
                "goodput_steady_bps": 1.9e8} for i in range(n)]  # fmt: skip
    return [{"params": {"transport": "nbd", "mode": mode, "rate": 2e8, "delay": 0.02}, "summary": s}
            for s in summary]  # fmt: skip


def test_a_file_excluded_from_a_check_does_not_feed_it(tmp_path):
    old = write(tmp_path / "old.jsonl", apt_rows("vanilla", 100e-9) + apt_rows("apt", 150e-9))
    new = write(tmp_path / "new.jsonl", apt_rows("vanilla", 100e-9) + apt_rows("apt", 50e-9))
    both = [Source(str(old)), Source(str(new))]
    pooled = [f for f in evaluate_files("ch2", both) if f.name == "session_cpu_overhead"]
    assert pooled[0].trials == 12
    kept = [Source(str(old), not_for={"session_cpu_overhead": "superseded build"}), Source(str(new))]
    alone = [f for f in evaluate_files("ch2", kept) if f.name == "session_cpu_overhead"]
    # APT below vanilla per bit: a saving the per-process count cannot turn into a refutation.
    assert alone[0].trials == 6 and alone[0].verdict == "inconclusive", alone[0].reason
    assert "APT is lower" in alone[0].reason


def test_rows_are_read_strictly_and_failed_runs_left_out(tmp_path):
    good = {"params": {"mode": "apt"}, "summary": {"x": 1.0}}
    path = write(tmp_path / "r.jsonl", [good, {"params": {}, "error": "boom"}, {"params": {"a": 1}}])
    assert read_rows(path) == [good]
    (tmp_path / "bad.jsonl").write_text(json.dumps(good) + "\n{oops\n")
    with pytest.raises(QoelabError, match=r"bad.jsonl:2: not a JSON line"):
        read_rows(tmp_path / "bad.jsonl")
    write(tmp_path / "np.jsonl", [{"summary": {"x": 1.0}}])
    with pytest.raises(QoelabError, match=r'np.jsonl:1: a row needs its trial\'s "params"'):
        read_rows(tmp_path / "np.jsonl")


def test_report_from_named_files_and_the_argument_rules(tmp_path, capsys):
    f = write(tmp_path / "apt.jsonl", apt_rows("vanilla", 100e-9) + apt_rows("apt", 150e-9))
    assert main(["report", "ch2", "--from", str(f)]) == 0
    out = capsys.readouterr().out
    assert f"Files: `{f}`" in out
    assert "| `session_cpu_overhead` | CPU per bit over one session: NBD +20-30 %" in out
    # The lab column shows the deciding comparison, not the "all N agree" summary.
    assert "| — | 6 | holds | vanilla is lower" in out, out
    for argv, message in (
        (["report", "ch2", "3", "--from", str(f)], "exactly one"),
        (["report", "ch2"], "exactly one"),
        (["report", "all", "--from", str(f)], "REPORT all needs --from-committed"),
        (["report", "ch2", "--from", str(tmp_path / "none.jsonl")], "cannot read it"),
    ):
        assert main(argv) == 2, argv
        assert message in capsys.readouterr().err, argv


def test_the_docs_verdict_table_is_what_the_committed_files_give():
    # A check, a threshold or a committed file changed without regenerating the table fails here:
    #   .venv/bin/qoelab report all --from-committed --write-doc docs/findings.md
    expected = render_all(committed_report()).strip("\n")
    assert doc_block(REPO / "docs" / "findings.md") == expected


def test_the_lab_value_is_the_comparison_that_decided():
    from qoelab.findings.base import Comparison, deciding

    ok, bad, open_ = (Comparison("supports", "a 1"), Comparison("contradicts", "b 2"),
                      Comparison("unclear", "c 3"))  # fmt: skip
    assert deciding([ok, open_, bad]) == "b 2"  # one counter-example decides
    assert deciding([ok, open_]) == "c 3" and deciding([ok]) == "a 1"
    assert deciding([ok], missing=["no VNC trials"]) is None and deciding([]) is None
