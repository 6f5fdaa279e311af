"""Paper 002's TCP knobs (notes ``seed-thinclient-tcp.md`` §7.3) through the one TCP mechanism: set in
both namespaces, read back by ``sysctl`` itself and by the link, left alone when not asked for, the
quickack route only on the client; and per-namespace TCP counters that move with a real transfer."""

from __future__ import annotations

import contextlib
import socket
import subprocess
import threading
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from qoelab.emulation import tcp
from qoelab.emulation.profile import LinkProfile
from qoelab.emulation.tcp import TcpSettings
from qoelab.errors import ParameterError

if TYPE_CHECKING:
    from qoelab.emulation.topology import EmulatedLink

# Far from the kernel defaults (1, 3, 2, 1, 0, 1, 1, UINT_MAX) so a knob that did not take shows.
PAPER = TcpSettings(
    cc="reno",
    sack=False,
    rto_min_s=0.05,
    recovery=0,
    early_retrans=0,
    frto=0,
    timestamps=0,
    thin_linear_timeouts=True,
    slow_start_after_idle=False,
    autocorking=False,
    notsent_lowat=16384,
    no_metrics_save=True,  # thesis 001's, set here too so every knob is tested in one place
    quickack=True,
)
EXPECTED = {"recovery": 0, "early_retrans": 0, "frto": 0, "timestamps": 0, "thin_linear_timeouts": True,
            "slow_start_after_idle": False, "autocorking": False, "notsent_lowat": 16384,
            "no_metrics_save": True}  # fmt: skip
SYSCTLS = [f"net.ipv4.{k.sysctl}" for k in tcp.KNOBS]


def sysctl(ns: str | None = None) -> dict[str, str]:
    """What ``sysctl`` itself prints for the knobs, in namespace ``ns`` (None: the host's)."""
    argv = ["sysctl", *SYSCTLS] if ns is None else ["ip", "netns", "exec", ns, "sysctl", *SYSCTLS]
    out = subprocess.run(argv, capture_output=True, text=True, check=True).stdout
    return dict(line.split(" = ", 1) for line in out.splitlines())


def route(ns: str, dst: str) -> str:
    return subprocess.run(["ip", "-n", ns, "route", "show", dst], capture_output=True, text=True,
                          check=True).stdout  # fmt: skip


def link_with(settings: TcpSettings, prefix: str) -> contextlib.AbstractContextManager:
    from qoelab.emulation.topology import PLUMBING_BACKEND, emulated_link

    # The plain veth backend: the knobs live in the namespaces, whatever shapes the link.
    return emulated_link(LinkProfile.parse(tcp=settings), prefix=prefix, backend=PLUMBING_BACKEND)


@pytest.mark.netns
def test_every_knob_is_set_in_both_namespaces_read_back_and_the_host_keeps_its_own(netns_ok, prefix):
    host = sysctl()
    with link_with(PAPER, prefix) as link:
        for side, ns in (("client", link.client_ns), ("server", link.server_ns)):
            seen = sysctl(ns)
            for knob in tcp.KNOBS:
                assert seen[f"net.ipv4.{knob.sysctl}"] == str(int(EXPECTED[knob.attr])), (side, knob)
            got = link.tcp[side]
            assert {k: got[k] for k in EXPECTED} == EXPECTED
            assert got["cc"] == "reno" and got["sack"] is False and got["rto_min_ms"] == 50
        assert {k: link.tcp[k] for k in EXPECTED} == EXPECTED and link.tcp["quickack"] is True
        assert link.tcp["requested"] == PAPER.to_json()
        # Each sysctl is per namespace on this kernel: writing it in two namespaces left the host's.
        assert sysctl() == host


@pytest.mark.netns
def test_quickack_is_on_the_clients_route_to_the_server_with_rto_min_and_not_on_the_servers(netns_ok, prefix):
    with link_with(PAPER, prefix) as link:
        client_route = route(link.client_ns, link.server_ip)
        assert "quickack 1" in client_route and "rto_min 50ms" in client_route, client_route
        server_route = route(link.server_ns, link.client_ip)
        assert "quickack" not in server_route and "rto_min 50ms" in server_route, server_route
        assert link.tcp["client"]["quickack"] is True and link.tcp["server"]["quickack"] is False


@pytest.mark.netns
def test_quickack_alone_installs_the_route_without_an_rto_floor(netns_ok, prefix):
    with link_with(TcpSettings(quickack=True), prefix) as link:
        client_route = route(link.client_ns, link.server_ip)
        assert "quickack 1" in client_route and "rto_min" not in client_route, client_route
        assert link.tcp["client"]["rto_min_source"] == "kernel default"


