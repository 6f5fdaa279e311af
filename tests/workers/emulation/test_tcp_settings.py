"""The trial's TCP in both namespaces: set before anything connects, read back by the kernel's own
tools, recorded, and an algorithm the kernel lacks refused before anything is built."""

from __future__ import annotations

import subprocess

import pytest

from qoelab.emulation import tcp
from qoelab.emulation.cleanup import leftovers
from qoelab.emulation.linkparams import LinkParams
from qoelab.params import ParamsInvalid, validate_params

SYSCTLS = ("net.ipv4.tcp_congestion_control", "net.ipv4.tcp_sack", "net.ipv4.tcp_rmem", "net.ipv4.tcp_wmem")


def sysctl_in(ns: str) -> dict[str, str]:
    """What ``sysctl`` itself prints inside the namespace (not our reader)."""
    out = subprocess.run(
        ["ip", "netns", "exec", ns, "sysctl", *SYSCTLS], capture_output=True, text=True, check=True
    )
    pairs = (line.split(" = ", 1) for line in out.stdout.splitlines())
    return {k: " ".join(v.split()) for k, v in pairs}


def route_to_peer(ns: str, peer: str) -> str:
    out = subprocess.run(["ip", "-n", ns, "route", "show", peer], capture_output=True, text=True, check=True)
    return out.stdout


@pytest.mark.netns
def test_both_namespaces_run_the_trials_tcp_and_the_link_records_what_the_kernel_says(netns_ok, prefix):
    from qoelab.emulation.topology import emulated_link

    host_cc = subprocess.run(["sysctl", "-n", "net.ipv4.tcp_congestion_control"], capture_output=True,
                             text=True).stdout.strip()  # fmt: skip
    raw = {"rate": "10mbit", "delay": "5ms", "tcp_cc": "reno", "tcp_sack": False, "tcp_rmem_max": "512kb",
           "tcp_wmem_max": "1mb", "rto_min": "50ms"}  # fmt: skip
    params = validate_params(LinkParams, raw)
    with emulated_link(params.to_profile(), prefix=prefix) as link:
        for side, ns, peer in (
            ("client", link.client_ns, link.server_ip),
            ("server", link.server_ns, link.client_ip),
        ):
            seen = sysctl_in(ns)
            assert seen["net.ipv4.tcp_congestion_control"] == "reno"
            assert seen["net.ipv4.tcp_sack"] == "0"
            assert seen["net.ipv4.tcp_rmem"].split()[-1] == str(512 * 1024)
            assert seen["net.ipv4.tcp_wmem"].split()[-1] == str(1024 * 1024)
            assert "rto_min 50ms" in route_to_peer(ns, peer)
            got = link.tcp[side]
            assert (got["cc"], got["sack"], got["rmem_max"], got["wmem_max"], got["rto_min_ms"]) == (
                "reno", False, 512 * 1024, 1024 * 1024, 50)  # fmt: skip
        described = link.describe()["tcp"]
        assert described["cc"] == "reno" and described["requested"]["rto_min_s"] == 0.05
    # The host keeps its own algorithm: only the trial's namespaces changed.
    assert subprocess.run(["sysctl", "-n", "net.ipv4.tcp_congestion_control"], capture_output=True,
                          text=True).stdout.strip() == host_cc  # fmt: skip


@pytest.mark.netns
def test_by_default_a_link_runs_cubic_with_sack_and_path_sized_buffers(netns_ok, prefix):
    from qoelab.emulation.topology import emulated_link

    profile = validate_params(LinkParams, {"rate": "1gbit", "delay": "50ms"}).to_profile()
    ceiling = tcp.auto_buffer_ceiling(profile)
    assert ceiling > 6291456  # 2 x 1 Gbit/s x 100 ms + queue: above Linux's default ceilings
    with emulated_link(profile, prefix=prefix) as link:
        seen = sysctl_in(link.client_ns)
        assert seen["net.ipv4.tcp_congestion_control"] == "cubic"
        assert seen["net.ipv4.tcp_sack"] == "1"
        assert seen["net.ipv4.tcp_rmem"].split()[-1] == str(ceiling)
        assert link.tcp["rto_min_ms"] == 200 and link.tcp["server"]["rto_min_source"] == "kernel default"


