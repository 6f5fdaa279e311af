"""The link_check job type: declaration the backend reads, and a real run through its runner."""

import json
import time

import pytest

from qoelab.jobs import get
from qoelab.jobtype import TrialContext
from qoelab.params import ParamsInvalid, validate_params


def test_link_check_is_registered_with_its_schema_requirements_and_charts():
    job = get("link_check")
    assert job.requires == frozenset({"netns", "link", "iperf3"})
    charts = {c.key: c for c in job.charts}
    assert charts["rate"].log_x and charts["rate"].log_y and charts["rate"].identity
    assert (charts["rate"].x, charts["rate"].y) == ("rate", "tcp_down_bps")
    assert (charts["rtt"].x, charts["rtt"].y) == ("delay", "rtt_ms")
    assert {m.name for m in job.metrics} >= {"tcp_down_bps", "tcp_up_bps", "rtt_ms", "loss_pct", "mathis_bps"}


def test_a_trace_link_trial_goes_to_a_worker_with_the_userspace_emulator():
    job = get("link_check")
    traced = job.trial_requires(validate_params(job.params, {"link_trace": "Verizon-LTE-short.down"}))
    plain = job.trial_requires(validate_params(job.params, {"rate": "1mbit"}))
    assert "userspace_link" in traced and "userspace_link" not in plain


def test_link_check_rejects_out_of_bounds_parameters_naming_them():
    with pytest.raises(ParamsInvalid) as info:
        validate_params(get("link_check").params, {"rate": "1kbit", "duration": "2min"})
    assert {e["field"] for e in info.value.errors} == {"rate", "duration"}


def run_trial(raw: dict, prefix: str, workdir) -> tuple:
    """One real link_check trial (skipped where namespaces or the userspace link cannot run):
    its result and context, after checking that it left nothing behind."""
    from qoelab.emulation.cleanup import cleanup_leftovers, leftovers
    from qoelab.emulation.system import has_net_admin
    from qoelab.emulation.topology import userspace_available

    if not has_net_admin():
        pytest.skip("needs root or CAP_NET_ADMIN to create network namespaces")
    ok, reason = userspace_available()
    if not ok:
        pytest.skip(reason)
    job = get("link_check")
    ctx = TrialContext(trial_id=prefix, workdir=workdir, prefix=prefix, deadline=time.monotonic() + 120)
    try:
        result = job.run(validate_params(job.params, raw), ctx)
    finally:
        cleanup_leftovers(prefix)
    assert leftovers(prefix) == {"namespaces": [], "devices": [], "processes": []}
    return result, ctx


@pytest.mark.netns
def test_a_link_check_trial_stores_configured_and_measured_values(tmp_path):
    raw = {"rate": "5mbit", "delay": "10ms", "loss": "1%", "duration": "2s"}
    result, ctx = run_trial(raw, "qltlc001", tmp_path)
    s = result.summary
    assert s["configured_rate_bps"] == 5e6 and s["configured_rtt_ms"] == 20
    assert s["tcp_down_bps"] == pytest.approx(5e6 * 1448 / 1500, rel=0.2)
    assert s["rtt_ms"] == pytest.approx(20, abs=3)
    assert 0 < s["loss_pct"] < 3
    assert s["mathis_bps"] > 0
    assert result.link["backend"] in ("netem", "userspace")
    assert result.provenance["backend"] == result.link["backend"]
    assert result.provenance["tools"]["iperf3"].startswith("iperf 3")
    assert any(a.kind == "json" for a in ctx.artifacts)


@pytest.mark.netns
def test_a_link_check_trial_over_a_library_trace_records_which_trace_it_replayed(tmp_path):
    from qoelab.emulation.traces import load, resolve

    # "auto" takes the userspace link for a trace (netem has no trace replay), wherever it runs.
    raw = {"link_trace": "Verizon-LTE-short.down", "delay": "10ms", "duration": "2s"}
    result, ctx = run_trial(raw, "qltlc002", tmp_path)
    trace = load(resolve("Verizon-LTE-short.down"))
    assert result.link["backend"] == "userspace"
    assert result.link["link"]["traces"]["down"] == {"name": trace.name, "sha256": trace.sha256}
    assert result.link["configured"]["trace"] == trace.name and "configured_rate_bps" not in result.summary
    # TCP over the trace gets what the trace offers at most; the loss probe is not judged on it.
    assert 0 < result.summary["tcp_down_bps"] <= 1.1 * max(trace.series_bps(1000))
    assert {c["name"] for c in result.link["checks"]} == {"rtt_ms"} and result.summary["checks_ok"] == 1.0
    # The per-millisecond link log goes up with the trial (the trial page draws it).
    (logged,) = [a.path for a in ctx.artifacts if a.path.name == "link_log.json"]
    down = json.loads(logged.read_text())["directions"]["down"]
    assert down["trace"] == trace.name and sum(down["delivered_bytes"]) > 0