@pytest.mark.netns
def test_knobs_left_unset_are_read_back_but_keep_a_fresh_namespaces_values(netns_ok, prefix):
    fresh = f"{prefix}n"  # the prefix fixture removes it with the link's namespaces
    subprocess.run(["ip", "netns", "add", fresh], check=True)
    defaults = sysctl(fresh)
    with link_with(TcpSettings(), prefix) as link:
        for side, ns in (("client", link.client_ns), ("server", link.server_ns)):
            assert sysctl(ns) == defaults
            got = link.tcp[side]
            for knob in tcp.KNOBS:
                assert got[knob.attr] == knob.decode(defaults[f"net.ipv4.{knob.sysctl}"]), knob
            assert got["quickack"] is False
        assert "quickack" not in route(link.client_ns, link.server_ip)


def test_unset_knobs_are_not_written_and_set_ones_are():
    profile = LinkProfile.parse()
    assert not {k.sysctl for k in tcp.KNOBS} & set(tcp.sysctl_values(TcpSettings(), profile))
    values = tcp.sysctl_values(PAPER, profile)
    assert {k.sysctl: values[k.sysctl] for k in tcp.KNOBS} == {
        "tcp_recovery": "0", "tcp_early_retrans": "0", "tcp_frto": "0", "tcp_timestamps": "0",
        "tcp_thin_linear_timeouts": "1", "tcp_slow_start_after_idle": "0", "tcp_autocorking": "0",
        "tcp_notsent_lowat": "16384", "tcp_no_metrics_save": "1",
    }  # fmt: skip


def test_mismatches_check_only_the_knobs_that_were_set_and_quickack_only_on_the_client():
    profile = LinkProfile.parse()
    base = {"cc": "cubic", "sack": True, "rmem": None, "wmem": None}
    want = tcp.sysctl_values(TcpSettings(), profile)
    base["rmem"], base["wmem"] = ([int(x) for x in want[f"tcp_{k}"].split()] for k in ("rmem", "wmem"))
    odd = {**base, "recovery": 5, "frto": 1, "quickack": False}
    assert tcp.mismatches(TcpSettings(), profile, odd) == []
    asked = TcpSettings(frto=0, quickack=True)
    assert tcp.mismatches(asked, profile, odd) == [
        "tcp_frto is 1, not 0",
        "the route to the server lacks quickack 1",
    ]
    assert tcp.mismatches(asked, profile, odd, side="server") == ["tcp_frto is 1, not 0"]


@pytest.mark.parametrize(
    ("given", "field", "words"),
    [
        ({"recovery": 8}, "tcp_recovery", "from 0 to 7"),
        ({"recovery": -1}, "tcp_recovery", "1 = RACK"),
        ({"early_retrans": 5}, "tcp_early_retrans", "from 0 to 4"),
        ({"frto": 3}, "tcp_frto", "from 0 to 2"),
        ({"frto": True}, "tcp_frto", "an integer"),
        ({"timestamps": 3}, "tcp_timestamps", "from 0 to 2"),
        ({"thin_linear_timeouts": 1}, "tcp_thin_linear_timeouts", "boolean"),
        ({"slow_start_after_idle": "no"}, "tcp_slow_start_after_idle", "boolean"),
        ({"autocorking": 0}, "tcp_autocorking", "boolean"),
        ({"notsent_lowat": 0}, "tcp_notsent_lowat", "from 1 to 4294967295 bytes"),
        ({"notsent_lowat": 2**32}, "tcp_notsent_lowat", "from 1 to 4294967295 bytes"),
        ({"quickack": None}, "tcp_quickack", "boolean"),
    ],
)
def test_bad_knob_values_name_the_field_and_the_bound(given, field, words):
    with pytest.raises(ParameterError) as err:
        TcpSettings(**given).validate()
    assert err.value.field == field and words in err.value.message, err.value
    with pytest.raises(ParameterError):
        TcpSettings.from_json({**TcpSettings().to_json(), **given})


def test_the_settings_round_trip_and_results_stored_before_the_knobs_still_load():
    assert TcpSettings.from_json(PAPER.to_json()) == PAPER
    old = {"cc": "reno", "sack": False, "rmem_max": None, "wmem_max": 524288, "rto_min_s": 0.05}
    loaded = TcpSettings.from_json(old)
    assert loaded == TcpSettings(cc="reno", sack=False, wmem_max=524288, rto_min_s=0.05)
    assert loaded.recovery is None and loaded.notsent_lowat is None and loaded.quickack is False
    profile = LinkProfile.parse(tcp=PAPER)
    assert LinkProfile.from_json(profile.to_json()).tcp == PAPER


def test_a_sysctl_a_namespace_lacks_is_refused_naming_it(monkeypatch, tmp_path):
    # /proc/sys stand-in: tcp_thin_dupack was removed in 2017 and tcp_mem is host-wide, so a
    # namespace has neither; the refusal must name the field and say why.
    monkeypatch.setattr(tcp, "_sysctl_path", lambda key: tmp_path / key)
    monkeypatch.setattr("qoelab.emulation.system.in_netns", lambda _ns: contextlib.nullcontext())
    monkeypatch.setattr(tcp, "sysctl_values", lambda *_a: {"tcp_thin_dupack": "1"})
    with pytest.raises(ParameterError, match="does not exist in a network namespace") as err:
        tcp.apply("qltx", TcpSettings(), LinkProfile.parse())
    assert err.value.field == "tcp_thin_dupack"


