"""``qoelab report ch4`` against the real backend (live_server): verdicts over the union of sweeps."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

# Mean T (ms) per (protocol, rate): X2Go lowest at 1 Mbit/s, SPICE lowest at 100 Mbit/s.
T_MS = {
    ("x2go", "1mbit"): 100.0,
    ("spice", "1mbit"): 500.0,
    ("x2go", "100mbit"): 60.0,
    ("spice", "100mbit"): 20.0,
}


def finished_sweep(user: Any, rate: str, repetitions: int = 2) -> Any:
    """An rd_qoe sweep over both protocols at one rate, every trial succeeded with its summaries."""
    from django.utils import timezone

    from experiments.services import create_sweep
    from results.models import SummaryValue

    sweep = create_sweep(
        {
            "experiment": {"name": "ch4"},
            "job_type": "rd_qoe",
            "grid": {"protocol": ["x2go", "spice"]},
            "fixed": {"rate": rate, "delay": "10ms"},
            "repetitions": repetitions,
        },
        user,
    )
    now = timezone.now()
    for t in sweep.trials.all():
        t.status, t.attempts = "succeeded", 1
        t.started_at, t.finished_at = now - timedelta(seconds=30), now
        t.save()
        T = T_MS[(t.params["protocol"], rate)] + t.repetition
        SummaryValue.objects.create(trial=t, name="T_ms", value=T)
    return sweep


def test_report_ch4_prints_the_findings_over_the_union_of_two_sweeps(run: Any, alice: Any) -> None:
    # Neither sweep sweeps the rate; together they do, so the rate findings apply to the union.
    low, high = finished_sweep(alice, "1mbit"), finished_sweep(alice, "100mbit")
    out = run("report", "ch4", str(low.pk), str(high.pk))
    assert out.returncode == 0, out.stderr
    text = out.stdout
    assert text.startswith(
        f"## Thesis chapter 4 (§4.6): remote-desktop protocols compared: sweeps {low.pk}, {high.pk}"
    )
    assert "Over 8 succeeded trials." in text
    assert "### X2Go has the lowest T at a few Mbit/s or less" in text
    assert "### SPICE has the lowest T above 10 Mbit/s" in text
    assert text.count("**✅ holds**") == 2
    assert "| rate 1 Mbit/s | X2Go | T (ms) | 2 | 100 |" in text

    as_json = run("report", "ch4", str(low.pk), str(high.pk), "--json")
    assert as_json.returncode == 0, as_json.stderr
    verdicts = {f["name"]: f["verdict"] for f in json.loads(as_json.stdout)}
    assert verdicts["x2go_best_t_low_rate"] == verdicts["spice_best_t_high_rate"] == "holds"


def test_report_of_one_sweep_at_one_rate_says_no_check_applies(run: Any, alice: Any) -> None:
    sweep = finished_sweep(alice, "1mbit")
    out = run("report", "ch4", str(sweep.pk))
    assert out.returncode == 0, out.stderr
    assert "No check applies" in out.stdout


def test_report_refuses_a_sweep_of_another_job_type_in_one_sentence(run: Any, alice: Any) -> None:
    from experiments.services import create_sweep

    other = create_sweep(
        {"experiment": {"name": "links"}, "job_type": "link_check", "grid": {"rate": ["1mbit", "2mbit"]}},
        alice,
    )
    out = run("report", "ch4", str(other.pk))
    assert out.returncode == 2
    assert (
        out.stderr.strip()
        == f"qoelab: error: sweep {other.pk} is a link_check sweep; report ch4 reads rd_qoe sweeps"
    )


def test_exported_sweeps_give_the_same_verdicts_from_the_file(run: Any, alice: Any, tmp_path: Any) -> None:
    """`qoelab sweep export` writes what `qoelab report --from` reads: issue 32's results as data."""
    low, high = finished_sweep(alice, "1mbit"), finished_sweep(alice, "100mbit")
    failed = low.trials.order_by("index").first()
    failed.status, failed.error = "failed", "the viewer never showed the page"
    failed.save()
    out_file = tmp_path / "ch4.jsonl"
    out = run("sweep", "export", str(low.pk), str(high.pk), "--out", str(out_file))
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == f"{out_file}: 8 trials (1 failed) from sweeps {low.pk}, {high.pk}"
    rows = [json.loads(line) for line in out_file.read_text().splitlines()]
    bad = [r for r in rows if "error" in r]
    assert [r["error"] for r in bad] == ["the viewer never showed the page"] and bad[0]["trial"] == failed.pk
    good = next(r for r in rows if "error" not in r)
    assert good["params"]["rate"] in (1e6, 1e8) and set(good["summary"]) == {"T_ms"}
    assert {"cpu", "bogomips", "name", "kernel"} <= set(good["host"])

    from_db = json.loads(run("report", "ch4", str(low.pk), str(high.pk), "--json").stdout)
    from_file = run("report", "ch4", "--from", str(out_file), "--json")
    assert from_file.returncode == 0, from_file.stderr
    checks = json.loads(from_file.stdout)["families"]["ch4"]["checks"]
    judged = {c["name"]: c["verdict"] for c in checks if c["verdict"] != "not run"}
    assert judged == {f["name"]: f["verdict"] for f in from_db} and judged, (judged, from_db)


def test_export_refuses_an_unfinished_sweep_unless_partial(run: Any, alice: Any, tmp_path: Any) -> None:
    sweep = finished_sweep(alice, "1mbit")
    sweep.trials.filter(pk=sweep.trials.order_by("index").first().pk).update(status="pending")
    out = run("sweep", "export", str(sweep.pk), "--out", str(tmp_path / "x.jsonl"))
    assert out.returncode == 2 and not (tmp_path / "x.jsonl").exists()
    assert f"sweep {sweep.pk} has not finished (1 trials pending, queued or running)" in out.stderr
    out = run("sweep", "export", str(sweep.pk), "--out", str(tmp_path / "x.jsonl"), "--partial")
    assert out.returncode == 0, out.stderr
    assert len((tmp_path / "x.jsonl").read_text().splitlines()) == 3
