"""vose-pair (C) and its driver qoelab.vose.pair, for real on loopback: the FIPS-197 self-test, a
calibration run, the handshake's refusals, the receiver's integrity checks against a record the
sender corrupts, and a short stream in each mode. The calibration arithmetic (T = T_software /
speedup) is checked on literal lines as ``vose-pair calibrate`` prints them.

Streams last one second; every wait is for a condition (the receiver's "listening" line, an exit)
with a generous deadline, and nothing is asserted about speed beyond "more than nothing". No root
is needed: loopback in the current namespace, ports chosen by the receiver (--port 0).
"""

from __future__ import annotations

import math
import os
import shutil
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from qoelab.vose import pair
from qoelab.vose.pair import (
    ENV_BINARY,
    Calibration,
    PairError,
    PairProcess,
    PairSpec,
    device_time,
    failure,
)

REPO = Path(__file__).resolve().parents[2]
LOOPBACK = "127.0.0.1"
FINISH_S = 60.0  # a one-second stream on a loaded two-core machine still ends well within this
TRAILER = 16  # vose.h: ICV, checksum and spare bytes after each record's payload


def _build() -> str | None:
    """make is a no-op when the helper is current; a stale one would test yesterday's C."""
    subprocess.run(["make", "-s", "-C", str(REPO / "workers" / "qoelab" / "vose" / "csrc")], check=False)
    return None if os.access(pair.binary_path(), os.X_OK) else pair.NOT_BUILT


_NOT_BUILT = _build()
needs_binary = pytest.mark.skipif(_NOT_BUILT is not None, reason=_NOT_BUILT or "")


def _cpu_flags() -> set[str]:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("flags"):
            return set(line.partition(":")[2].split())
    return set()


FLAGS = _cpu_flags()
needs_aesni = pytest.mark.skipif("aes" not in FLAGS, reason="this CPU has no AES-NI: no hardware case")


# --- calibration arithmetic on literal lines --------------------------------------------------------

