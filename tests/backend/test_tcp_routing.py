"""A link's TCP algorithm is a capability: refused at creation when no worker offers it, and a
sweep waiting for one says which algorithm it waits for."""

from __future__ import annotations

import pytest

from experiments.models import Sweep
from experiments.services import SpecError, create_sweep, progress

pytestmark = pytest.mark.django_db

LINK_CAPS = {"netns": True, "link": True, "iperf3": True}


def link_check_spec(**fixed):
    return {
        "experiment": {"name": "tcp", "description": ""},
        "job_type": "link_check",
        "grid": {"rate": ["1mbit"]},
        "fixed": {"duration": "1s", **fixed},
    }


def test_every_trial_needs_the_algorithm_of_its_link(alice):
    sweep = create_sweep(link_check_spec(), alice)
    assert {tuple(t.requires) for t in sweep.trials.all()} == {("iperf3", "link", "netns", "tcp_cc.cubic")}
    reno = create_sweep({**link_check_spec(tcp_cc="reno"), "name": "reno"}, alice)
    assert "tcp_cc.reno" in reno.trials.get().requires


def test_an_algorithm_no_registered_worker_offers_is_refused_naming_it(alice, make_host):
    make_host("tcp-host", {**LINK_CAPS, "tcp_cc.cubic": True, "tcp_cc.reno": True})
    with pytest.raises(SpecError) as err:
        create_sweep(link_check_spec(tcp_cc="vegas"), alice)
    (e,) = err.value.errors
    assert e["field"] == "fixed.tcp_cc"
    assert "'vegas'" in e["message"] and "cubic, reno" in e["message"]
    assert not Sweep.objects.exists()


def test_a_worker_that_has_not_reported_yet_refuses_nothing(alice, make_host):
    # make demo registers its worker, then submits at once: the first heartbeat may not be in yet.
    make_host("tcp-host", {}, alive=False)
    sweep = create_sweep(link_check_spec(), alice)
    assert sweep.trial_count == 1


def test_a_badly_named_algorithm_is_refused_with_the_field(alice):
    with pytest.raises(SpecError) as err:
        create_sweep(link_check_spec(tcp_cc="Cubic; rm"), alice)
    assert err.value.errors[0]["field"] == "fixed.tcp_cc"
    assert "congestion control name" in err.value.errors[0]["message"]


def test_a_sweep_waiting_for_an_algorithm_says_which(alice, make_host):
    # Created while no worker was registered (nothing known yet), then only a BBR/CUBIC host came.
    sweep = create_sweep(link_check_spec(tcp_cc="htcp"), alice)
    make_host("tcp-host", {**LINK_CAPS, "tcp_cc.cubic": True, "tcp_cc.bbr": True})
    blocked = progress(sweep)["blocked"]
    assert "TCP congestion control 'htcp'" in blocked and "bbr, cubic" in blocked
