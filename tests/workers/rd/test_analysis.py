"""The slow-motion packet analysis on synthetic captures whose timings and sizes are known exactly."""

from __future__ import annotations

import importlib.util
import json
import math
import pathlib
import subprocess
import sys

import dpkt
import pytest
from scipy import stats

from qoelab.errors import ParameterError
from qoelab.rd.analysis import CaptureError, Endpoint, Stat, analyze, parse_endpoint, read_packets
from qoelab.rd.clicks import Click, clicks_from_json, load_clicks, save_clicks

_spec = importlib.util.spec_from_file_location("rd_test_pcaps", pathlib.Path(__file__).with_name("pcaps.py"))
pcaps = sys.modules.setdefault("rd_test_pcaps", importlib.util.module_from_spec(_spec))
_spec.loader.exec_module(pcaps)

US = 1e-6


def near(a: float | None, b: float) -> bool:
    return a is not None and abs(a - b) < US


def click(index: int, t: float, **kw) -> Click:
    return Click(index=index, t=pcaps.T0 + t, **kw)


def three_updates(cap, conn) -> list[tuple[float, float, int]]:
    """Three click→response exchanges on one connection; returns (start, end, X) per update."""
    truth = []
    for k, base in enumerate((1.0, 3.0, 5.0)):
        conn.up(base + 0.001, 12)  # pointer move
        conn.up(base + 0.002, 8)  # button press + release: the last input packet
        conn.ack(base + 0.0025, "down")  # server ACK only: no payload, not a response
        sizes = [1448, 1448, 700 + 100 * k]
        times = [base + 0.030, base + 0.031, base + 0.045 + 0.01 * k]
        for t, n in zip(times, sizes, strict=True):
            conn.down(t, n)
            conn.ack(t + 0.0001, "up")
        truth.append((base + 0.002, times[-1], sum(sizes)))
    return truth


def test_it_measures_each_click_of_a_single_connection_exactly(tmp_path):
    cap = pcaps.Capture()
    conn = cap.conn(40001)
    conn.handshake(0.5)
    truth = three_updates(cap, conn)
    clicks = [click(i, t, page=i + 1, ratio=0.25 * i) for i, t in enumerate((0.999, 2.999, 4.999))]
    res = analyze(cap.write(tmp_path / "one.pcap"), clicks)
    assert res.mode == "clicks" and len(res.updates) == 3
    assert res.server == Endpoint("10.0.0.2") and res.client == Endpoint("10.0.0.1")
    for u, (start, end, x) in zip(res.updates, truth, strict=True):
        assert near(u.start, pcaps.T0 + start) and near(u.end, pcaps.T0 + end)
        assert near(u.T_s, end - start)
        assert u.bytes_down == u.bytes_down_unique == x
        assert u.bytes_up == 20 and u.packets_up == 4  # two inputs, two ACKs (the last comes after end)
        assert u.packets_down == 4 and u.connections == 1 and not u.timed_out  # 3 segments, 1 ACK
        assert u.rate_bps == pytest.approx(8 * x / (end - start), rel=1e-5)
    assert [u.page for u in res.updates] == [1, 2, 3] and res.updates[2].ratio == 0.5
    assert res.summary.n == 3 and res.summary.n_timed_out == 0
    ts = [end - start for start, end, _ in truth]
    assert res.summary.T_s.mean == pytest.approx(sum(ts) / 3, abs=US)


def test_it_counts_every_connection_between_the_hosts(tmp_path):
    # SPICE-like: input on the inputs channel, the picture on display, a cursor update on cursor.
    cap = pcaps.Capture()
    inputs, display, cursor = cap.conn(40001, 5900), cap.conn(40002, 5900), cap.conn(40003, 5900)
    main = cap.conn(40004, 5900)
    for c in (inputs, display, cursor, main):
        c.handshake(0.1)
    inputs.up(1.001, 6)
    inputs.up(1.002, 6)
    cursor.down(1.010, 64)
    display.down(1.020, 1448)
    display.down(1.021, 1448)
    inputs.down(1.022, 4)  # the inputs channel's own acknowledgement message
    display.down(1.080, 999)
    main.ack(1.05, "up")
    res = analyze(cap.write(tmp_path / "spice.pcapng", fmt="pcapng"), [click(0, 1.0)])
    (u,) = res.updates
    assert near(u.T_s, 1.080 - 1.002)
    assert u.bytes_down == 64 + 1448 * 2 + 4 + 999 and u.connections == 3
    assert res.server == Endpoint("10.0.0.2")