def test_a_write_that_reaches_the_hosts_value_is_put_back_and_refused(monkeypatch, tmp_path):
    # A kernel that kept tcp_autocorking host-wide but let a namespace write it: here the
    # "namespace" and the host share one file, as they would share the kernel's variable.
    (tmp_path / "tcp_autocorking").write_text("1\n")
    monkeypatch.setattr(tcp, "_sysctl_path", lambda key: tmp_path / key)
    monkeypatch.setattr("qoelab.emulation.system.in_netns", lambda _ns: contextlib.nullcontext())
    monkeypatch.setattr(tcp, "sysctl_values", lambda *_a: {"tcp_autocorking": "0"})
    with pytest.raises(ParameterError, match="not per network namespace") as err:
        tcp.apply("qltx", TcpSettings(autocorking=False), LinkProfile.parse())
    assert err.value.field == "tcp_autocorking"
    assert (tmp_path / "tcp_autocorking").read_text() == "1\n"


def test_counter_delta_takes_the_named_keys_and_leaves_out_ones_the_kernel_lacks():
    before = {"TcpOutSegs": 10, "TcpRetransSegs": 1, "TcpExtTCPTimeouts": 0}
    after = {"TcpOutSegs": 25, "TcpRetransSegs": 1, "TcpExtTCPTimeouts": 2, "TcpExtTCPLossProbes": 3}
    assert tcp.counter_delta(before, after, keys=("TcpOutSegs", "TcpExtTCPTimeouts", "TcpExtNoSuch")) == {
        "TcpOutSegs": 15, "TcpExtTCPTimeouts": 2}  # fmt: skip
    assert tcp.counter_delta(before, after, keys=None)["TcpExtTCPLossProbes"] == 3
    assert set(tcp.counter_delta(before, after)) == set(after) & set(tcp.COUNTER_KEYS)


def _transfer(link: EmulatedLink, size: int) -> int:
    """Send ``size`` bytes server -> client over the link; return what the client received."""
    from qoelab.emulation.system import in_netns

    with in_netns(link.server_ns):  # a socket stays in the namespace it was made in
        listener = socket.create_server((link.server_ip, 0))
    port = listener.getsockname()[1]
    errors: list[BaseException] = []

    def serve() -> None:
        try:
            conn, _ = listener.accept()
            with conn:
                conn.sendall(b"x" * size)
        except BaseException as err:  # reported by the test thread
            errors.append(err)

    sender = threading.Thread(target=serve, daemon=True)
    sender.start()
    received = 0
    with listener:
        with in_netns(link.client_ns):
            client = socket.create_connection((link.server_ip, port), timeout=30)
        with client:
            while chunk := client.recv(1 << 16):  # until the server closes: all bytes are in
                received += len(chunk)
    sender.join(timeout=30)
    assert not errors and not sender.is_alive(), errors
    return received


@pytest.mark.netns
def test_counters_are_per_namespace_and_a_real_transfer_moves_the_servers_out_segments(netns_ok, prefix):
    size = 8 * 2**20
    with link_with(TcpSettings(), prefix) as link:
        server_before = tcp.counters(link.server_ns)
        assert set(tcp.COUNTER_KEYS) <= set(server_before), set(tcp.COUNTER_KEYS) - set(server_before)
        assert server_before["TcpOutSegs"] == 0  # a namespace starts with its own zeroed MIBs
        host_before = tcp.counters(None)
        assert _transfer(link, size) == size
        server = tcp.counter_delta(server_before, tcp.counters(link.server_ns))
        host = tcp.counter_delta(host_before, tcp.counters(None))
    # One segment per MSS at most (OutSegs counts GSO segments one by one): the 8 MiB are there.
    mss = 1500 - 40 - 12  # the link's MTU, timestamps on by default
    assert server["TcpOutSegs"] >= size // mss, server
    # The host counts only its own traffic (none of ours): well below what the transfer sent.
    assert host["TcpOutSegs"] < server["TcpOutSegs"] // 10, (host, server)
    assert set(server) == set(tcp.COUNTER_KEYS)


def test_counters_parse_the_two_line_mib_format(tmp_path: Path):
    (tmp_path / "snmp").write_text("Ip: Forwarding\nIp: 1\nTcp: RtoMin OutSegs MaxConn\nTcp: 200 42 -1\n")
    assert tcp._read_mib(tmp_path / "snmp", ("Tcp",)) == {
        "TcpRtoMin": 200,
        "TcpOutSegs": 42,
        "TcpMaxConn": -1,
    }
