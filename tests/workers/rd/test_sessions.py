"""Real remote-desktop sessions over an emulated link: VNC, SPICE (Xspice) and X2Go.

Each test runs a 2-page slow-motion trial and checks the capture itself (read with dpkt, not
with the analysis under test elsewhere): after every click the server sent payload to the client.
"""

from __future__ import annotations

import json
import socket

import dpkt
import pytest

from qoelab.rd.bench import BenchRequest, run_bench

pytestmark = [pytest.mark.netns, pytest.mark.slow]


def _payload_times(pcap, server_ip: str) -> list[float]:
    """Epoch times of server -> client TCP packets that carry payload."""
    server = socket.inet_aton(server_ip)
    times = []
    with open(pcap, "rb") as f:
        reader = dpkt.pcap.Reader(f)
        linktype = reader.datalink()
        for ts, frame in reader:
            try:
                if linktype == dpkt.pcap.DLT_EN10MB:
                    ip = dpkt.ethernet.Ethernet(frame).data
                else:  # raw IP on the userspace link's TUN device (IPv6 frames are skipped)
                    ip = dpkt.ip.IP(frame) if frame[0] >> 4 == 4 else None
            except dpkt.UnpackError:
                continue
            if not isinstance(ip, dpkt.ip.IP) or not isinstance(ip.data, dpkt.tcp.TCP):
                continue
            payload = len(ip) - ip.hl * 4 - ip.data.off * 4
            if ip.src == server and payload > 0:
                times.append(float(ts))
    return times


@pytest.mark.parametrize("protocol", ["vnc", "spice", "x2go"])
def test_a_two_page_session_captures_an_update_after_each_click(protocol, rd_link, tmp_path):
    result = run_bench(
        BenchRequest.across(
            rd_link, protocol, tmp_path, pages=2, quiet_s=0.3, pause_s=0.2, update_timeout_s=15
        )
    )
    pcap = tmp_path / "capture.pcap"
    doc = json.loads((tmp_path / "clicks.json").read_text())
    clicks = doc["clicks"]
    assert len(clicks) == 2
    assert [c["page"] for c in clicks] == [2, 1]
    assert not any(c["timed_out"] for c in clicks), clicks
    down = _payload_times(pcap, rd_link.server_ip)
    for i, click in enumerate(clicks):
        until = clicks[i + 1]["t"] if i + 1 < len(clicks) else float("inf")
        assert any(click["t"] < t < until for t in down), f"no server payload after click {i}"
        assert click["pixel_stable_t"] is not None and click["pixel_stable_t"] > click["t"]
    assert str(pcap) in result["artifacts"]
    assert result["timings"]["setup_s"] > 0 and result["timings"]["teardown_s"] >= 0
    assert result["mapping"]["used"] == "visual" and result["mapping"]["scale"] == pytest.approx(1, abs=0.05)
    if result["updates"] is not None:
        assert len(result["updates"]) == 2
        assert all(u["bytes_down"] > 0 for u in result["updates"])