def test_it_counts_retransmitted_bytes_in_x_and_reports_unique_bytes_without_them(tmp_path):
    cap = pcaps.Capture()
    conn = cap.conn(40001)
    conn.handshake(0.1)
    conn.up(1.001, 10)
    conn.down(1.010, 1000)
    conn.down(1.011, 1000)
    lost = conn.skip("down", 1000)  # lost upstream of the capture point
    conn.down(1.013, 1000)
    conn.resend(1.020, "down", conn.sent["down"][1])  # spurious: its bytes were seen already
    conn.resend(1.060, "down", lost)  # fills the hole: first time these bytes are seen
    conn.up(1.030, 3)  # a client message during the update is not a new input
    conn.resend(1.031, "up", conn.sent["up"][-1])
    res = analyze(cap.write(tmp_path / "retx.pcap"), [click(0, 1.0)])
    (u,) = res.updates
    assert near(u.T_s, 1.060 - 1.001)
    assert u.bytes_down == 5000 and u.bytes_down_unique == 4000
    assert u.retransmissions_down == 2 and u.retransmissions_up == 1
    assert u.bytes_up == 10 + 3 + 3


def test_a_spurious_retransmission_after_the_last_new_byte_does_not_end_the_update(tmp_path):
    cap = pcaps.Capture()
    conn = cap.conn(40001)
    conn.up(1.001, 10)
    conn.down(1.010, 1000)
    conn.down(1.020, 1000)
    conn.resend(1.250, "down", conn.sent["down"][1])  # tail-loss probe: the bytes had arrived
    (u,) = analyze(cap.write(tmp_path / "tlp.pcap"), [click(0, 1.0)]).updates
    assert near(u.T_s, 0.019) and u.bytes_down == 2000 and u.retransmissions_down == 0


def test_it_records_a_click_without_response_as_timed_out(tmp_path):
    cap = pcaps.Capture()
    conn = cap.conn(40001)
    conn.handshake(0.1)
    conn.up(1.001, 8)
    conn.down(1.050, 3000)
    conn.up(3.001, 8)  # the server never answers this one
    conn.up(6.001, 8)
    conn.down(6.020, 500)  # answered, but keeps sending past the 2 s timeout
    for k in range(1, 40):
        conn.down(6.020 + 0.1 * k, 500)
    res = analyze(
        cap.write(tmp_path / "timeout.pcap"), [click(0, 1.0), click(1, 3.0), click(2, 6.0)], timeout_s=2.0
    )
    first, silent, runaway = res.updates
    assert near(first.T_s, 0.049) and not first.timed_out
    assert silent.timed_out and silent.T_s is None and silent.rate_bps is None
    assert "no response" in silent.reason and silent.click_time == pcaps.T0 + 3.0
    assert runaway.timed_out and runaway.T_s is None and "timeout" in runaway.reason
    assert runaway.bytes_down > 0  # what arrived before the timeout is kept
    assert res.summary.n == 3 and res.summary.n_timed_out == 2 and res.summary.T_s.n == 1


def test_it_marks_the_update_timed_out_when_the_driver_gave_up(tmp_path):
    cap = pcaps.Capture()
    conn = cap.conn(40001)
    conn.up(1.001, 8)
    conn.down(1.050, 3000)
    (u,) = analyze(cap.write(tmp_path / "driver.pcap"), [click(0, 1.0, timed_out=True)]).updates
    assert u.timed_out and u.T_s is None and "driver" in u.reason and u.bytes_down == 3000


