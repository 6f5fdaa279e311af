"""The VM reliability benchmark's bookkeeping: targets judged per row, resumed runs kept apart by part.

The trials themselves are real VM trials (benchmarks/vm_reliability/run.py, hours); these rows are
hand-built so each rule is seen deciding.
"""

from __future__ import annotations

import importlib.util
import json
import pathlib
import sys

import pytest

_RUN = pathlib.Path(__file__).resolve().parents[3] / "benchmarks" / "vm_reliability" / "run.py"
_spec = importlib.util.spec_from_file_location("vm_reliability_benchmark", _RUN)
rel = sys.modules.setdefault("vm_reliability_benchmark", importlib.util.module_from_spec(_spec))
_spec.loader.exec_module(rel)

FACTS = {"cpu": "Xeon", "cores": 2, "kernel": "6.1", "qemu": "QEMU 7.2", "commit": "abc1234",
         "image": {"browser": "chromium 156"}, "cpu_quota": None, "started": "today"}  # fmt: skip


def trial(protocol="vnc", ok=True, restarts=0, first=8.0, part=0, start="snapshot"):
    row = {"protocol": protocol, "start_asked": start, "ok": ok, "part": part}
    if ok:
        row |= {"to_first_page_s": first, "browser_restarts": {"x2go": restarts} if restarts else {}}
    else:
        row["error"] = "VmError: the guest's X server never started"
    return row


def test_a_row_short_of_thirty_trials_is_not_judged():
    assert rel.verdict(29, 29, 29, 8.0, "snapshot") == "not judged (29 of 30 trials)"


def test_targets_met_and_each_miss_named():
    assert rel.verdict(30, 29, 27, 15.0, "snapshot") == "met"
    missed = rel.verdict(30, 28, 26, 15.1, "snapshot")
    assert missed == "missed: succeeded < 29/30, no restart < 27/30, median first page > 15 s"
    # The first-page target is the snapshot's; a cold boot's minute to the page is not a miss.
    assert rel.verdict(30, 30, 30, 60.0, "cold") == "met"
    assert rel.verdict(30, 30, 30, None, "snapshot").endswith("median first page > 15 s")


def test_report_counts_restarts_and_failures_per_row():
    doc = {"host": FACTS, "trials": [trial() for _ in range(28)] + [trial(restarts=1), trial(ok=False)]}
    text = rel.report(doc)
    assert "| snapshot | vnc | 30 | 29 | 28 | 8.0 / 8.0 s | met |" in text
    assert "- snapshot vnc: VmError: the guest's X server never started" in text


def test_report_names_each_trial_with_an_update_that_timed_out():
    late = trial(protocol="spice", start="cold") | {"updates": 2, "timed_out": 1, "repetition": 18}
    doc = {"host": FACTS, "trials": [trial(start="cold") | {"updates": 2, "timed_out": 0}, late]}
    text = rel.report(doc)
    assert "| cold | spice | 1 | 1 | 1 | 8.0 / 8.0 s | not judged (1 of 30 trials) |" in text
    assert text.endswith(
        "Updates that timed out (the trial succeeded; those updates have no T):\n"
        "- cold spice, part 1, repetition 18: 1 of 2 updates"
    )
    assert "Updates that timed out" not in rel.report({"host": FACTS, "trials": [trial()]})


def test_resume_adds_a_part_and_refuses_to_overwrite_or_mix_conditions(tmp_path):
    out = tmp_path / "run.json"
    doc = rel.start_or_resume(out, FACTS, resume=False)
    assert doc["parts"] == [FACTS] and doc["trials"] == []
    doc["trials"].append(trial())
    out.write_text(json.dumps(doc))
    with pytest.raises(ValueError, match="exists; pass --resume"):
        rel.start_or_resume(out, FACTS, resume=False)
    with pytest.raises(ValueError, match="one file holds one condition"):
        rel.start_or_resume(out, FACTS | {"cpu_quota": 0.6}, resume=True)
    later = rel.start_or_resume(out, FACTS | {"commit": "def5678"}, resume=True)
    assert [p["commit"] for p in later["parts"]] == ["abc1234", "def5678"]
    later["trials"].append(trial(part=1))
    text = rel.report(later)
    assert "Part 1 (1 trials)" in text and "Part 2 (1 trials)" in text and "commit def5678" in text


