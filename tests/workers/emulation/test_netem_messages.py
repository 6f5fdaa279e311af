"""The netem backend's netlink messages, checked by building and decoding them (no sch_netem needed),
and applied for real where the kernel has sch_netem."""

import struct

import pytest

from qoelab.emulation import netem
from qoelab.emulation.profile import LinkProfile


def decode(msg):
    back = netem.NetemTcMsg(msg.data)
    back.decode()
    return back


def test_it_encodes_delay_loss_and_seed_in_the_netem_options():
    d = LinkProfile.parse(rate="10mbit", delay="25ms", loss="0.5%").down
    back = decode(netem.netem_message(7, d, seed=42))
    assert back["index"] == 7 and back["handle"] == 0x10000 and back["parent"] == 0xFFFFFFFF
    assert back.get_attr("TCA_KIND") == "netem"
    opts = back.get_attr("TCA_OPTIONS")
    assert opts.get_attr("TCA_NETEM_LATENCY64") == 25_000_000
    assert opts["delay"] == 25_000_000 >> 6  # kernel ticks are 64 ns
    assert opts["loss"] == round(0.005 * 0xFFFFFFFF)
    assert opts.get_attr("TCA_NETEM_PRNG_SEED") == 42
    assert opts.get_attr("TCA_NETEM_LOSS") is None
    assert opts.get_attr("TCA_NETEM_DELAY_DIST") is None  # uniform jitter needs no table


def test_it_encodes_gilbert_elliott_as_the_kernel_expects_h_not_1_minus_h():
    d = LinkProfile.parse(gemodel="1%,30%,90%,2%").down
    opts = decode(netem.netem_message(1, d, 1)).get_attr("TCA_OPTIONS")
    ge = opts.get_attr("TCA_NETEM_LOSS").get_attr("NETEM_LOSS_GE")
    assert ge["p"] == netem.percent_u32(1)
    assert ge["r"] == netem.percent_u32(30)
    assert ge["h"] == 0xFFFFFFFF - netem.percent_u32(90)  # tc: "netem option is 1-h but kernel expects h"
    assert ge["k1"] == netem.percent_u32(2)
    assert opts["loss"] == 0


def test_it_sends_a_normal_table_for_normal_jitter_and_keeps_order_by_default():
    d = LinkProfile.parse(delay="50ms", jitter="10ms", jitter_dist="normal").down
    opts = decode(netem.netem_message(1, d, 1)).get_attr("TCA_OPTIONS")
    table = struct.unpack(f"={netem.NETEM_DIST_SIZE}h", opts.get_attr("TCA_NETEM_DELAY_DIST"))
    assert table[netem.NETEM_DIST_SIZE // 2] == pytest.approx(0, abs=5)  # the median is the mean
    assert table[0] < -16000 and table[-1] > 16000  # tails beyond 2 sigma (8192 = 1 sigma)
    assert opts.get_attr("TCA_NETEM_JITTER64") == 10_000_000
    assert opts.get_attr("TCA_NETEM_RATE")["rate"] == int(10e9 / 8)  # in-order scheduling


def test_it_lets_jitter_reorder_only_when_asked():
    d = LinkProfile.parse(delay="50ms", jitter="10ms", reorder=True).down
    opts = decode(netem.netem_message(1, d, 1)).get_attr("TCA_OPTIONS")
    assert opts.get_attr("TCA_NETEM_RATE") is None


def test_it_sizes_the_rate_child_from_the_profile():
    d = LinkProfile.parse(rate="10mbit", limit="100pkt").down
    tbf = netem.tbf_arguments(d, 1500)
    assert tbf["rate"] == "10000000bit"
    assert tbf["limit"] == 100 * 1500
    assert tbf["burst"] >= 2 * 1514
    assert netem.tbf_arguments(LinkProfile.parse(delay="5ms").down, 1500) == {}


@pytest.mark.netns
def test_it_applies_netem_on_a_real_veth_or_says_why_not(netns_ok):
    from qoelab.emulation.topology import probe_netem

    ok, reason = probe_netem()
    if not ok:
        print(f"netem backend skipped: {reason}")
        pytest.skip(reason)
    from qoelab.emulation.topology import emulated_link

    with emulated_link(
        LinkProfile.parse(rate="10mbit", delay="10ms"), prefix="qlnm0001", backend="netem"
    ) as link:
        out = link.run_in("client", ["ping", "-c", "3", "-i", "0.05", link.server_ip], check=True)
        assert "0% packet loss" in out.stdout
