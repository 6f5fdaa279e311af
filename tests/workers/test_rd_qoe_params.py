"""The ``rd_qoe`` job type's declaration: parameters, requirements, charts and the thesis example specs."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
import yaml

from qoelab import jobs
from qoelab.jobs.rd_qoe import RdQoeParams, summarise, update_samples
from qoelab.params import ParamsInvalid, validate_params

REPO = Path(__file__).resolve().parents[2]
JOB = jobs.get("rd_qoe")


def errors_of(raw: dict) -> dict[str, str]:
    with pytest.raises(ParamsInvalid) as exc:
        validate_params(JOB.params, raw)
    return {e["field"]: e["message"] for e in exc.value.errors}


def test_it_is_registered_with_the_thesis_defaults():
    p = validate_params(JOB.params, {"protocol": "vnc", "rate": "1mbit", "delay": "10ms"})
    assert isinstance(p, RdQoeParams)
    assert (p.rate, p.delay, p.loss) == (1e6, 0.01, 0.0)
    assert (p.vnc_compresslevel, p.vnc_quality, p.spice_image_compression) == (9, 5, "auto_glz")
    assert (p.x2go_link, p.x2go_pack, p.server) == ("adsl", "16m-jpeg-9", "namespace")
    assert (p.quiet, p.pause, p.pages) == (0.5, 0.5, 5)


def test_it_rejects_an_unknown_protocol_naming_the_field_and_the_choices():
    msg = errors_of({"protocol": "rdp"})["protocol"]
    assert "'vnc'" in msg and "'spice'" in msg and "'x2go'" in msg


def test_it_requires_a_protocol():
    assert "protocol" in errors_of({"rate": "1mbit"})


@pytest.mark.parametrize(
    ("raw", "field", "words"),
    [
        ({"pages": 0}, "pages", "greater than or equal to 1"),
        ({"pages": 101}, "pages", "less than or equal to 100"),
        ({"pages": 60}, "pages", "at most 55"),
        ({"quiet": "10ms"}, "quiet", "at least"),
        ({"update_timeout": "700s"}, "update_timeout", "at most"),
        ({"verify_duration": "0.5s"}, "verify_duration", "at least"),
        ({"vnc_quality": 10}, "vnc_quality", "less than or equal to 9"),
        ({"vnc_server": "realvnc"}, "vnc_server", "'x11vnc'"),
        ({"spice_image_compression": "jpeg"}, "spice_image_compression", "'auto_glz'"),
        ({"x2go_link": "dsl"}, "x2go_link", "'adsl'"),
        ({"x2go_pack": "16m jpeg; rm -rf"}, "x2go_pack", "NX pack method"),
        ({"server": "lxc"}, "server", "'namespace'"),
        ({"rate": "20gbit"}, "rate", "at most 10gbit/s"),
        ({"loss": "101%"}, "loss", "at most 100"),
        ({"colour": "blue"}, "colour", "not a parameter"),
    ],
)
def test_it_rejects_out_of_bounds_values_naming_the_field(raw, field, words):
    errors = errors_of({"protocol": "spice", **raw})
    assert field in errors and words in errors[field], errors


def test_settings_carry_only_the_chosen_protocols_values():
    def settings(**kw):
        return validate_params(JOB.params, kw).settings()

    assert settings(protocol="vnc", vnc_quality=7) == {"server": "x11vnc", "compresslevel": 9, "quality": 7}
    assert settings(protocol="spice", spice_image_compression="quic") == {"image_compression": "quic"}
    assert settings(protocol="x2go", x2go_link="lan") == {
        "link": "lan",
        "pack": "16m-jpeg-9",
        "irlimit": 1_000_000,
    }
    assert settings(protocol="x2go", x2go_irlimit=0)["irlimit"] == 0  # stock nxagent
    # QEMU's adaptive encoding is a setting of its own VNC server: VM mode only.
    assert settings(protocol="vnc", server="vm", vnc_qemu_adaptive=False)["qemu_adaptive"] is False
    assert "qemu_adaptive" not in settings(protocol="vnc")
    errors = errors_of({"protocol": "vnc", "vnc_qemu_adaptive": False})
    assert "server vm only" in errors["vnc_qemu_adaptive"], errors


def test_a_trial_requires_the_link_and_only_its_own_protocols_tools():
    def needs(**kw):
        return JOB.trial_requires(validate_params(JOB.params, kw))

    assert {"netns", "link", "tshark"} <= JOB.requires
    assert not any(c.startswith("rd.vnc") for c in JOB.requires)
    assert {"netns", "link", "rd.vnc.server", "rd.vnc.client"} <= needs(protocol="vnc")
    assert not any(c.startswith(("rd.spice", "rd.x2go")) for c in needs(protocol="vnc"))
    # VM mode: QEMU and the guest image serve the desktop, the host only needs the client.
    vm_x2go = needs(protocol="x2go", server="vm")
    assert {"vm", "nft", "rd.x2go.client"} <= vm_x2go and "rd.x2go.server" not in vm_x2go
    assert "vm" not in needs(protocol="spice")


def test_vm_mode_takes_every_protocol_and_a_start_mode():
    for protocol in ("vnc", "spice", "x2go"):
        assert validate_params(JOB.params, {"protocol": protocol, "server": "vm"}).vm_start == "snapshot"
    errors = errors_of({"protocol": "vnc", "server": "vm", "vm_start": "warm"})
    assert "vm_start" in errors and "snapshot" in errors["vm_start"], errors


def test_its_charts_reproduce_figures_4_6_to_4_8_by_protocol():
    charts = {c.key: c for c in JOB.charts}
    assert {(c.x, c.y) for c in charts.values()} == {
        ("rate", "T_ms"), ("rate", "bytes_down"), ("rate", "rate_bps"), ("delay", "T_ms"), ("loss", "T_ms"),
    }  # fmt: skip
    assert all(c.series == "protocol" and c.source == "summary" for c in charts.values())
    assert charts["fig46_T"].log_x and charts["fig46_X"].log_x and charts["fig46_rate"].log_x
    metrics = {m.name for m in JOB.metrics}
    assert {c.y for c in charts.values()} <= metrics


def _update(index, T_ms, x, pixel_ms, timed_out=False, extended=False):
    start, click = 100.0 + index, 100.0 + index - 0.01
    end = None if T_ms is None else start + T_ms / 1e3
    rate = None if T_ms is None else 8e3 * x / T_ms
    return {
        "index": index, "page": index + 2, "ratio": 0.25, "click_time": click, "start": start, "end": end,
        "T_ms": T_ms, "bytes_down": x, "bytes_down_unique": x, "rate_bps": rate,
        "pixel_ms": pixel_ms, "bytes_up": 20, "packets_down": 10, "packets_up": 5, "retransmissions_down": 1,
        "retransmissions_up": 0, "connections": 1, "timed_out": timed_out, "extended_to_pixels": extended,
    }  # fmt: skip


def test_samples_flag_updates_whose_pixel_and_packet_times_disagree_and_the_summary_skips_timeouts():
    samples = update_samples(
        [_update(0, 100.0, 1000, 120.0), _update(1, 300.0, 3000, 2000.0), _update(2, None, 50, None, True)]
    )
    assert [s.kind for s in samples] == ["update"] * 3
    assert [s.values["disagree"] for s in samples] == [False, True, False]
    assert samples[0].values["pixel_minus_packet_ms"] == pytest.approx(120.0 - 110.0)
    assert samples[0].values["retransmissions"] == 1
    summary = summarise(samples, {"setup_s": 5.0, "teardown_s": 0.5})
    assert summary["n"] == 3 and summary["n_timed_out"] == 1 and summary["n_disagree"] == 1
    assert summary["T_ms"] == pytest.approx(200.0) and summary["bytes_down"] == pytest.approx(2000.0)
    assert summary["rate_bps"] == pytest.approx((80e3 + 80e3) / 2)
    assert summary["setup_s"] == 5.0 and summary["teardown_s"] == 0.5


SPECS = sorted([*(REPO / "examples").glob("thesis-fig4.*.yaml"), *(REPO / "examples").glob("rd_*.yaml")])


def test_there_is_an_example_spec_per_thesis_figure():
    figures = {p.name.split("-")[1] for p in SPECS if p.name.startswith("thesis")}
    assert figures == {"fig4.6", "fig4.7", "fig4.8"}


@pytest.mark.parametrize("spec", SPECS, ids=lambda p: p.name)
def test_the_example_specs_validate_at_every_grid_point(spec):
    doc = yaml.safe_load(spec.read_text())
    assert doc["job_type"] == "rd_qoe"
    if spec.name.startswith("thesis"):
        assert doc["repetitions"] == 10  # the thesis' 10 runs per condition
    assert set(doc["grid"]["protocol"]) == {"vnc", "spice", "x2go"}
    keys = list(doc["grid"])
    points = 0
    for values in itertools.product(*(doc["grid"][k] for k in keys)):
        validate_params(JOB.params, {**doc.get("fixed", {}), **dict(zip(keys, values, strict=True))})
        points += 1
    assert points >= 9