# As `vose-pair calibrate --impl software` and `--impl hardware` print them (a few stages only):
# medians chosen so that T = median - none is round: software aes_cbc sends in 10000 ns and receives
# in 20000 ns, hardware in 1000 and 4000; software cbc is 300 ns, its hardware stage is faster than
# the floor and so 0 ns.
SOFTWARE_LINES = """\
{"type":"calibration","impl":"software","record":1448,"clock":"tsc","invariant_tsc":true,\
"ticks_per_ns":2.000000,"sha1":"masked","aesni":true}
{"type":"stage","side":"send","stage":"none","n":200,"mean_ticks":62.0,"median_ticks":60.0,\
"p99_ticks":80.0,"min_ticks":58.0,"mean_ns":31.00,"median_ns":30.00,"p99_ns":40.00,"min_ns":29.00}
{"type":"stage","side":"recv","stage":"none","n":200,"mean_ticks":122.0,"median_ticks":120.0,\
"p99_ticks":160.0,"min_ticks":100.0,"mean_ns":61.00,"median_ns":60.00,"p99_ns":80.00,"min_ns":50.00}
{"type":"stage","side":"send","stage":"csum","n":200,"mean_ticks":262.0,"median_ticks":260.0,\
"p99_ticks":300.0,"min_ticks":200.0,"mean_ns":131.00,"median_ns":130.00,"p99_ns":150.00,"min_ns":100.00}
{"type":"stage","side":"recv","stage":"csum","n":200,"mean_ticks":222.0,"median_ticks":220.0,\
"p99_ticks":260.0,"min_ticks":200.0,"mean_ns":111.00,"median_ns":110.00,"p99_ns":130.00,"min_ns":100.00}
{"type":"stage","side":"send","stage":"cbc","n":200,"mean_ticks":662.0,"median_ticks":660.0,\
"p99_ticks":700.0,"min_ticks":600.0,"mean_ns":331.00,"median_ns":330.00,"p99_ns":350.00,"min_ns":300.00}
{"type":"stage","side":"send","stage":"aes_cbc","n":200,"mean_ticks":20100.0,"median_ticks":20060.0,\
"p99_ticks":30000.0,"min_ticks":19000.0,"mean_ns":10050.00,"median_ns":10030.00,"p99_ns":15000.00,\
"min_ns":9500.00}
{"type":"stage","side":"recv","stage":"aes_cbc","n":200,"mean_ticks":40200.0,"median_ticks":40120.0,\
"p99_ticks":60000.0,"min_ticks":38000.0,"mean_ns":20100.00,"median_ns":20060.00,"p99_ns":30000.00,\
"min_ns":19000.00}
{"type":"wait","ticks_per_iteration":70.10,"ns_per_iteration":35.050,"busy_late_ns":362.7,\
"sleep_late_ns":61124.6,"target_ns":10000}
"""
HARDWARE_LINES = """\
{"type":"calibration","impl":"hardware","record":1448,"clock":"tsc","invariant_tsc":true,\
"ticks_per_ns":2.000000,"sha1":"native","aesni":true}
{"type":"stage","side":"send","stage":"none","n":200,"mean_ticks":62.0,"median_ticks":60.0,\
"p99_ticks":80.0,"min_ticks":58.0,"mean_ns":31.00,"median_ns":30.00,"p99_ns":40.00,"min_ns":29.00}
{"type":"stage","side":"recv","stage":"none","n":200,"mean_ticks":122.0,"median_ticks":120.0,\
"p99_ticks":160.0,"min_ticks":100.0,"mean_ns":61.00,"median_ns":60.00,"p99_ns":80.00,"min_ns":50.00}
{"type":"stage","side":"send","stage":"cbc","n":200,"mean_ticks":52.0,"median_ticks":50.0,\
"p99_ticks":70.0,"min_ticks":48.0,"mean_ns":26.00,"median_ns":25.00,"p99_ns":35.00,"min_ns":24.00}
{"type":"stage","side":"send","stage":"aes_cbc","n":200,"mean_ticks":2100.0,"median_ticks":2060.0,\
"p99_ticks":3000.0,"min_ticks":1900.0,"mean_ns":1050.00,"median_ns":1030.00,"p99_ns":1500.00,\
"min_ns":950.00}
{"type":"stage","side":"recv","stage":"aes_cbc","n":200,"mean_ticks":8200.0,"median_ticks":8120.0,\
"p99_ticks":9000.0,"min_ticks":8000.0,"mean_ns":4100.00,"median_ns":4060.00,"p99_ns":4500.00,\
"min_ns":4000.00}
{"type":"wait","ticks_per_iteration":99.00,"ns_per_iteration":49.500,"busy_late_ns":400.0,\
"sleep_late_ns":60000.0,"target_ns":10000}
"""


def literal_calibration() -> Calibration:
    cal = Calibration(record=1448)
    cal.add(pair._json_lines(SOFTWARE_LINES.splitlines()))
    cal.add(pair._json_lines(HARDWARE_LINES.splitlines()))
    return cal


def test_calibration_lines_parse_into_stages_clock_and_wait():
    cal = literal_calibration()
    assert cal.has("software") and cal.has("hardware") and not cal.has("inf")
    st = cal.stages[("software", "recv", "aes_cbc")]
    assert (st.impl, st.side, st.stage, st.n) == ("software", "recv", "aes_cbc", 200)
    assert (st.median_ns, st.mean_ns, st.p99_ns, st.min_ns, st.median_ticks) == (
        20060.0, 20100.0, 30000.0, 19000.0, 40120.0,
    )  # fmt: skip
    assert len(cal.stages) == 7 + 5
    # Both runs' SHA-1 implementation stays on record: the hardware run must not drop the software's.
    assert cal.clock == {
        "clock": "tsc",
        "invariant_tsc": True,
        "ticks_per_ns": 2.0,
        "aesni": True,
        "sha1_software": "masked",
        "sha1_hardware": "native",
    }
    # The wait's granularity is the software run's (the one a vose run spins like).
    assert cal.wait["ns_per_iteration"] == 35.05 and "type" not in cal.wait
    rows = cal.samples()
    assert len(rows) == len(cal.stages)
    (row,) = [r for r in rows if (r["impl"], r["side"], r["stage"]) == ("hardware", "send", "cbc")]
    assert (row["median_ns"], row["median_ticks"], row["n"]) == (25.0, 50.0, 200)