def test_parts_on_two_machines_get_the_first_page_per_machine_and_what_ran_beside():
    doc = {"parts": [FACTS, FACTS | {"cpu": "EPYC", "beside": "unit tests"}],
           "trials": [trial(first=60.0, start="cold"), trial(first=90.0, part=1, start="cold")]}  # fmt: skip
    text = rel.report(doc)
    assert "Beside it: unit tests." in text
    assert "| cold | vnc | Xeon | 1 | 1 | 60.0 / 60.0 s |" in text
    assert "| cold | vnc | EPYC | 1 | 1 | 90.0 / 90.0 s |" in text
    assert "By machine" not in rel.report({"parts": [FACTS], "trials": [trial()]})


def test_two_machines_of_one_model_are_told_apart_by_their_clock():
    fast, slow = (
        FACTS | {"cpu": "AMD EPYC", "bogomips": "4900.00"},
        FACTS | {"cpu": "AMD EPYC", "bogomips": "3992.49"},
    )
    doc = {"parts": [fast, slow], "trials": [trial(first=15.0), trial(first=69.0, part=1)]}
    text = rel.report(doc)
    assert "Part 2 (1 trials): AMD EPYC @ 2.00 GHz" in text
    assert "| snapshot | vnc | AMD EPYC @ 2.45 GHz | 1 | 1 | 15.0 / 15.0 s |" in text
    assert "| snapshot | vnc | AMD EPYC @ 2.00 GHz | 1 | 1 | 69.0 / 69.0 s |" in text


def test_a_guest_speed_condition_allows_each_machine_its_own_quota_and_says_how_it_was_found(tmp_path):
    speed = {"target_s": 17.0, "quota": 0.6, "slower_than_target": False,
             "probes": [{"quota": None, "median_s": 3.7}, {"quota": 0.6, "median_s": 16.4}]}  # fmt: skip
    first = FACTS | {"cpu_quota": 0.6, "guest_speed": speed}
    out = tmp_path / "run.json"
    out.write_text(json.dumps(rel.start_or_resume(out, first, resume=False)))
    # A slower machine needs a larger share for the same guest speed: the same condition.
    slower = speed | {
        "quota": 0.9,
        "probes": [{"quota": None, "median_s": 6.0}, {"quota": 0.9, "median_s": 17.5}],
    }
    doc = rel.start_or_resume(out, first | {"cpu_quota": 0.9, "guest_speed": slower}, resume=True)
    assert [p["cpu_quota"] for p in doc["parts"]] == [0.6, 0.9]
    with pytest.raises(ValueError, match="guest workload 17 s, not QEMU CPU quota 0.6"):
        rel.start_or_resume(out, FACTS | {"cpu_quota": 0.6}, resume=True)
    with pytest.raises(ValueError, match="guest workload 17 s, not guest workload 20 s"):
        rel.start_or_resume(out, first | {"guest_speed": speed | {"target_s": 20.0}}, resume=True)
    text = rel.report(doc | {"trials": [trial(), trial(part=1)]})
    assert "QEMU CPU quota: 0.9 (cores), found for a guest workload of 17 s" in text
    assert "(quota: workload time none: 6.00 s, 0.9: 17.50 s)" in text


def _guest_speed():
    path = _RUN.parent / "guest_speed.py"
    spec = importlib.util.spec_from_file_location("vm_guest_speed", path)
    module = sys.modules.setdefault("vm_guest_speed", importlib.util.module_from_spec(spec))
    spec.loader.exec_module(module)
    return module


def test_calibration_finds_the_quota_for_a_target_time_or_says_the_host_is_slower():
    """The search only (a stand-in for the guest whose time goes as 1 / quota); the real probe
    restores the guest and is run by the benchmark."""
    gs = _guest_speed()

    def guest(unheld_s: float):
        return lambda quota, reps: {"quota": quota, "median_s": unheld_s if quota is None else 2.4 / quota}

    found = gs.calibrate(16.0, probe=guest(3.7))
    assert abs(2.4 / found["quota"] - 16.0) <= 16.0 * gs.TOLERANCE and not found["slower_than_target"]
    assert [p["quota"] for p in found["probes"]][:2] == [None, 0.6]
    slow = gs.calibrate(16.0, probe=guest(20.0))
    assert slow["quota"] is None and slow["slower_than_target"] and len(slow["probes"]) == 1
    never = "no quota gave 16 s within 15% after 6 probes: None: 3.0 s, 0.6: 40.0 s"
    with pytest.raises(RuntimeError, match=never):
        gs.calibrate(
            16.0, probe=lambda quota, reps: {"quota": quota, "median_s": 3.0 if quota is None else 40.0}
        )
