"""Job type ``storage_apt``: its parameters (errors name the field and the bound) and a whole run of
each mode over the synthetic transport (a goodput model, no network, no time)."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest
import yaml

from qoelab import jobs
from qoelab.jobtype import TrialContext
from qoelab.params import ParamsInvalid, validate_params

JOB = jobs.get("storage_apt")


def _run(tmp_path, **raw):
    params = validate_params(JOB.params, {"transport": "synthetic", **raw})
    return JOB.run(params, TrialContext("t1", tmp_path, "qltest0001"))


def test_the_defaults_are_table_2_1_scaled_to_this_host():
    params = validate_params(JOB.params, {})
    assert (params.rate, params.delay, params.limit) == (200e6, 0.02, "1000pkt")
    tcp = (params.tcp_cc, params.tcp_sack, params.tcp_rmem_max, params.tcp_wmem_max)
    assert tcp == ("reno", True, 524288, 524288)
    assert (params.n0, params.alpha, params.n_max, params.gss) == (4, 2.0, 64, "paper")
    assert (params.stripe, params.request) == (131072, 10 << 20)
    assert JOB.trial_requires(params) >= {"netns", "link", "apt.nbd", "tcp_cc.reno"}
    synthetic = validate_params(JOB.params, {"transport": "synthetic"})
    assert JOB.trial_requires(synthetic) == {"tcp_cc.reno"}


@pytest.mark.parametrize(
    ("raw", "field", "words"),
    [
        ({"mode": "fixed"}, "sessions", "required in fixed mode"),
        ({"mode": "fixed", "n_max": 8, "sessions": 9}, "sessions", "at most n_max (8)"),
        ({"n0": 100}, "n0", "at most n_max (64)"),
        ({"n_max": 129}, "n_max", "128"),
        ({"alpha": 1.1}, "alpha", "round(alpha × n0) must exceed n0"),
        ({"delta": "10ms"}, "delta", "at least 200ms"),
        ({"transport": "gnbd"}, "transport", "nbd"),
    ],
)
def test_bad_parameters_name_the_field_and_bound(raw, field, words):
    with pytest.raises(ParamsInvalid) as err:
        validate_params(JOB.params, raw)
    assert any(e["field"] == field and words in e["message"] for e in err.value.errors), err.value.errors


def test_an_apt_run_records_every_step_and_the_steady_window(tmp_path):
    result = _run(tmp_path, delay="100ms", n_max=128, delta="5s", steady="20s")
    steps = [s.values for s in result.samples]
    assert [s["n"] for s in steps][:5] == [4, 8, 16, 32, 64]  # the bracket phase doubles N
    assert steps[-1]["next_n"] == result.summary["n_star"] == result.summary["n_steady"]
    assert result.summary["steps"] == len(steps) and result.summary["saturated"] == 0
    assert result.summary["converge_s"] == pytest.approx(5 * len(steps))
    # The model's long-fat path: one session is window-limited, APT gets close to the link rate.
    assert result.summary["utilization"] > 0.9
    names = {p.name for p in result.series}
    assert names == {"goodput_bps", "active_n", "goodput_step_bps"}
    active = [p.value for p in result.series if p.name == "active_n"]
    assert active[0] == 4 and active[-1] == result.summary["n_star"]
    saved = json.loads((tmp_path / "storage_apt.json").read_text())
    assert [s["n"] for s in saved["steps"]] == [s["n"] for s in steps]


def test_fixed_and_vanilla_runs_have_no_steps(tmp_path):
    fixed = _run(tmp_path, mode="fixed", sessions=8, steady="10s")
    vanilla = _run(tmp_path, mode="vanilla", steady="10s")
    assert not fixed.samples and not vanilla.samples
    assert (fixed.summary["n_steady"], vanilla.summary["n_steady"]) == (8, 1)
    assert fixed.summary["goodput_steady_bps"] > 2 * vanilla.summary["goodput_steady_bps"]
    assert "n_star" not in fixed.summary and "steps" not in vanilla.summary


EXAMPLES = sorted((Path(__file__).resolve().parents[3] / "examples").glob("storage_apt*.yaml"))


@pytest.mark.parametrize("spec", EXAMPLES, ids=lambda p: p.name)
def test_every_point_of_the_example_specs_is_valid(spec):
    doc = yaml.safe_load(spec.read_text())
    assert doc["job_type"] == "storage_apt"
    grid = doc.get("grid", {})
    for combo in itertools.product(*grid.values()):
        validate_params(JOB.params, {**doc.get("fixed", {}), **dict(zip(grid, combo, strict=True))})


def test_a_session_may_owe_reads_for_four_window_drains_and_at_least_30_s():
    from qoelab.apt.transports import stall_timeout_s

    assert stall_timeout_s(128 << 20, 200e6) == 30.0  # 128 MB drains in 5.4 s at 200 Mbit/s
    assert stall_timeout_s(128 << 20, 10e6) == pytest.approx(4 * 8 * (128 << 20) / 10e6)  # 429 s
    assert stall_timeout_s(128 << 20, None) == 30.0  # unshaped