def test_it_ignores_keepalives_and_pure_acks_for_start_and_end(tmp_path):
    cap = pcaps.Capture()
    conn = cap.conn(40001)
    conn.handshake(0.1)
    conn.keepalive(0.9, "up")
    conn.up(1.002, 8)
    conn.keepalive(1.010, "up", with_byte=True)  # a probe with one garbage byte is not an input
    conn.ack(1.011, "down")
    conn.down(1.030, 2000)
    conn.down(1.040, 2000)
    conn.keepalive(1.2, "down", with_byte=True)  # late server keep-alive must not extend the update
    conn.ack(1.3, "down")
    conn.keepalive(1.4, "up")
    res = analyze(cap.write(tmp_path / "ka.pcap"), [click(0, 1.0)])
    (u,) = res.updates
    assert near(u.start, pcaps.T0 + 1.002) and near(u.end, pcaps.T0 + 1.040)
    assert u.bytes_down == 4000 and u.retransmissions_up == 0


@pytest.mark.parametrize(
    ("fmt", "linktype"),
    [("pcap", 1), ("pcapng", 1), ("pcap", 101), ("pcapng", 12), ("pcap", 14), ("pcap", 113), ("pcap", 276),
     ("pcapng", 276), ("pcap", 0)],
)  # fmt: skip
@pytest.mark.parametrize("hosts", [("10.9.0.1", "10.9.0.2"), ("fd00:77::1", "fd00:77::2")])
def test_it_reads_every_supported_link_type_and_ip_version(tmp_path, fmt, linktype, hosts):
    cap = pcaps.Capture(*hosts)
    truth = three_updates(cap, cap.conn(40001))
    res = analyze(
        cap.write(tmp_path / f"c.{fmt}", fmt, linktype), [click(i, t) for i, t in enumerate((1, 3, 5))]
    )
    assert res.client.host == hosts[0] and res.server.host == hosts[1]
    assert [u.bytes_down for u in res.updates] == [x for *_, x in truth]
    assert all(near(u.T_s, end - start) for u, (start, end, _) in zip(res.updates, truth, strict=True))


def test_it_keeps_nanosecond_timestamps(tmp_path):
    cap = pcaps.Capture()
    conn = cap.conn(40001)
    conn.up(1.0000001, 8)
    conn.down(1.0123457, 100)
    (u,) = analyze(cap.write(tmp_path / "ns.pcap", nano=True), [click(0, 1.0)]).updates
    assert u.T_s == pytest.approx(0.0123456, abs=2e-7)


def test_it_segments_by_quiet_periods_without_clicks(tmp_path):
    cap = pcaps.Capture()
    conn = cap.conn(40001)
    conn.handshake(0.1)
    truth = three_updates(cap, conn)
    conn.down(6.0, 300)  # unsolicited server burst (a clock redraw): no input, so no update
    res = analyze(cap.write(tmp_path / "quiet.pcap"), None, quiet_s=0.5)
    assert res.mode == "quiet" and len(res.updates) == 3
    for u, (start, end, x) in zip(res.updates, truth, strict=True):
        assert near(u.T_s, end - start) and u.bytes_down == x and u.click_time is None


def test_a_pause_shorter_than_the_quiet_period_does_not_split_an_update(tmp_path):
    cap = pcaps.Capture()
    conn = cap.conn(40001)
    conn.up(1.0, 8)
    conn.down(1.1, 1000)
    conn.down(1.5, 1000)  # 400 ms pause < 500 ms
    conn.up(3.0, 8)
    conn.down(3.05, 1000)
    res = analyze(cap.write(tmp_path / "pause.pcap"), None, quiet_s=0.5)
    assert [round(u.T_s, 6) for u in res.updates] == [0.5, 0.05]
    res = analyze(cap.write(tmp_path / "pause.pcap"), None, quiet_s=0.3)
    assert [round(u.T_s, 6) for u in res.updates] == [0.1, 0.05]  # the rest of update 1 has no input


def test_quiet_segmentation_records_an_input_without_response_within_the_timeout(tmp_path):
    cap = pcaps.Capture()
    conn = cap.conn(40001)
    conn.up(1.0, 8)
    conn.up(9.0, 8)
    conn.down(9.2, 500)
    res = analyze(cap.write(tmp_path / "q.pcap"), None, quiet_s=0.5, timeout_s=1.0)
    assert [u.timed_out for u in res.updates] == [True, False]
    assert near(res.updates[1].T_s, 0.2)