@pytest.mark.netns
def test_an_algorithm_the_kernel_lacks_is_refused_before_anything_is_built(netns_ok, prefix):
    from qoelab.emulation.topology import emulated_link

    missing = next(
        n for n in ("vegas", "htcp", "westwood", "illinois") if n not in tcp.available_algorithms()
    )
    profile = validate_params(LinkParams, {"tcp_cc": missing}).to_profile()
    refused = pytest.raises(tcp.TcpUnavailable, match=f"'{missing}' is not available in this worker's kernel")
    with refused, emulated_link(profile, prefix=prefix):
        pytest.fail("the link must not be built")
    assert leftovers(prefix) == {"namespaces": [], "devices": [], "processes": []}


def test_the_worker_advertises_each_algorithm_its_kernel_offers():
    offered = tcp.available_algorithms()
    assert "reno" in offered  # always built in
    assert tcp.capabilities() == {f"tcp_cc.{name}": True for name in offered}


def test_every_job_with_a_link_needs_its_algorithm_as_a_capability():
    from qoelab import jobs

    for name in ("link_check", "rd_qoe"):
        job = jobs.get(name)
        raw = {"protocol": "vnc"} if name == "rd_qoe" else {}
        params = validate_params(job.params, {**raw, "tcp_cc": "reno"})
        assert "tcp_cc.reno" in job.trial_requires(params)
        assert "tcp_cc.cubic" in job.trial_requires(validate_params(job.params, raw))


@pytest.mark.parametrize(
    ("raw", "field", "words"),
    [
        ({"tcp_cc": "Cubic!"}, "tcp_cc", "congestion control name"),
        ({"tcp_rmem_max": "4kb"}, "tcp_rmem_max", "at least 8kb"),
        ({"tcp_wmem_max": "2gb"}, "tcp_wmem_max", "at most 1gb"),
        ({"rto_min": "20s"}, "rto_min", "at most 10s"),
        ({"tcp_sack": "maybe"}, "tcp_sack", "boolean"),
    ],
)
def test_bad_tcp_settings_name_the_field_and_the_bound(raw, field, words):
    with pytest.raises(ParamsInvalid) as err:
        validate_params(LinkParams, raw)
    (e,) = err.value.errors
    assert e["field"] == field and words in e["message"], e


def test_the_link_check_uses_enough_tcp_streams_to_fill_a_path_one_capped_window_cannot():
    from types import SimpleNamespace

    from qoelab.emulation.verify import tcp_streams

    def streams(**raw: str) -> int:
        return tcp_streams(SimpleNamespace(profile=validate_params(LinkParams, raw).to_profile()))

    # Table 2.1's 512 KB at 200 Mbit/s, 40 ms RTT: a 1 MB path, 256 KB per window -> 6 streams.
    assert streams(rate="200mbit", delay="20ms", tcp_rmem_max="512kb", tcp_wmem_max="512kb") == 6
    assert streams(rate="40mbit", delay="5ms", tcp_rmem_max="512kb") == 1  # 50 KB: one window fills it
    assert streams(rate="200mbit", delay="20ms") == 1  # path-sized default buffers
    assert streams(rate="10gbit", delay="100ms", tcp_rmem_max="64kb") == 16  # capped


@pytest.mark.netns
def test_a_link_with_capped_buffers_passes_its_check_with_parallel_streams(userspace_ok, prefix):
    from qoelab.emulation.topology import emulated_link
    from qoelab.emulation.verify import verify_link

    raw = {"rate": "40mbit", "delay": "10ms", "tcp_rmem_max": "64kb", "tcp_wmem_max": "64kb"}
    with emulated_link(validate_params(LinkParams, raw).to_profile(), prefix=prefix) as link:
        result = verify_link(link, duration_s=2, loss_duration_s=1)
    assert result["method"]["tcp_streams"] > 1
    tcp = {c["name"]: c for c in result["checks"] if c["name"].startswith("tcp_")}
    assert tcp["tcp_down_bps"]["ok"] and tcp["tcp_up_bps"]["ok"], tcp
