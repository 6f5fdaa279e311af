"""Link profiles: parsing human units, validation naming the field and the bound, JSON round trip."""

import math

import pytest

from qoelab.emulation.linkparams import LinkParams
from qoelab.emulation.profile import Direction, LinkProfile, parse_gemodel
from qoelab.errors import ParameterError
from qoelab.params import ParamsInvalid, validate_params


def test_it_parses_human_units_into_si_values_for_both_directions():
    p = LinkProfile.parse(rate="10mbit", delay="25ms", loss="0.5%", jitter="2ms")
    for d in (p.up, p.down):
        assert d.rate_bps == 10e6
        assert d.delay_s == pytest.approx(0.025)
        assert d.jitter_s == pytest.approx(0.002)
        assert d.loss_pct == 0.5
    assert p.symmetric


def test_it_lets_the_up_direction_differ():
    p = LinkProfile.parse(rate="10mbit", delay="25ms", up_rate="1mbit", up_delay="5ms", up_loss="1%")
    assert p.down.rate_bps == 10e6 and p.up.rate_bps == 1e6
    assert p.down.delay_s == pytest.approx(0.025) and p.up.delay_s == pytest.approx(0.005)
    assert p.down.loss_pct == 0 and p.up.loss_pct == 1
    assert not p.symmetric


@pytest.mark.parametrize(
    ("kwargs", "field", "words"),
    [
        ({"rate": "20gbit"}, "rate", "at most 10gbit/s"),
        ({"rate": "4kbit"}, "rate", "at least 8kbit/s"),
        ({"up_rate": "11gbit"}, "up_rate", "at most 10gbit/s"),
        ({"delay": "10.5s"}, "delay", "at most 10s"),
        ({"delay": "-1ms"}, "delay", "negative"),
        ({"jitter": "nan"}, "jitter", "number"),
        ({"loss": "101%"}, "loss", "at most 100 %"),
        ({"loss": "-0.1%"}, "loss", "negative"),
        ({"loss": "NaN"}, "loss", "number"),
        ({"rate": "10 parsecs"}, "rate", "cannot read"),
        ({"gemodel": "1%,30%,120%"}, "gemodel.1-h", "at most 100 %"),
        ({"limit": "0pkt"}, "limit", "at least 1"),
        ({"mtu": 100}, "mtu", "between 576 and 9000"),
        ({"jitter_dist": "pareto"}, "jitter_dist", "uniform, normal"),
    ],
)
def test_it_rejects_bad_values_naming_the_field_and_the_bound(kwargs, field, words):
    with pytest.raises(ParameterError) as info:
        LinkProfile.parse(**kwargs)
    assert info.value.field == field
    assert words in str(info.value)


def test_it_rejects_loss_over_100_percent():
    with pytest.raises(ParameterError, match=r"loss: must be at most 100 %"):
        LinkProfile.parse(loss="100.5%")


def test_it_refuses_random_and_gilbert_elliott_loss_together():
    with pytest.raises(ParameterError, match="cannot be combined with gemodel"):
        LinkProfile.parse(loss="1%", gemodel="1%,30%")


def test_it_fills_gilbert_elliott_defaults_as_netem_does():
    assert parse_gemodel("1%") == (1.0, 99.0, 100.0, 0.0)
    assert parse_gemodel("1%,30%,80%,0.1%") == (1.0, 30.0, 80.0, 0.1)


def test_it_computes_the_long_run_gilbert_elliott_loss():
    d = Direction(gemodel=(1.0, 9.0, 100.0, 0.0))
    assert d.mean_loss_pct() == pytest.approx(10.0)  # pi_bad = 1 / (1 + 9)


def test_it_reads_queue_limits_in_packets_or_bytes():
    assert LinkProfile.parse(rate="1mbit", limit="100pkt").down.limit_pkts == 100
    assert LinkProfile.parse(rate="1mbit", limit=50).down.limit_pkts == 50
    d = LinkProfile.parse(rate="1mbit", limit="64kb").down
    assert d.limit_bytes == 65536 and d.limit_pkts is None
    assert d.queue_limit_bytes(1500) == 65536
    assert Direction().queue_limit_bytes(1500) == 1000 * 1500


def test_it_round_trips_through_json():
    p = LinkProfile.parse(rate="10mbit", delay="25ms", gemodel="1%,30%", up_rate="2mbit", seed=7, mtu=1400)
    assert LinkProfile.from_json(p.to_json()) == p
    import json

    assert LinkProfile.from_json(json.dumps(p.to_json())) == p


def test_it_validates_directions_built_directly():
    with pytest.raises(ParameterError, match="up_rate"):
        LinkProfile(up=Direction(rate_bps=math.inf), down=Direction()).validate()


