"""The thesis presets: valid rd_qoe sweeps, the full grids equal to the example specs, and every
quick grid keeps a point on each side of the thresholds the chapter's findings name."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
import yaml

from qoelab import jobs, presets
from qoelab.findings import ch4
from qoelab.params import validate_params
from qoelab.units import parse_duration, parse_percent, parse_rate

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
SWEEPS = [p for p in presets.chapter("ch4").presets if p.kind == "sweep"]
APT = presets.chapter("ch2").presets


@pytest.mark.parametrize("preset", SWEEPS, ids=lambda p: p.key)
@pytest.mark.parametrize("size", presets.SIZES)
def test_every_point_of_a_sweep_preset_is_a_valid_rd_qoe_trial(preset, size):
    spec = preset.sweep_spec(size)
    job = jobs.get(spec["job_type"])
    grid = spec["grid"]
    for combo in itertools.product(*grid.values()):
        validate_params(job.params, {**spec["fixed"], **dict(zip(grid, combo, strict=True))})
    assert spec["repetitions"] == (3 if size == "quick" else 10) and spec["fixed"]["pages"] == 5


@pytest.mark.parametrize(("key", "example"), [("ch4-fig46", "thesis-fig4.6-bandwidth.yaml"),
                                              ("ch4-fig47", "thesis-fig4.7-delay.yaml"),
                                              ("ch4-fig48", "thesis-fig4.8-loss.yaml")])  # fmt: skip
def test_the_full_presets_are_the_example_specs(key, example):
    spec = presets.get(key).sweep_spec("full")
    written = yaml.safe_load((EXAMPLES / example).read_text())
    assert spec["grid"] == written["grid"] and spec["fixed"] == written["fixed"]
    assert spec["repetitions"] == written["repetitions"] and spec["seed"] == written["seed"]


def test_quick_grids_straddle_every_threshold_the_findings_name():
    rates = [parse_rate(r) for r in presets.get("ch4-fig46").grids["quick"]["rate"]]
    assert min(rates) <= ch4.LOW_RATE_BPS and max(rates) > ch4.HIGH_RATE_BPS
    delays = [parse_duration(d) for d in presets.get("ch4-fig47").grids["quick"]["delay"]]
    assert min(delays) <= ch4.CROSS_DELAY_S < max(delays)
    losses = [parse_percent(x) for x in presets.get("ch4-fig48").grids["quick"]["loss"]]
    assert min(losses) < ch4.LOW_LOSS_PCT and max(losses) > ch4.HIGH_LOSS_PCT


def test_an_unknown_preset_or_size_is_refused_by_name():
    with pytest.raises(ValueError, match="unknown preset 'ch4-fig99'"):
        presets.get("ch4-fig99")
    with pytest.raises(ValueError, match="size must be one of quick, full"):
        presets.get("ch4-fig46").sweep_spec("huge")  # type: ignore[arg-type]


@pytest.mark.parametrize("preset", APT, ids=lambda p: p.key)
@pytest.mark.parametrize("size", presets.SIZES)
def test_every_chapter_2_point_is_a_valid_storage_apt_trial_run_once(preset, size):
    spec = preset.sweep_spec(size)
    assert spec["job_type"] == "storage_apt" and preset.report == "ch2" and "pages" not in spec["fixed"]
    job = jobs.get("storage_apt")
    points = preset.unique_points(size)
    for point in points:
        validate_params(job.params, point)
    # sessions applies to fixed mode only: APT and vanilla run once per other condition.
    others = len(points) // (2 + len(spec["grid"]["sessions"]))
    assert sum(p["mode"] == "apt" for p in points) == others and all(
        "sessions" not in p for p in points if p["mode"] != "fixed"
    )
    assert preset.trial_count(size) == len(points) * spec["repetitions"]


def test_the_s1_preset_is_the_papers_figs_2_8_and_2_9_scaled():
    quick = presets.get("ch2-s1")
    assert quick.trial_count("quick") == (1 + 1 + 3) * 3  # APT, vanilla, N = 4/16/64; 3 runs
    assert quick.sweep_spec("quick")["fixed"]["transport"] == "nbd"


@pytest.mark.parametrize("preset", presets.chapter("ch3").presets, ids=lambda p: p.key)
@pytest.mark.parametrize("size", presets.SIZES)
def test_every_chapter_3_point_is_a_valid_vose_trial_and_references_run_once(preset, size):
    spec = preset.sweep_spec(size)
    assert spec["job_type"] == "vose" and preset.report == "ch3"
    job = jobs.get("vose")
    points = preset.unique_points(size)
    for point in points:
        validate_params(job.params, point)
    # speedup applies to vose only: software and hardware run once per other condition.
    assert all("speedup" not in p for p in points if p.get("mode", spec["fixed"].get("mode")) != "vose")
    assert preset.trial_count(size) == len(points) * spec["repetitions"]


def test_the_chapter_3_presets_keep_the_points_their_findings_compare():
    fig311 = presets.get("ch3-fig311").grids["quick"]["speedup"]
    assert {1, 2, 3, "inf"} <= set(fig311)  # gain by 2x, little beyond 3x
    fig312 = presets.get("ch3-fig312").grids["quick"]["speedup"]
    assert {3, 10, "inf"} <= set(fig312)  # SHA1-only levels off near 10x
    validate = presets.get("ch3-validate")
    assert validate.fixed["speedup"] == "measured" and set(validate.grids["quick"]["mode"]) == {
        "software", "hardware", "vose"}  # fmt: skip


@pytest.mark.parametrize("preset", presets.chapter("tc002").presets, ids=lambda p: p.key)
@pytest.mark.parametrize("size", presets.SIZES)
def test_every_paper_002_point_is_a_valid_thinclient_trial_at_the_sizes_scale(preset, size):
    spec = preset.sweep_spec(size)
    assert spec["job_type"] == "thinclient_tcp" and preset.report == "tc002" and spec["repetitions"] == 1
    assert spec["experiment"]["name"].startswith(f"Paper 002 {preset.figure}: ")
    job = jobs.get("thinclient_tcp")
    resolved = [validate_params(job.params, p).model_dump(mode="json") for p in preset.unique_points(size)]
    duration, seeds = (30.0, [1, 2]) if size == "quick" else (300.0, list(range(1, 8)))
    assert {(r["pairs"], r["duration"]) for r in resolved} == {(100, duration)}  # fewer pairs never queue
    assert {(r["bulk_length"], r["max_bulk"]) for r in resolved} == {("pareto", 250)}
    assert spec["grid"]["seed"] == seeds  # pooled by the findings: the paper's runs
    assert {r["limit"] for r in resolved} == {"2500000b", "25000b"}  # the paper's two buffers
    assert {r["experiment"] for r in resolved} == {preset.key.removeprefix("tc002-")}
    # The paper's TCP: Reno, Nagle and delayed ACKs off, no slow-start restart.
    assert {(r["tcp_cc"], r["tcp_quickack"], r["tcp_slow_start_after_idle"]) for r in resolved} == {
        ("reno", True, False)}  # fmt: skip
    assert preset.trial_count(size) == len(resolved)


def test_the_paper_002_presets_feed_every_check_of_their_report():
    from qoelab.findings import REPORTS, applicable

    job = jobs.get("thinclient_tcp")
    fed = {}
    for preset in presets.chapter("tc002").presets:
        points = [
            validate_params(job.params, p).model_dump(mode="json") for p in preset.unique_points("quick")
        ]
        fed[preset.key] = {c.name for c in applicable("tc002", [], points)}
    assert fed["tc002-e1e2"] >= {"router_dominates_150", "prio_sack_lower_r150", "bursty_drop_stall"}
    assert fed["tc002-e7"] == {"separate_propagation"}
    assert "t_interval_vs_delay" in fed["tc002-e8"] and "prio_sack_lower_r150" not in fed["tc002-e8"]
    assert set().union(*fed.values()) == {c.name for c in REPORTS["tc002"]}
    e8 = presets.get("tc002-e8").grids["quick"]["delay"]
    assert [parse_duration(d) * 1e3 for d in e8] == pytest.approx([7, 10, 20, 30, 50, 70])  # Fig. 14
    assert [p.key for p in presets.chapter("tc002").presets] == [
        "tc002-e1e2", "tc002-e7", "tc002-e8"]  # fmt: skip
