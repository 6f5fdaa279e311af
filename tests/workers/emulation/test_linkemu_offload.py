"""linkemu's offload mode (``LinkProfile.offload``, linkemu ``--offload 1``): TUN devices with
virtio-net headers and TCP segmentation offload; super-packets are cut into wire-sized segments
that meet the link one by one, and segments due together leave as one write.

On real namespaces with real TCP: the byte stream arrives intact over IPv4 and IPv6 (the cut and
merged headers are right, or TCP would stall or corrupt), super-packets really were read and
written, every record is one wire-sized segment, and the rate stage and loss still act per segment
(the FIFO serialisation rule holds between every two consecutive segments; the loss ratio is
Bernoulli's over segments).
"""

from __future__ import annotations

import hashlib
import socket
import subprocess
import threading
from functools import partial
from pathlib import Path

import numpy as np
import pytest
from scipy.stats import binomtest

from qoelab.emulation import records
from qoelab.emulation.linkparams import LinkParams
from qoelab.emulation.profile import LinkProfile
from qoelab.emulation.system import in_netns
from qoelab.emulation.topology import emulated_link
from qoelab.emulation.userspace import OFFLOAD_BATCH_US, UserspaceLink

PORT = 5201
MTU = 1500
V6 = ("fd00:51::1", "fd00:51::2")  # client, server


def _payload(n: int) -> bytes:
    return np.random.default_rng(7).integers(0, 256, n, dtype=np.uint8).tobytes()


def _add_v6(link) -> None:
    for ns, ifname, addr in (
        (link.client_ns, link.client_if, V6[0]),
        (link.server_ns, link.server_if, V6[1]),
    ):
        subprocess.run(["ip", "-n", ns, "addr", "add", f"{addr}/64", "dev", ifname, "nodad"], check=True)


def _stream_down(
    link, data: bytes, family: int, timeout: float = 60.0, client_ns: str | None = None
) -> bytes:
    """Send ``data`` from the server namespace to the client namespace (or ``client_ns``) over TCP;
    what arrived."""
    family_name = socket.AF_INET6 if family == 6 else socket.AF_INET
    server_ip = V6[1] if family == 6 else link.server_ip
    with in_netns(link.server_ns):
        lsock = socket.socket(family_name, socket.SOCK_STREAM)
        lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        lsock.bind((server_ip, PORT))
        lsock.listen(1)
    lsock.settimeout(timeout)
    failure: list[BaseException] = []

    def serve() -> None:
        try:
            conn, _ = lsock.accept()
            with conn:
                conn.sendall(data)
        except BaseException as err:  # reported by the main thread
            failure.append(err)

    sender = threading.Thread(target=serve, daemon=True)
    sender.start()
    with in_netns(client_ns or link.client_ns):
        csock = socket.socket(family_name, socket.SOCK_STREAM)
    got = bytearray()
    try:
        csock.settimeout(timeout)
        csock.connect((server_ip, PORT))
        while len(got) < len(data):
            chunk = csock.recv(1 << 20)
            if not chunk:
                break
            got += chunk
    finally:
        csock.close()
        sender.join(timeout)
        lsock.close()
    assert not failure, f"the sender failed: {failure[0]!r}"
    return bytes(got)


def test_offload_is_a_link_parameter_that_reaches_linkemu() -> None:
    profile = LinkParams(delay="5ms", link_offload=True).to_profile()
    argv = UserspaceLink("a", "b", "ta", "tb", profile).command()
    assert profile.offload is True
    assert argv[argv.index("--offload") + 1] == "1"
    assert argv[argv.index("--batch-us") + 1] == str(OFFLOAD_BATCH_US)
    assert LinkProfile.from_json(profile.to_json()) == profile
    assert "offload" not in LinkParams(delay="5ms").to_profile().to_json(), "older profiles keep their JSON"
    plain = UserspaceLink("a", "b", "ta", "tb", LinkParams(delay="5ms").to_profile()).command()
    assert "--offload" not in plain and "--batch-us" not in plain, (
        "off unless asked: captures stay wire-sized"
    )


@pytest.mark.netns
@pytest.mark.usefixtures("linkemu_ok")
@pytest.mark.parametrize("family", [4, 6])
def test_a_tcp_stream_survives_cutting_and_merging(prefix: str, tmp_path: Path, family: int) -> None:
    data = _payload(6 << 20)
    profile = LinkProfile.parse(delay="5ms", offload=True)
    rec = tmp_path / "down.rec"
    with emulated_link(profile, prefix=prefix, backend="userspace", packet_records=rec) as link:
        assert link.describe()["offload"] is True
        if family == 6:
            _add_v6(link)
        got = _stream_down(link, data, family)
        st = link.emulator.stats()["down"]
    assert hashlib.sha256(got).hexdigest() == hashlib.sha256(data).hexdigest(), (
        f"{len(got)} of {len(data)} bytes arrived, or they differ"
    )
    assert st["offload"] == 1
    assert st["rx_super"] > 0, "the server's TCP handed over no super-packet: TSO is not on the device"
    assert st["tx_super"] > 0, "segments due together were not written as one super-packet"
    assert st["dropped_oversize"] == 0 and st["tx_errors"] == 0
    recs = records.read(rec)
    data_recs = recs[recs["payload_len"] > 0]
    assert np.all(recs["ip_len"] <= MTU), "a record is not one wire-sized segment"
    assert np.all(data_recs["fate"] == records.FORWARDED)
    assert int(data_recs["payload_len"].astype(np.int64).sum()) >= len(data)
    assert len(data_recs) >= len(data) // (MTU - 40), "fewer records than the stream's segments"