def test_device_ns_is_the_median_minus_the_floor_and_never_negative():
    cal = literal_calibration()
    assert cal.device_ns("aes_cbc", "send") == pytest.approx(10000)
    assert cal.device_ns("aes_cbc", "recv") == pytest.approx(20000)
    assert cal.device_ns("aes_cbc", "send", "hardware") == pytest.approx(1000)
    assert cal.device_ns("aes_cbc", "recv", "hardware") == pytest.approx(4000)
    assert cal.device_ns("csum", "send") == pytest.approx(100)
    assert cal.device_ns("csum", "recv") == pytest.approx(50)
    assert cal.device_ns("cbc", "send") == pytest.approx(300)
    assert cal.device_ns("cbc", "send", "hardware") == 0.0  # 25 ns under a 30 ns floor


def test_device_ns_of_an_uncalibrated_stage_names_what_is_missing():
    cal = literal_calibration()
    with pytest.raises(PairError, match="no hardware calibration of csum on the send side"):
        cal.device_ns("csum", "send", "hardware")
    with pytest.raises(PairError, match="no software calibration of sha1_only on the recv side"):
        cal.device_ns("sha1_only", "recv")
    with pytest.raises(PairError, match="no calibration header"):
        Calibration(record=1448).add(pair._json_lines(SOFTWARE_LINES.splitlines()[1:]))


def test_measured_speedup_is_software_over_hardware_and_inf_when_the_hardware_takes_nothing():
    cal = literal_calibration()
    assert cal.measured_speedup("aes_cbc", "send") == pytest.approx(10.0)
    assert cal.measured_speedup("aes_cbc", "recv") == pytest.approx(5.0)
    assert cal.measured_speedup("cbc", "send") == math.inf


def test_a_device_whose_in_stream_work_cost_nothing_has_no_speedup_to_measure():
    cal = literal_calibration()
    cal.set_stream("aes_cbc", {"software": {"send": 900.0, "recv": 900.0},
                               "hardware": {"send": 950.0, "recv": 950.0},
                               "inf": {"send": 1000.0, "recv": 1000.0}})  # fmt: skip
    assert cal.device_ns("aes_cbc", "send") == 0.0  # noise: software timed below doing nothing
    with pytest.raises(PairError, match="the send side's aes_cbc work timed inside the streams cost nothing"):
        cal.measured_speedup("aes_cbc", "send")


def test_device_time_is_t_software_over_the_speedup():
    assert device_time(10000, 4) == 2500
    assert device_time(10000, 1) == 10000
    assert device_time(10000, 1000) == 10
    assert device_time(10000, math.inf) == 0.0
    assert device_time(1000.0, 0.5) == 2000.0  # a measured accelerator slower than software
    for bad in (0, -2, math.nan):
        with pytest.raises(ValueError, match="speedup must be positive"):
            device_time(10000, bad)


def test_pair_spec_argv_gives_each_end_its_core_and_only_vose_a_wait(monkeypatch):
    monkeypatch.setenv(ENV_BINARY, shutil.which("true") or "/bin/true")
    spec = PairSpec("vose", "aes_cbc", record=1024, duration_s=3, t_s_ns=1234.5678, t_r_ns=0.0,
                    sender_cpu=3, receiver_cpu=5, corrupt_record=7)  # fmt: skip
    send = spec.argv("send", "198.18.0.2", 5201)
    recv = spec.argv("recv", "198.18.0.2", 0)
    assert send[0] == recv[0] == os.environ[ENV_BINARY]
    assert send[1:3] == ["send", "--addr"] and recv[1] == "recv"
    opts = lambda argv: dict(zip(argv[2::2], argv[3::2], strict=True))  # noqa: E731
    s, r = opts(send), opts(recv)
    assert s["--cpu"] == "3" and r["--cpu"] == "5"
    assert s["--t-ns"] == "1234.568" and "--t-ns" not in r  # T_R = 0: no wait at all
    assert s["--corrupt"] == "7" and "--corrupt" not in r
    assert s["--record"] == r["--record"] == "1024" and r["--port"] == "0"
    plain = PairSpec("software", "aes_cbc", t_s_ns=500, t_r_ns=500)
    assert "--t-ns" not in plain.argv("send", LOOPBACK, 1) + plain.argv("recv", LOOPBACK, 1)


