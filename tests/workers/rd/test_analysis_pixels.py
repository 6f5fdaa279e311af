"""Pixel time beside packet time: an update whose page arrives after a silent gap (X2Go at 1 Mbit/s)."""

from __future__ import annotations

import importlib.util
import pathlib
import sys

from qoelab.rd.analysis import analyze
from qoelab.rd.clicks import Click

_spec = importlib.util.spec_from_file_location("rd_test_pcaps", pathlib.Path(__file__).with_name("pcaps.py"))
pcaps = sys.modules.setdefault("rd_test_pcaps", importlib.util.module_from_spec(_spec))
_spec.loader.exec_module(pcaps)

US = 1e-6


def _gap_capture(tmp_path, gap_s: float = 4.0):
    """Click at 1.0; a 400-byte immediate reply at 1.03; silence; the page (30 kB) from 1.03 + gap."""
    cap = pcaps.Capture()
    conn = cap.conn(40001)
    conn.handshake(0.5)
    conn.up(1.002, 40)
    conn.down(1.030, 400)
    page_times = [1.03 + gap_s + 0.01 * i for i in range(21)]
    for t in page_times:
        conn.down(t, 1448)
    conn.ack(page_times[-1] + 0.0001, "up")
    return cap.write(tmp_path / "gap.pcap"), page_times


def test_an_update_is_extended_to_the_burst_running_when_the_screen_last_changed(tmp_path):
    pcap, page_times = _gap_capture(tmp_path)
    clicks = [Click(index=0, t=pcaps.T0 + 1.0, pixel_stable_t=pcaps.T0 + page_times[-1] + 0.04)]
    u = analyze(pcap, clicks, quiet_s=0.5).updates[0]
    assert u.extended_to_pixels and not u.timed_out
    assert abs(u.T_s - (page_times[-1] - 1.002)) < US
    assert u.bytes_down == 400 + 21 * 1448


def test_without_pixel_time_or_when_disabled_the_packet_burst_alone_counts(tmp_path):
    pcap, page_times = _gap_capture(tmp_path)
    plain = analyze(pcap, [Click(index=0, t=pcaps.T0 + 1.0)], quiet_s=0.5).updates[0]
    clicks = [Click(index=0, t=pcaps.T0 + 1.0, pixel_stable_t=pcaps.T0 + page_times[-1] + 0.04)]
    off = analyze(pcap, clicks, quiet_s=0.5, extend_to_pixels=False).updates[0]
    for u in (plain, off):
        assert not u.extended_to_pixels
        assert abs(u.T_s - (1.030 - 1.002)) < US and u.bytes_down == 400


def test_a_screen_change_within_the_quiet_time_of_the_burst_does_not_extend_it(tmp_path):
    # The screen is seen to settle a little after the last packet: that is the burst itself.
    pcap, page_times = _gap_capture(tmp_path, gap_s=4.0)
    clicks = [Click(index=0, t=pcaps.T0 + 1.0, pixel_stable_t=pcaps.T0 + 1.03 + 0.2)]
    u = analyze(pcap, clicks, quiet_s=0.5).updates[0]
    assert not u.extended_to_pixels and u.bytes_down == 400
