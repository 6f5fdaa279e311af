"""``qoelab thinclient classify``: paper 002's flow rule on hand-built captures, values worked out by hand."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path

import dpkt
import pytest

from qoelab.cli import main
from qoelab.thinclient import trace
from qoelab.thinclient.classify import classify, gap_histogram
from qoelab.thinclient.model import TwoStateModel, generate

T0 = 1_700_000_000.0
SERVER = "10.0.0.2"
LINKTYPE_RAW = 101

# Two connections to one server port, interleaved in time. (ms, payload bytes); comments give the
# flows by the 6.3 ms rule applied per connection.
CONN_A = [
    (0.0, 100),  # A1 interactive
    (100.0, 1000), (100.5, 1000), (101.0, 1000),  # A2 bulk, 3 segments
    (300.0, 200),  # A3 interactive
    (500.0, 120),  # A4 interactive
    (700.0, 1200), (702.0, 800),  # A5 bulk, 2
    (900.0, 700), (901.0, 700), (902.0, 700),  # A6 bulk, 3
]  # fmt: skip
CONN_B = [
    (1.0, 1400), (1.3, 1400),  # B1 bulk, 2: 1 ms after A1, which a capture-wide rule would merge
    (150.0, 90),  # B2 interactive
    (303.0, 1000), (305.0, 1000), (307.0, 1000), (309.0, 600),  # B3 bulk, 4: 3 ms after A3
    (600.0, 100),  # B4 interactive
    (800.0, 60),  # B5 interactive
]  # fmt: skip
# Per connection, start to start (ms):
#   A: I->B 100, B->I 200, I->I 200, I->B 200, B->B 200;  B: B->I 149, I->B 153, B->I 297, I->I 200
# alpha = I->B / from I = 3/5, beta = B->I / from B = 3/4; 6 interactive and 5 bulk flows.
EXPECTED = {
    "alpha": 3 / 5,
    "beta": 3 / 4,
    "p_I": 6 / 11,
    "p_B": 5 / 11,
    "c_B": (3 + 2 + 3 + 2 + 4) / 5,
    "t_II_s": 0.200,
    "t_IB_s": (0.100 + 0.200 + 0.153) / 3,
    "t_BI_s": (0.200 + 0.149 + 0.297) / 3,
    "t_BB_s": 0.200,
    "flows_interactive": 6,
    "flows_bulk": 5,
    "bytes_per_packet_interactive": (100 + 200 + 120 + 90 + 100 + 60) / 6,
    "bytes_per_packet_bulk": (3000 + 2000 + 2100 + 2800 + 3600) / 14,
    "connections": 2,
    "segments": 20,
}
JSON_KEYS = {
    "alpha", "beta", "p_I", "p_B", "c_B", "t_II_s", "t_IB_s", "t_BI_s", "t_BB_s", "flows_interactive",
    "flows_bulk", "bytes_per_packet_interactive", "bytes_per_packet_bulk",
    "tau_s", "connections", "segments", "gap_histogram", "paper",
}  # fmt: skip


def _frame(link: int, ip: dpkt.ip.IP) -> bytes:
    if link == dpkt.pcap.DLT_EN10MB:
        return bytes(dpkt.ethernet.Ethernet(data=ip))
    if link == dpkt.pcap.DLT_LINUX_SLL:
        return bytes(dpkt.sll.SLL(data=ip))
    if link == 276:  # Linux cooked v2
        return bytes(dpkt.sll2.SLL2(data=ip))
    return bytes(ip)


class Capture:
    """Writes TCP segments of several connections, each direction with its own sequence numbers."""

    def __init__(self, path: Path, link: int = dpkt.pcap.DLT_EN10MB, pcapng: bool = False) -> None:
        self.fh = path.open("wb")
        self.link = link
        self.out = (dpkt.pcapng.Writer if pcapng else dpkt.pcap.Writer)(self.fh, linktype=link)
        self.seq: dict[tuple, int] = {}

    def send(self, t_ms: float, src: tuple[str, int], dst: tuple[str, int], n: int, seq: int | None = None):
        key = (src, dst)
        start = self.seq.setdefault(key, 1000) if seq is None else seq
        tcp = dpkt.tcp.TCP(sport=src[1], dport=dst[1], seq=start, flags=dpkt.tcp.TH_ACK, data=b"x" * n)
        ip = dpkt.ip.IP(src=socket.inet_aton(src[0]), dst=socket.inet_aton(dst[0]), p=6, data=tcp)
        ip.len = len(bytes(ip))
        self.out.writepkt(_frame(self.link, ip), ts=T0 + t_ms / 1e3)
        if seq is None:
            self.seq[key] = start + n
        return start

    def close(self) -> None:
        self.fh.close()


def _two_connections(path: Path, link: int = dpkt.pcap.DLT_EN10MB, pcapng: bool = False) -> Path:
    cap = Capture(path, link, pcapng)
    a, b, srv = (("10.0.0.1", 50001), ("10.0.0.3", 50002), (SERVER, 3389))
    events = [(t, a, n) for t, n in CONN_A] + [(t, b, n) for t, n in CONN_B]
    a3_seq = None
    for t, client, n in sorted(events, key=lambda e: e[0]):
        seq = cap.send(t, srv, client, n)
        if client == a and t == 300.0:
            a3_seq = seq
        cap.send(t + 0.2, client, srv, 0)  # the client's pure ACK: no payload, not a segment
    # The client types (its own payload, ignored) and A3's segment is sent again 40 ms later: a
    # retransmission, which would otherwise be an interactive flow of its own.
    cap.send(250.0, a, srv, 10)
    cap.send(340.0, srv, a, 200, seq=a3_seq)
    cap.send(650.0, b, srv, 12)
    cap.close()
    return path


def _check(got: dict) -> None:
    for key, want in EXPECTED.items():
        assert got[key] == pytest.approx(want, abs=1e-6), key


def test_two_interleaved_connections_give_the_hand_worked_values(tmp_path: Path) -> None:
    path = _two_connections(tmp_path / "two.pcap")
    got = classify(path)
    _check(got)
    assert got["tau_s"] == pytest.approx(10**-2.2)
    assert got["paper"]["alpha"] == 0.09 and got["paper"]["c_B"] == 7.4
    # The same segments taken capture-wide (one stream) merge A1 with B1 and A3 with B3.
    merged = trace.flows(trace.timeline(path, SERVER))
    assert len(merged) == 9 != EXPECTED["flows_interactive"] + EXPECTED["flows_bulk"]
    # Gaps between a connection's segments: 18 of them (20 segments, 2 connections), Fig. 4's bins.
    hist = {h["log10_gap"]: h["count"] for h in got["gap_histogram"]}
    assert sum(hist.values()) == 18
    assert (min(hist), max(hist)) == (-3.6, -0.6)  # 0.3 ms .. 291 ms
    assert len(hist) == 31  # every bin between, empty ones too
    assert (hist[-3.0], hist[-2.7], hist[-3.4], hist[-1.0]) == (2, 4, 2, 1)  # 1 ms, 2 ms, 0.5 ms, 100 ms


def test_filters_pick_the_server_side_and_tau_flips_a_classification(tmp_path: Path) -> None:
    path = _two_connections(tmp_path / "two.pcap")
    _check(classify(path, server_ip=SERVER, server_port=3389))
    # Filtering on the client's end of connection A makes that end the server: 10 bytes, one flow.
    client = classify(path, server_ip="10.0.0.1", server_port=50001)
    assert (client["connections"], client["flows_interactive"], client["flows_bulk"]) == (1, 1, 0)
    assert client["c_B"] is None and client["alpha"] is None and client["bytes_per_packet_bulk"] is None
    # tau 1.5 ms: the 2-ms-spaced blocks A5 and B3 fall apart into 2 + 4 interactive flows.
    short = classify(path, tau=1.5e-3)
    assert (short["flows_interactive"], short["flows_bulk"]) == (12, 3)
    assert short["c_B"] == pytest.approx((3 + 3 + 2) / 3)


@pytest.mark.parametrize(
    ("link", "pcapng"),
    [(dpkt.pcap.DLT_EN10MB, True), (dpkt.pcap.DLT_LINUX_SLL, False), (276, True), (LINKTYPE_RAW, False)],
    ids=["ethernet-pcapng", "sll-pcap", "sll2-pcapng", "raw-ip-pcap"],
)
def test_pcapng_and_other_link_types_give_the_same_values(tmp_path: Path, link: int, pcapng: bool) -> None:
    _check(classify(_two_connections(tmp_path / "c.cap", link, pcapng)))


def test_the_histogram_caps_at_60_s_and_puts_a_zero_gap_in_the_microsecond_bin() -> None:
    assert gap_histogram([]) == []
    hist = gap_histogram([0.0, 1e-3, 0.1, 3600.0])
    assert hist[0] == {"log10_gap": -6.0, "count": 1}
    assert hist[-1] == {"log10_gap": 1.7, "count": 1}  # log10(60) = 1.78
    assert {h["log10_gap"]: h["count"] for h in hist if h["count"]} == {-6.0: 1, -3.0: 1, -1.0: 1, 1.7: 1}


def test_a_capture_of_the_model_gives_table_1_back(tmp_path: Path) -> None:
    writes = generate(TwoStateModel(), 3000, seed=7)  # ten of the paper's 300-s samples
    cap = Capture(tmp_path / "model.pcap")
    for w in writes:
        cap.send(w.t * 1e3, (SERVER, 3389), ("10.0.0.1", 50001), w.nbytes)
    cap.close()
    got = classify(tmp_path / "model.pcap")
    assert got["segments"] == len(writes)
    assert got["alpha"] == pytest.approx(0.09, abs=0.01)
    assert got["beta"] == pytest.approx(0.42, abs=0.03)
    assert got["c_B"] == pytest.approx(7.4, rel=0.06)
    assert got["bytes_per_packet_interactive"] == pytest.approx(137, abs=1)
    assert got["bytes_per_packet_bulk"] == pytest.approx(936, abs=1)
    peaks = sorted(got["gap_histogram"], key=lambda h: -h["count"])
    assert peaks[0]["log10_gap"] == -3.5  # 0.36 ms inside a bulk block: Fig. 4's peak near 10^-4 s


def test_json_has_exactly_the_specified_keys(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _two_connections(tmp_path / "two.pcap")
    assert main(["thinclient", "classify", str(path), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert set(out) == JSON_KEYS
    _check(out)
    assert set(out["gap_histogram"][0]) == {"log10_gap", "count"}


def test_the_table_shows_the_paper_beside_and_a_dash_for_what_cannot_be_computed(tmp_path: Path) -> None:
    cap = Capture(tmp_path / "keys.pcap")
    for t in (0.0, 300.0, 600.0):  # three keystrokes: no bulk flow, so no c_B, beta or t_B*
        cap.send(t, (SERVER, 3389), ("10.0.0.1", 50001), 137)
    cap.close()
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "qoelab.cli",
            "thinclient",
            "classify",
            str(tmp_path / "keys.pcap"),
            "--tau",
            "6.3ms",
        ],  # fmt: skip
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr
    rows = {line[:38].strip(): line[38:].split() for line in run.stdout.splitlines()[2:13]}
    assert rows["alpha  P(bulk after interactive)"] == ["0.000", "0.090"]
    assert rows["c_B    segments per bulk flow"] == ["—", "7.40"]
    assert rows["t_II   s, interactive -> interactive"] == ["0.300", "0.270"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["missing.pcap"], "does not exist"),
        (["notes.txt"], "is neither pcap nor pcapng"),
        (["acks.pcap"], "holds no TCP payload from the server"),
        (["two.pcap", "--server-port", "5900"], "holds no TCP payload from the server (port 5900)"),
        (["two.pcap", "--tau", "20s"], "--tau: must be 10us to 10s, got 20s"),
        (["two.pcap", "--tau", "1us"], "--tau: must be 10us to 10s, got 1us"),
        (["two.pcap", "--tau", "fast"], "--tau: cannot read 'fast'"),
        (["two.pcap", "--server-ip", "10.0.0"], "--server-ip: '10.0.0' is not an IPv4 or IPv6 address"),
    ],
)
def test_bad_input_is_one_sentence_and_status_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    _two_connections(tmp_path / "two.pcap")
    (tmp_path / "notes.txt").write_text("not a capture\n")
    cap = Capture(tmp_path / "acks.pcap")
    cap.send(0.0, ("10.0.0.1", 50001), (SERVER, 3389), 0)
    cap.close()
    assert main(["thinclient", "classify", str(tmp_path / args[0]), *args[1:]]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1 and "Traceback" not in err