# --- the helper itself -------------------------------------------------------------------------------


def _run(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(pair.binary_path()), *args], capture_output=True, text=True, timeout=timeout)


@needs_binary
def test_selftest_passes_fips_197_on_software_aes_and_aes_ni():
    out = _run("selftest")
    assert out.returncode == 0, out.stderr
    (line,) = pair._json_lines(out.stdout.splitlines())
    assert line["type"] == "selftest" and line["ok"] is True
    assert line["aesni"] is ("aes" in FLAGS)  # with AES-NI both paths were checked
    assert line["ticks_per_ns"] > 0 and line["clock"] in ("tsc", "CLOCK_MONOTONIC_RAW")


ALL_STAGES = {"none", "csum", "sha1", "aes", "cbc", *pair.DEVICES}


@needs_binary
@pytest.mark.parametrize("impl", ["software", pytest.param("hardware", marks=needs_aesni)])
def test_calibrate_prints_a_header_every_stage_on_both_sides_and_the_wait(impl):
    out = _run("calibrate", "--impl", impl, "--samples", "200", "--record", "1448")
    assert out.returncode == 0, out.stderr
    lines = pair._json_lines(out.stdout.splitlines())
    head, stages, wait = lines[0], lines[1:-1], lines[-1]
    assert head["type"] == "calibration" and head["impl"] == impl and head["record"] == 1448
    # Software SHA-1 is OpenSSL with SHA-NI masked; the hardware run leaves OpenSSL its best.
    assert head["sha1"] == ("masked" if impl == "software" else "native")
    assert head["aesni"] is ("aes" in FLAGS)
    # The checksum has no accelerated instruction: the hardware run leaves its stages out.
    expected = ALL_STAGES if impl == "software" else ALL_STAGES - {"csum", "checksum"}
    for side in ("send", "recv"):
        assert {d["stage"] for d in stages if d["side"] == side} == expected
    assert len(stages) == 2 * len(expected) and all(d["type"] == "stage" for d in stages)
    for d in stages:
        assert d["n"] == 200
        assert 0 < d["min_ns"] <= d["median_ns"] <= d["p99_ns"]
    assert wait["type"] == "wait" and wait["ns_per_iteration"] > 0 and wait["target_ns"] == 10000


@needs_binary
def test_calibrate_builds_a_calibration_of_both_implementations():
    cpu = min(os.sched_getaffinity(0))
    cal = pair.calibrate(1448, cpu, samples=200, hardware="aes" in FLAGS)
    assert cal.record == 1448 and cal.has("software")
    assert cal.clock["sha1_software"] == "masked" and cal.wait["ns_per_iteration"] > 0
    for device in pair.DEVICES:
        for side in ("send", "recv"):
            assert cal.device_ns(device, side) >= 0
    if "aes" in FLAGS:
        assert cal.has("hardware") and cal.clock["sha1_hardware"] == "native"
        for device in ("aes_cbc", "sha1_aes_cbc", "sha1_only"):
            assert cal.measured_speedup(device, "send") > 0 and cal.measured_speedup(device, "recv") > 0
        with pytest.raises(PairError, match="no hardware calibration of checksum"):
            cal.device_ns("checksum", "send", "hardware")


