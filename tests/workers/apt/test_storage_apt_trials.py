"""Real storage_apt trials across the emulated link: nbdkit or tgtd in the server namespace, apt-bdl
in the client namespace, the APT controller in between; short (Δ = 1 s) and at a modest rate so
CI stays quick. A trial killed mid-run leaves nothing once the worker's cleanup has run."""

from __future__ import annotations

import os
import secrets
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from qoelab import jobs
from qoelab.apt import bdl
from qoelab.emulation.cleanup import leftovers
from qoelab.jobtype import TrialContext
from qoelab.params import validate_params
from qoelab.runner import cleanup_prefix

JOB = jobs.get("storage_apt")
pytestmark = [
    pytest.mark.netns,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root (network namespaces)"),
    pytest.mark.skipif(not bdl.binary_path().exists(), reason=bdl.NOT_BUILT),
]
SHORT = {"rate": "40mbit", "delay": "5ms", "delta": "1s", "steady": "2s", "size": "256mb"}


@pytest.fixture
def prefix():
    name = "qlsa" + secrets.token_hex(3)
    yield name
    cleanup_prefix(name)


def storage_leftovers(prefix: str) -> list[str]:
    found = [*leftovers(prefix)["namespaces"], *leftovers(prefix)["processes"]]
    found += [str(p) for p in Path(tempfile.gettempdir()).glob(f"qoelab-{prefix}*")]
    return found


def _run(prefix: str, tmp_path: Path, **raw):
    params = validate_params(JOB.params, {**SHORT, **raw})
    return JOB.run(params, TrialContext("t", tmp_path, prefix))


def test_an_nbd_apt_trial_converges_and_reports_goodput_and_cpu(prefix, tmp_path):
    result = _run(prefix, tmp_path, transport="nbd", mode="apt", n_max=8)
    s = result.summary
    assert s["steps"] >= 2 and 1 <= s["n_star"] <= 8 and s["n_steady"] == s["n_star"]
    steps = [x.values for x in result.samples]
    assert [x["n"] for x in steps][:2] == [4, 8] and all(x["bytes"] > 0 for x in steps)
    # 40 Mbit/s at 10 ms RTT with 512 KB buffers: a few sessions fill the link.
    assert 0.5 < s["utilization"] <= 1.05, s
    # Ticks are 10 ms: nbdkit's null plugin may spend less than one serving 2 s at 40 Mbit/s.
    assert s["cpu_ticks_per_bit_client"] > 0 and s["cpu_ticks_per_bit_storage"] >= 0
    assert result.link["configured"]["rate_bps"] == 40e6
    assert result.provenance["target"]["server"] == "nbdkit"
    assert storage_leftovers(prefix) == []


def test_an_iscsi_fixed_trial_reads_over_its_sessions(prefix, tmp_path):
    result = _run(prefix, tmp_path, transport="iscsi", mode="fixed", sessions=3)
    s = result.summary
    assert s["n_steady"] == 3 and s["goodput_steady_bps"] > 5e6, s
    assert "n_star" not in s and not result.samples
    assert result.provenance["target"]["server"] == "tgtd"
    assert storage_leftovers(prefix) == []


def test_a_trial_killed_mid_run_leaves_nothing_after_cleanup(prefix, tmp_path):
    code = (
        "import sys; from qoelab import jobs; from qoelab.jobtype import TrialContext; "
        "from qoelab.params import validate_params; from pathlib import Path; "
        "j = jobs.get('storage_apt'); "
        "p = validate_params(j.params, dict(transport='iscsi', mode='fixed', sessions=2, rate='20mbit', "
        "delay='5ms', steady='60s')); "
        f"j.run(p, TrialContext('t', Path({str(tmp_path)!r}), {prefix!r}))"
    )
    proc = subprocess.Popen([sys.executable, "-c", code], start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        while not any("apt-bdl" in p for p in leftovers(prefix)["processes"]):
            assert proc.poll() is None, "the trial ended before its block-device layer started"
            assert time.monotonic() < deadline, "apt-bdl never started"
            time.sleep(0.1)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    assert storage_leftovers(prefix), "the kill should leave the target behind for cleanup to find"
    (workdir,) = Path(tempfile.gettempdir()).glob(f"qoelab-{prefix}-iscsi-*")
    socket = Path("/var/run/tgtd") / f"socket.{(workdir / 'control_port').read_text()}"
    assert socket.exists()
    cleanup_prefix(prefix)
    assert storage_leftovers(prefix) == [] and not socket.exists()