@pytest.mark.netns
@pytest.mark.usefixtures("linkemu_ok")
def test_rate_and_loss_still_act_per_segment(prefix: str, tmp_path: Path) -> None:
    rate, loss_pct = 20e6, 2.0
    data = _payload(3 << 20)
    profile = LinkProfile.parse(
        rate="20mbit", delay="2ms", loss=f"{loss_pct}%", up_loss="0%", limit="2000pkt", offload=True
    )
    rec = tmp_path / "down.rec"
    with emulated_link(profile, prefix=prefix, backend="userspace", packet_records=rec) as link:
        got = _stream_down(link, data, 4, timeout=120.0)
        st = link.emulator.stats()["down"]
    assert got == data, "TCP recovered every lost segment through the offload path"
    assert st["rx_super"] > 0
    recs = records.read(rec)
    seg = recs[recs["payload_len"] > 0]
    assert np.all(seg["ip_len"] <= MTU)
    # Loss: one Bernoulli draw per segment, not per super-packet.
    lost = int(np.count_nonzero(seg["fate"] == records.LOSS))
    ci = binomtest(lost, len(seg), loss_pct / 100).proportion_ci(confidence_level=0.999)
    assert ci.low <= loss_pct / 100 <= ci.high, f"{lost} of {len(seg)} segments lost"
    # Rate: in the FIFO, each packet starts when it arrives or when the one before has been sent,
    # so consecutive forwarded packets are at least one serialisation apart, exactly so when the
    # later one had to wait.
    fwd = recs[recs["fate"] == records.FORWARDED]
    fwd = fwd[np.argsort(fwd["start_ns"], kind="stable")]
    start = fwd["start_ns"].astype(np.int64)
    need = np.rint(fwd["ip_len"].astype(np.float64) * 8e9 / rate).astype(np.int64)
    gap = start[1:] - start[:-1]
    assert np.all(gap >= need[:-1] - 1), "two segments overlapped on the link"
    waited = start[1:] > fwd["arrival_ns"][1:].astype(np.int64)
    assert np.count_nonzero(waited) > len(fwd) // 2, "the link was never the bottleneck"
    assert np.all(np.abs(gap[waited] - need[:-1][waited]) <= 1), "a waiting segment did not start on time"


@pytest.mark.netns
@pytest.mark.usefixtures("linkemu_ok")
@pytest.mark.parametrize("family", [4, 6])
def test_merged_packets_are_right_where_the_kernel_must_finish_them(prefix: str, family: int) -> None:
    """The client namespace routes the stream on to a third namespace over a veth pair whose
    checksum and segmentation offloads are off, so the kernel cuts every merged super-packet by its
    headers and completes every checksum from the pseudo-header sum linkemu left: a wrong length,
    sequence number or sum there and the far end drops the packets and the stream stalls."""
    far = prefix + "f"
    far_net = ("10.77.0.1", "10.77.0.2", 24) if family == 4 else ("fd00:77::1", "fd00:77::2", 64)
    data = _payload(4 << 20)
    with emulated_link(
        LinkProfile.parse(delay="3ms", offload=True), prefix=prefix, backend="userspace"
    ) as link:
        if family == 6:
            _add_v6(link)
        server_ip = V6[1] if family == 6 else link.server_ip
        run = partial(subprocess.run, check=True, capture_output=True)
        try:
            run(["ip", "netns", "add", far])
            run(["ip", "-n", link.client_ns, "link", "add", prefix + "va", "type", "veth", "peer", "name",
                 prefix + "vb", "netns", far])  # fmt: skip
            for ns, dev, addr in (
                (link.client_ns, prefix + "va", far_net[0]),
                (far, prefix + "vb", far_net[1]),
            ):
                run(["ip", "netns", "exec", ns, "ethtool", "-K", dev, "tx", "off", "tso", "off", "gso", "off",
                     "gro", "off"])  # fmt: skip
                run(
                    [
                        "ip",
                        "-n",
                        ns,
                        "addr",
                        "add",
                        f"{addr}/{far_net[2]}",
                        "dev",
                        dev,
                        *(["nodad"] * (family == 6)),
                    ]
                )
                run(["ip", "-n", ns, "link", "set", dev, "up"])
            run(["ip", "-n", far, "link", "set", "lo", "up"])
            run(["ip", "-n", far, "route", "add", "default", "via", far_net[0]])
            sysctl = "net.ipv4.ip_forward=1" if family == 4 else "net.ipv6.conf.all.forwarding=1"
            run(["ip", "netns", "exec", link.client_ns, "sysctl", "-qw", sysctl])
            net = f"{far_net[0].rsplit('.', 1)[0]}.0/24" if family == 4 else "fd00:77::/64"
            run(["ip", "-n", link.server_ns, "route", "add", net, "dev", link.server_if])
            got = _stream_down(link, data, family, client_ns=far)
            st = link.emulator.stats()["down"]
            bad_sums = _tcp_counter(far, "InCsumErrors")
        finally:
            subprocess.run(["ip", "netns", "delete", far], check=False, capture_output=True)
    assert server_ip and got == data, f"{len(got)} of {len(data)} bytes arrived, or they differ"
    # Retransmissions (sent whole, never cut) would get a stream with bad sums through, slowly.
    assert bad_sums == 0, f"the far end dropped {bad_sums} segments with a bad TCP checksum"
    assert st["rx_super"] > 0 and st["tx_super"] > 0, st


def _tcp_counter(ns: str, name: str) -> int:
    """A TCP counter of /proc/net/snmp in namespace ``ns`` (IPv4 and IPv6 share them)."""
    out = subprocess.run(["ip", "netns", "exec", ns, "cat", "/proc/net/snmp"], check=True,
                         capture_output=True, text=True).stdout  # fmt: skip
    head, values = [line.split()[1:] for line in out.splitlines() if line.startswith("Tcp:")]
    return int(values[head.index(name)])