@needs_binary
@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["calibrate", "--impl", "fpga"], "--impl must be software or hardware, got fpga"),
        (["calibrate", "--samples", "5"], "--samples must be at least 10"),
        (["send", "--mode", "software", "--t-ns", "100", "--port", "9"], "--t-ns is the emulated device"),
        (["recv", "--mode", "inf", "--t-ns", "100", "--port", "0"], "mode inf does not wait"),
        (["send", "--record", "100"], "--record must be 256 to 65536 bytes, got 100"),
        (["send", "--record", "70000"], "--record must be 256 to 65536 bytes, got 70000"),
        (["send", "--mode", "turbo"], "--mode must be software, hardware, vose or inf, got turbo"),
        (["recv", "--device", "gpu"], "--device must be checksum, sha1_only"),
        (["recv", "--mode", "hardware", "--device", "checksum"], "device checksum has no accelerated"),
        (["send", "--wait", "nap"], "--wait must be busy, busy_wall or sleep"),
    ],
)
def test_bad_arguments_are_a_usage_error(args, said):
    out = _run(*args)
    assert out.returncode == 2, (out.stdout, out.stderr)
    assert said in out.stderr
    assert out.stdout == ""


# --- streams on loopback -----------------------------------------------------------------------------


@pytest.fixture
def ends() -> Iterator[list[PairProcess]]:
    """Collects the ends a test starts; whatever is still running afterwards is killed."""
    started: list[PairProcess] = []
    yield started
    for end in started:
        if end.proc.poll() is None:
            end.proc.kill()
        end.proc.wait(timeout=10)
        for f in (end.proc.stdout, end.proc.stderr):
            if f is not None:
                f.close()


def _cores() -> tuple[int, int]:
    allowed = sorted(os.sched_getaffinity(0))
    return allowed[0], allowed[-1]  # one core only: both ends share it, which is slower, not wrong


def _spec(mode: str, device: str, **kw) -> PairSpec:
    send_cpu, recv_cpu = _cores()
    return PairSpec(mode, device, duration_s=kw.pop("duration_s", 1.0), sender_cpu=send_cpu,
                    receiver_cpu=recv_cpu, **kw)  # fmt: skip


def _start(ends: list[PairProcess], spec: PairSpec, role: str, addr: str = LOOPBACK, port: int = 0):
    argv = spec.argv(role, addr, port) + ["--timeout", "30"]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    end = PairProcess(role, proc)
    ends.append(end)
    return end


def _stream(ends: list[PairProcess], recv_spec: PairSpec, send_spec: PairSpec | None = None):
    """Start the receiver on a port of its choosing, then the sender; wait for both to exit."""
    receiver = _start(ends, recv_spec, "recv")
    receiver.wait_listening(30)
    (listening,) = receiver.ticks("listening")
    assert listening["port"] > 0
    sender = _start(ends, send_spec or recv_spec, "send", port=listening["port"])
    codes = sender.finish(FINISH_S), receiver.finish(FINISH_S)
    return sender, receiver, codes


@needs_binary
def test_a_receiver_in_mode_vose_refuses_a_sender_in_mode_software(ends):
    sender, receiver, codes = _stream(ends, _spec("vose", "aes_cbc"), _spec("software", "aes_cbc"))
    assert codes == (4, 4)
    err = str(failure(sender, receiver))
    refused = (
        "recv: handshake refused: sender runs mode software device aes_cbc, receiver mode vose device "
        "aes_cbc; send: handshake refused by the receiver: sender runs mode software"
    )
    assert err.startswith(refused), err
    assert not receiver.ticks("summary") and not sender.ticks("summary")


@needs_binary
def test_a_record_size_mismatch_is_refused(ends):
    sender, receiver, codes = _stream(ends, _spec("software", "checksum"),
                                      _spec("software", "checksum", record=1024))  # fmt: skip
    assert codes == (4, 4)
    assert "sender record 1024 seed 1, receiver record 1448 seed 1" in str(failure(sender, receiver))