def test_it_counts_udp_payload(tmp_path):
    cap = pcaps.Capture()
    cap.udp(1.001, 40, down=False)
    cap.udp(1.010, 1200, down=True)
    cap.udp(1.020, 1200, down=True)
    (u,) = analyze(cap.write(tmp_path / "udp.pcap"), [click(0, 1.0)]).updates
    assert near(u.T_s, 0.019) and u.bytes_down == 2400 and u.bytes_up == 40


def test_a_short_snap_length_does_not_shrink_x(tmp_path):
    cap = pcaps.Capture()
    conn = cap.conn(40001)
    conn.up(1.001, 8)
    conn.down(1.01, 1448, snap=96)
    conn.down(1.02, 1448, snap=96)
    (u,) = analyze(cap.write(tmp_path / "snap.pcap"), [click(0, 1.0)]).updates
    assert u.bytes_down == 2896


def test_it_detects_the_server_as_the_bigger_sender_or_takes_the_one_given(tmp_path):
    cap = pcaps.Capture(client="10.0.0.2", server="10.0.0.1")  # server has the lower address
    conn = cap.conn(40001, 3389)
    three_updates(cap, conn)
    other = cap.conn(40002, 22)  # another service on the same server
    other.up(2.0, 100)
    other.down(2.01, 100)
    path = cap.write(tmp_path / "srv.pcap")
    res = analyze(path, None)
    assert res.server == Endpoint("10.0.0.1") and res.client == Endpoint("10.0.0.2")
    assert len(res.updates) == 4  # the ssh exchange counts: all ports of the server host do
    res = analyze(path, None, server=Endpoint("10.0.0.1", 3389))
    assert len(res.updates) == 3
    with pytest.raises(CaptureError, match="no packet"):
        analyze(path, None, server=Endpoint("10.0.0.9"))


def test_it_tells_client_and_server_apart_by_port_on_loopback(tmp_path):
    cap = pcaps.Capture(client="127.0.0.1", server="127.0.0.1")
    truth = three_updates(cap, cap.conn(40001, 7000))
    path = cap.write(tmp_path / "lo.pcap")
    res = analyze(path, None)
    assert res.server == Endpoint("127.0.0.1", 7000)
    assert [u.bytes_down for u in res.updates] == [x for *_, x in truth]
    with pytest.raises(ParameterError, match="HOST:PORT"):
        analyze(path, None, server=Endpoint("127.0.0.1"))


def test_it_rejects_files_that_are_not_captures(tmp_path):
    (tmp_path / "x.pcap").write_text("hello world")
    with pytest.raises(CaptureError, match="neither pcap nor pcapng"):
        analyze(tmp_path / "x.pcap", None)
    with pytest.raises(ParameterError, match="does not exist"):
        analyze(tmp_path / "missing.pcap", None)
    cap = pcaps.Capture()
    cap.conn(1).up(1, 1)
    with open(tmp_path / "fddi.pcap", "wb") as f:
        dpkt.pcap.Writer(f, linktype=10).writepkt(b"\0" * 40, ts=1.0)
    with pytest.raises(CaptureError, match="link type 10 is not supported"):
        analyze(tmp_path / "fddi.pcap", None)
    with pytest.raises(ParameterError, match="quiet"):
        analyze(tmp_path / "x.pcap", None, quiet_s=0)


def test_retransmission_detection_survives_sequence_wraparound(tmp_path):
    cap = pcaps.Capture()
    conn = cap.conn(40001)
    conn.seq["down"] = 2**32 - 1500
    conn.up(1.001, 8)
    conn.down(1.01, 1000)
    conn.down(1.02, 1000)  # crosses 2**32
    conn.down(1.03, 1000)
    conn.resend(1.04, "down", conn.sent["down"][1])
    packets, _ = read_packets(cap.write(tmp_path / "wrap.pcap"))
    assert [p.retrans for p in packets if p.payload and p.src == "10.0.0.2"] == [False, False, False, True]


def test_it_parses_endpoints_with_and_without_port():
    assert parse_endpoint("10.0.0.1") == Endpoint("10.0.0.1", None)
    assert parse_endpoint("10.0.0.1:5900") == Endpoint("10.0.0.1", 5900)
    assert parse_endpoint("[fd00::0001]:22") == Endpoint("fd00::1", 22)
    assert parse_endpoint("fd00::1") == Endpoint("fd00::1", None)
    with pytest.raises(ParameterError, match="port must be 1..65535"):
        parse_endpoint("10.0.0.1:70000")
    with pytest.raises(ParameterError, match="server: expected an IPv4 or IPv6 address"):
        parse_endpoint("vnc.example:5900")


