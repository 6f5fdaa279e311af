"""Real namespaces and the userspace link: measured rate, delay and loss within tolerances, and
nothing (namespace, device, process) survives a failed or SIGKILLed trial."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from qoelab.emulation.cleanup import cleanup_leftovers, leftovers
from qoelab.emulation.profile import LinkProfile

pytestmark = pytest.mark.netns
PY = sys.executable


def nothing_left(prefix):
    return leftovers(prefix) == {"namespaces": [], "devices": [], "processes": []}


def run_cli(*args, timeout=90):
    return subprocess.run(
        [PY, "-m", "qoelab.emulation.cli", "link", *args], capture_output=True, text=True, timeout=timeout
    )


def test_link_check_reports_the_path_it_built_within_tolerances(userspace_ok, prefix):
    # BBR does not back off on random loss, so its goodput shows the emulated rate itself; a
    # loss-based TCP (the default, CUBIC) is held near the Mathis figure instead (next test).
    out = run_cli("check", "--rate", "10mbit", "--delay", "25ms", "--loss", "0.5%", "--json", "--duration",
                  "3", "--backend", "userspace", "--prefix", prefix, "--tcp-cc", "bbr")  # fmt: skip
    assert out.returncode == 0, out.stderr + out.stdout[-2000:]
    result = json.loads(out.stdout)
    assert result["backend"] == "userspace"
    assert result["link"]["tcp"]["cc"] == "bbr"
    m = result["measured"]
    # Rate: TCP goodput is the rate net of headers (1448/1500), within a few percent.
    assert 0.85 * 9.65e6 <= m["tcp_down_bps"] <= 1.08 * 9.65e6
    assert 0.85 * 9.65e6 <= m["tcp_up_bps"] <= 1.08 * 9.65e6
    assert m["rtt_ms"] == pytest.approx(50, abs=5)
    assert m["rtt_loaded_ms"] >= m["rtt_ms"]
    lo, hi = m["loss_ci95_pct"]
    assert lo - 0.1 <= 0.5 <= hi + 0.1
    assert result["mathis_bps"] == pytest.approx(8 * 1448 / 0.050 * (1.5 / 0.005) ** 0.5, rel=0.15)
    assert result["ok"] is True
    assert nothing_left(prefix)


def test_an_asymmetric_slow_lossless_link_measures_each_direction(userspace_ok, prefix):
    from qoelab.emulation.topology import emulated_link
    from qoelab.emulation.verify import verify_link

    profile = LinkProfile.parse(rate="2mbit", up_rate="512kbit", delay="5ms", up_delay="15ms")
    with emulated_link(profile, prefix=prefix, backend="userspace") as link:
        result = verify_link(link, duration_s=3, loss_duration_s=1)
    m = result["measured"]
    assert m["tcp_down_bps"] == pytest.approx(2e6 * 1448 / 1500, rel=0.12)
    assert m["tcp_up_bps"] == pytest.approx(512e3 * 1448 / 1500, rel=0.15)
    assert m["rtt_ms"] == pytest.approx(20, abs=2.5)
    assert m["loss_pct"] == 0
    assert result["mathis_bps"] is None
    assert nothing_left(prefix)


def test_a_failing_trial_leaves_no_namespace_device_or_process(userspace_ok, prefix):
    from qoelab.emulation.topology import emulated_link

    with (
        pytest.raises(RuntimeError, match="trial failed"),
        emulated_link(
            LinkProfile.parse(rate="10mbit", delay="5ms"), prefix=prefix, backend="userspace"
        ) as link,
    ):
        link.popen_in("server", ["sleep", "60"])
        # Popen returns once `ip netns exec` runs; it becomes `sleep` a moment later.
        deadline = time.monotonic() + 5
        during = leftovers(prefix)
        while not any("sleep" in p for p in during["processes"]):
            assert time.monotonic() < deadline, f"sleep never seen among {during['processes']}"
            time.sleep(0.05)
            during = leftovers(prefix)
        assert during["namespaces"] == [f"{prefix}c", f"{prefix}s"]
        assert any("linkemu" in p for p in during["processes"])
        raise RuntimeError("trial failed")
    assert nothing_left(prefix)


def test_a_sigkilled_trial_is_cleaned_up_by_prefix(userspace_ok, prefix):
    proc = subprocess.Popen(
        [PY, "-m", "qoelab.emulation.cli", "link", "check", "--rate", "10mbit", "--delay", "10ms",
         "--duration", "10", "--backend", "userspace", "--prefix", prefix],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:  # wait until the trial measures (iperf3 running)
        if any("iperf3" in p for p in leftovers(prefix)["processes"]):
            break
        time.sleep(0.1)
    else:
        proc.kill()
        pytest.fail("the trial never started iperf3")
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    before = leftovers(prefix)
    assert before["namespaces"], "a SIGKILLed trial should leave its namespaces for cleanup to find"
    removed = cleanup_leftovers(prefix)
    assert f"netns {prefix}c" in removed and f"netns {prefix}s" in removed
    assert nothing_left(prefix)
    # The TUN devices went with the emulator; no device of ours is left in the root namespace.
    assert not [d for d in leftovers(prefix)["devices"]]


def test_the_veth_test_backend_refuses_to_pretend_it_emulates_delay(netns_ok, prefix):
    from qoelab.emulation.topology import LinkError, emulated_link

    with (
        pytest.raises(LinkError, match="only shapes rate"),
        emulated_link(LinkProfile.parse(rate="10mbit", delay="5ms"), prefix=prefix, backend="veth"),
    ):
        pass
    assert nothing_left(prefix)


def test_missing_privileges_give_one_clear_sentence(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("needs root to drop to an unprivileged user")
    out = subprocess.run(
        ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--inh-caps=-all",
         PY, "-m", "qoelab.emulation.cli", "link", "check", "--rate", "10mbit"],
        capture_output=True, text=True, timeout=30, cwd=tmp_path,
    )  # fmt: skip
    assert out.returncode == 2, out.stderr
    assert out.stderr.strip() == (
        "error: creating network namespaces needs CAP_NET_ADMIN; "
        "run the worker as root or with that capability"
    )
    assert "Traceback" not in out.stderr


def test_bad_parameters_are_one_line_errors_naming_the_bound():
    out = run_cli("check", "--rate", "20gbit")
    assert out.returncode == 2
    assert out.stderr.strip() == "error: rate: must be at most 10gbit/s, got 20gbit/s"


def test_a_stalled_iperf3_test_runs_again_against_a_fresh_server(userspace_ok, prefix):
    """iperf3 can stall and never exit (esnet/iperf#1527); here the first server is SIGSTOPped."""
    import threading

    from qoelab.emulation import verify
    from qoelab.emulation.cleanup import find_processes
    from qoelab.emulation.topology import emulated_link

    stopped: list[int] = []

    def stall_the_first_server():
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            for proc in find_processes(prefix):
                if proc.name() == "iperf3" and "-s" in proc.cmdline():
                    proc.suspend()
                    stopped.append(proc.pid)
                    return
            time.sleep(0.01)

    with emulated_link(
        LinkProfile.parse(rate="10mbit", delay="5ms"), prefix=prefix, backend="userspace"
    ) as link:
        staller = threading.Thread(target=stall_the_first_server)
        staller.start()
        data = verify._iperf(link, ["-t", "1"], timeout=5)
        staller.join()
    assert stopped, "the first iperf3 server was never seen"
    assert data["end"]["sum_received"]["bits_per_second"] > 1e6
    assert nothing_left(prefix)


def test_the_loss_band_is_the_probe_interval_widened_a_little() -> None:
    """The rule that decides a loss check, and whether a probe runs once more (verify._loss_ok)."""
    from qoelab.emulation.verify import _loss_ok, binomial_ci

    probe = {"ci95_pct": list(binomial_ci(14, 2800))}  # 0.5 % measured
    assert _loss_ok(probe, 0.5)
    assert not _loss_ok({"ci95_pct": list(binomial_ci(149, 2800))}, 0.5)  # 5.3 %: what CI saw once
    lo, hi = probe["ci95_pct"]
    assert _loss_ok(probe, hi + 0.2 * (hi - lo)) and not _loss_ok(probe, hi + 0.3 * (hi - lo) + 0.05)


def test_link_check_with_a_trace_measures_what_the_trace_offers_and_fails_when_it_cannot(
    userspace_ok, prefix, tmp_path
):
    # Steps of 2, 6 and 4 Mbit/s, 1 s each (a loop of 3 s), and 20 ms each way.
    trace = tmp_path / "steps.trace"
    made = run_cli(
        "trace", "make", "steps", "--rates", "2mbit,6mbit,4mbit", "--step", "1s", "--out", str(trace)
    )
    assert made.returncode == 0, made.stderr
    out = run_cli("check", "--trace", str(trace), "--delay", "20ms", "--duration", "4", "--json",
                  "--prefix", prefix)  # fmt: skip
    assert out.returncode == 0, out.stderr + out.stdout[-2000:]
    checked = json.loads(out.stdout)["trace_check"]
    for name in ("down", "up"):
        d = checked[name]
        assert d["trace"] == "steps.trace" and d["ok"], d
        assert abs(d["delivered_ratio"] - 1) <= 0.02 and d["series_corr"] >= 0.98, d
    assert json.loads(out.stdout)["configured"]["trace_sha256"] == checked["down"]["sha256"]
    assert nothing_left(prefix)
    # With a one-packet queue, the LTE trace's bursts (several opportunities in one millisecond)
    # find one packet waiting: opportunities go unused, and the check says so (exit 1).
    out = run_cli("check", "--trace", "Verizon-LTE-short.down", "--limit", "1pkt", "--duration", "4",
                  "--json", "--prefix", prefix)  # fmt: skip
    assert out.returncode == 1, out.stderr
    down = json.loads(out.stdout)["trace_check"]["down"]
    assert not down["ok"] and down["delivered_ratio"] < 0.98, down
    assert nothing_left(prefix)