@needs_binary
def test_a_peer_that_is_not_a_vose_pair_is_refused(ends):
    receiver = _start(ends, _spec("software", "checksum"), "recv")
    receiver.wait_listening(30)
    with socket.create_connection((LOOPBACK, receiver.ticks("listening")[0]["port"]), timeout=30) as s:
        s.sendall(b"GET / HTTP/1.0\r\n\r\n".ljust(48, b"\0"))  # as long as a hello, but not one
        reply = b""
        while len(reply) < 128 and (chunk := s.recv(128 - len(reply))):  # ok (4 bytes) + why (124)
            reply += chunk
    assert receiver.finish(FINISH_S) == 4
    assert reply[:4] == b"\0\0\0\0" and b"the sender is not a vose-pair" in reply
    assert "the sender is not a vose-pair" in receiver.error_text()


@needs_binary
def test_a_receiver_that_cannot_listen_is_reported_at_once(ends):
    receiver = _start(ends, _spec("software", "checksum"), "recv", addr="192.0.2.1")  # TEST-NET-1
    with pytest.raises(PairError, match=r"did not listen within 30 s: cannot listen on 192\.0\.2\.1:0"):
        receiver.wait_listening(30)
    assert receiver.proc.returncode == 5


@needs_binary
@pytest.mark.parametrize(
    ("mode", "device", "t_ns", "check"),
    [
        ("software", "checksum", 0, "checksum"),
        ("software", "sha1_only", 0, "ICV (HMAC-SHA1-96)"),
        # aes_only offloads only the block cipher: SHA-1 still runs in software and its ICV catches it.
        ("vose", "aes_only", 500, "ICV (HMAC-SHA1-96)"),
        # With every piece stubbed (no checksum, no ICV, no cipher) only the plaintext check is left.
        ("vose", "sha1_aes_cbc", 500, "plaintext"),
        ("inf", "checksum", 0, "plaintext"),
    ],
)
def test_a_record_corrupted_by_the_sender_fails_the_receivers_check(ends, mode, device, t_ns, check):
    spec = _spec(mode, device, t_s_ns=t_ns, t_r_ns=t_ns, corrupt_record=5)
    sender, receiver, (send_code, recv_code) = _stream(ends, spec)
    assert recv_code == 3
    # The sender finds the receiver gone mid-stream (5) or unconfirmed at the end (3).
    assert send_code in (3, 5)
    err = str(failure(sender, receiver))
    assert err.startswith(f"recv: record 5 failed its {check} check"), err
    assert not receiver.ticks("summary")


@needs_binary
@pytest.mark.parametrize(
    ("mode", "device"),
    [
        ("software", "sha1_aes_cbc"),
        pytest.param("hardware", "aes_cbc", marks=needs_aesni),
        ("vose", "sha1_aes_cbc"),
        ("inf", "sha1_aes_cbc"),
    ],
)
def test_a_short_stream_verifies_every_record_in_each_mode(ends, mode, device):
    t_ns = 1000.0 if mode == "vose" else 0.0
    spec = _spec(mode, device, t_s_ns=t_ns, t_r_ns=t_ns)
    sender, receiver, codes = _stream(ends, spec)
    assert codes == (0, 0), failure(sender, receiver)
    snd, rcv = sender.summary(), receiver.summary()
    assert (snd["role"], rcv["role"]) == ("send", "recv")
    assert rcv["records"] == snd["acked"] == snd["records"] > 0
    assert rcv["bytes"] == snd["bytes"] == rcv["records"] * (spec.record - TRAILER) > 0
    assert snd["cpu"] == spec.sender_cpu and rcv["cpu"] == spec.receiver_cpu  # pinned
    for end in (snd, rcv):
        assert end["t_ns"] == t_ns and end["t"] > 0
        if mode == "vose":
            assert end["busy_ns"] > 0 and end["waits"] == end["records"] and end["spins"] > 0
        else:
            assert end["busy_ns"] == 0 and end["waits"] == 0 and end["spins"] == 0
        assert end["tcp"]["mss"] > 0
        # The work of every 64th record is timed in place (records 0, 64, ...; at most 65536 of them).
        assert end["work_ns"]["n"] == min(-(-end["records"] // 64), 65536)
    assert not sender.proc.stderr.read() and not receiver.proc.stderr.read()