def test_the_confidence_interval_is_student_t():
    s = Stat.of([1.0, 2.0, 3.0, 4.0])
    assert s.mean == 2.5 and s.median == 2.5
    assert s.ci95 == pytest.approx(stats.t.ppf(0.975, 3) * math.sqrt(5 / 3) / 2)
    assert Stat.of([7.0]).ci95 is None and Stat.of([]).mean is None


def test_clicks_files_round_trip_and_bad_fields_are_named(tmp_path):
    clicks = [Click(0, 1.5, page=1, ratio=0.5, x=10, y=20, pixel_stable_t=2.0), Click(1, 3.0, timed_out=True)]
    save_clicks(tmp_path / "c.json", clicks)
    assert load_clicks(tmp_path / "c.json") == clicks
    doc = json.loads((tmp_path / "c.json").read_text())
    assert doc["version"] == 1 and doc["clock"] == "epoch"
    with pytest.raises(ParameterError, match=r"clicks\[0\]\.t: is required"):
        clicks_from_json({"version": 1, "clicks": [{"index": 0}]})
    with pytest.raises(ParameterError, match=r"clicks\[0\]\.ratio: must be at most 1"):
        clicks_from_json({"version": 1, "clicks": [{"index": 0, "t": 1, "ratio": 2}]})
    with pytest.raises(ParameterError, match="version: must be 1"):
        clicks_from_json({"version": 2, "clicks": []})
    with pytest.raises(ParameterError, match=r"clicks\[1\]\.index: index 0 appears twice"):
        clicks_from_json({"version": 1, "clicks": [{"index": 0, "t": 1}, {"index": 0, "t": 2}]})


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "qoelab.rd.analyze_cli", *args], capture_output=True, text=True, timeout=60
    )


def test_the_cli_prints_json_and_a_table(tmp_path):
    cap = pcaps.Capture()
    truth = three_updates(cap, cap.conn(40001))
    path = cap.write(tmp_path / "cli.pcapng", fmt="pcapng")
    save_clicks(tmp_path / "clicks.json", [click(i, t) for i, t in enumerate((1, 3, 5))])
    out = _cli("analyze", str(path), "--clicks", str(tmp_path / "clicks.json"), "--json")
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert [u["bytes_down"] for u in doc["updates"]] == [x for *_, x in truth]
    assert doc["updates"][0]["T_ms"] == pytest.approx((truth[0][1] - truth[0][0]) * 1e3, abs=1e-3)
    assert doc["summary"]["n"] == 3 and doc["summary"]["T_ms"]["n"] == 3 and "rate_bps" in doc["updates"][0]
    out = _cli("analyze", str(path), "--quiet", "200ms", "--server", "10.0.0.2:5900")
    assert out.returncode == 0, out.stderr
    assert "3 updates (quiet)" in out.stdout and "server 10.0.0.2:5900" in out.stdout
    out = _cli("analyze", str(path), "--quiet", "-1s")
    assert out.returncode == 2 and "--quiet" in out.stderr
    out = _cli("analyze", str(tmp_path / "nope.pcap"))
    assert out.returncode == 2 and "capture: file" in out.stderr and "Traceback" not in out.stderr


def test_the_rd_group_is_shared_between_modules():
    import argparse

    from qoelab.rd.analyze_cli import get_or_create_rd_parser, register

    parser = argparse.ArgumentParser(prog="qoelab")
    sub = parser.add_subparsers(dest="command")
    rd_table = get_or_create_rd_parser(sub)
    rd_table.add_parser("bench").set_defaults(func=lambda a: 0)  # another module's command
    register(sub)
    assert get_or_create_rd_parser(sub) is rd_table
    args = parser.parse_args(["rd", "analyze", "x.pcap", "--quiet", "250ms"])
    assert args.quiet == 0.25 and args.func.__name__ == "run_analyze"
    assert parser.parse_args(["rd", "bench"]).rd_command == "bench"