def test_the_shared_pydantic_fields_validate_like_the_profile():
    params = validate_params(LinkParams, {"rate": "10mbit", "delay": "25ms", "loss": "0.5%"})
    profile = params.to_profile()
    assert profile.down.rate_bps == 10e6 and profile.up.delay_s == pytest.approx(0.025)
    with pytest.raises(ParamsInvalid) as info:
        validate_params(LinkParams, {"rate": "20gbit", "loss": "200%"})
    fields = {e["field"] for e in info.value.errors}
    assert fields == {"rate", "loss"}
    assert "10gbit" in str(info.value)


def test_the_shared_fields_reject_unknown_parameters():
    with pytest.raises(ParamsInvalid, match="not a parameter"):
        validate_params(LinkParams, {"bandwidth": "10mbit"})


def test_a_trace_replaces_the_rate_per_direction_and_its_provenance_travels_with_the_profile():
    p = LinkProfile.parse(trace="Verizon-LTE-short.down", up_trace="Verizon-LTE-short.up", delay="20ms")
    assert p.down.rate_bps is None and p.down.trace.endswith("trace_library/Verizon-LTE-short.down")
    assert p.up.trace.endswith("Verizon-LTE-short.up") and p.needs_userspace.startswith("a trace link")
    assert LinkProfile.from_json(p.to_json()) == p
    facts = p.summary()
    assert facts["trace"] == "Verizon-LTE-short.down" and len(facts["trace_sha256"]) == 64
    assert facts["up_trace"] == "Verizon-LTE-short.up" and facts["trace_period_s"] > 0
    # The plain trace sets both directions; up_rate replaces it upstream (the up_* override rule).
    mixed = LinkProfile.parse(trace="Verizon-LTE-short.down", up_rate="1mbit")
    assert mixed.up.trace is None and mixed.up.rate_bps == 1e6 and "up_trace" not in mixed.summary()
    assert "trace Verizon-LTE-short.down (mean" in mixed.down.describe()
    assert LinkProfile.parse(rate="1mbit").needs_userspace == ""


@pytest.mark.parametrize(
    ("kwargs", "field", "words"),
    [
        ({"rate": "1mbit", "trace": "Verizon-LTE-short.down"}, "trace", "not both"),
        ({"trace": "no-such.down"}, "trace", "no such trace in the library"),
        ({"up_trace": "no-such.up"}, "up_trace", "no such trace"),
    ],
)
def test_a_bad_trace_is_refused_naming_the_field(kwargs, field, words):
    with pytest.raises(ParameterError) as err:
        LinkProfile.parse(**kwargs)
    assert err.value.field == field and words in err.value.message


def test_a_sweep_names_traces_from_the_library_only(tmp_path):
    # A file path would let a sweep read a worker's files (and see their first line in the error).
    own = tmp_path / "own.down"
    own.write_text("1\n2\n")
    with pytest.raises(ParamsInvalid) as err:
        validate_params(LinkParams, {"link_trace": str(own)})
    assert "no such trace in the lab's library" in str(err.value)
    params = validate_params(LinkParams, {"link_trace": "TMobile-UMTS-driving.down"})
    assert params.to_profile().down.trace.endswith("trace_library/TMobile-UMTS-driving.down")
    # The command line may replay any file (LinkProfile.parse takes a path).
    assert LinkProfile.parse(trace=str(own)).down.trace == str(own)


@pytest.mark.parametrize("job", ["link_check", "thinclient_tcp", "storage_bench", "storage_apt", "vose"])
def test_every_job_type_on_a_link_replays_a_trace_and_its_default_rate_gives_way(job):
    from qoelab.jobs import get

    params = validate_params(get(job).params, {"link_trace": "Verizon-LTE-short.down"})
    profile = params.to_profile()
    assert profile.down.trace.endswith("Verizon-LTE-short.down") and profile.down.rate_bps is None
    # A rate given with the trace for the same direction is refused at submit, naming the trace.
    with pytest.raises(ParamsInvalid) as err:
        validate_params(get(job).params, {"link_trace": "Verizon-LTE-short.down", "rate": "7mbit"})
    assert err.value.errors[0]["field"] == "link_trace" and "not both" in err.value.errors[0]["message"]


def test_an_outage_schedule_is_parsed_checked_and_needs_the_userspace_link():
    p = LinkProfile.parse(rate="12mbit", outage="200ms/300ms")
    assert p.down.outage == p.up.outage == (pytest.approx(0.2), pytest.approx(0.3))
    assert "outage 300ms every 500ms" in p.down.describe() and p.needs_userspace.startswith("an outage")
    assert LinkProfile.from_json(p.to_json()) == p
    for raw, words in (("1s", "ON/OFF"), ("0s/1s", "outage.on: must be between 1ms and 86400s"),
                       ("1s/2d", "outage.off")):  # fmt: skip
        with pytest.raises(ParamsInvalid) as err:
            validate_params(LinkParams, {"rate": "1mbit", "outage": raw})
        assert err.value.errors[0]["field"] == "outage" and words in err.value.errors[0]["message"], raw
    with pytest.raises(ParameterError, match="put the outage in the trace"):
        LinkProfile.parse(trace="Verizon-LTE-short.down", outage="1s/1s")
