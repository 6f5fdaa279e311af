"""Real ``rd_qoe`` trials through the job's ``run``: one 3-page trial per protocol over the emulated
link, and a trial SIGKILLed halfway that the cleanups leave no trace of.

Prefixes start with ``rdt`` (not ``ql``): a qoelab worker starting on this host cleans every ``ql*``
trial it finds, which would tear down a test trial running beside it.
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import psutil
import pytest

from qoelab import jobs
from qoelab.jobtype import TrialContext
from qoelab.params import validate_params
from qoelab.procs import ENV_LINK, ENV_RD

pytestmark = [pytest.mark.netns, pytest.mark.slow]
JOB = jobs.get("rd_qoe")


def _why_not(protocol: str) -> str | None:
    if os.geteuid() != 0:
        return "needs root to create network namespaces and start X servers"
    tools = {
        "common": [("Xvfb", "xvfb"), ("chromium", "chromium"), ("dumpcap", "tshark"), ("xdotool", "xdotool"),
                   ("iperf3", "iperf3")],
        "vnc": [("x11vnc", "x11vnc"), ("xtightvncviewer", "xtightvncviewer")],
        "spice": [("Xorg", "xserver-xorg-core"), ("remote-viewer", "virt-viewer")],
        "x2go": [("x2goagent", "x2goserver-x2goagent"), ("pyhoca-cli", "pyhoca-cli"), ("nxproxy", "nxproxy")],
    }  # fmt: skip
    for tool, pkg in tools["common"] + tools[protocol]:
        if shutil.which(tool) is None and not Path("/usr/sbin", tool).exists():
            return f"{tool} is not installed (Debian package {pkg})"
    return None


def _prefix() -> str:
    return "rdt" + secrets.token_hex(3)


@pytest.mark.parametrize("protocol", ["vnc", "spice", "x2go"])
def test_a_three_page_trial_gives_one_sample_per_update_and_the_link_verification(protocol, tmp_path):
    reason = _why_not(protocol)
    if reason:
        pytest.skip(reason)
    params = validate_params(
        JOB.params,
        {"protocol": protocol, "rate": "10mbit", "delay": "10ms", "pages": 3, "quiet": "300ms",
         "pause": "200ms", "update_timeout": "15s", "verify_duration": "1s"},
    )  # fmt: skip
    # Its own work root: a verification stored by an earlier test must not be reused here.
    (tmp_path / "trial").mkdir()
    ctx = TrialContext(trial_id="t", workdir=tmp_path / "trial", prefix=_prefix())
    result = JOB.run(params, ctx)  # its time is in the suite's profile (docs/testing.md), not bounded here

    updates = [s for s in result.samples if s.kind == "update"]
    assert [s.index for s in updates] == [0, 1, 2]
    assert [s.values["page"] for s in updates] == [2, 3, 1]
    for s in updates:
        v = s.values
        assert not v["timed_out"], v
        assert v["T_ms"] > 0 and v["bytes_down"] > 0 and v["packets_down"] > 0
        assert v["rate_bps"] == pytest.approx(8 * v["bytes_down"] / (v["T_ms"] / 1e3))
        # The update cannot take longer than 10 Mbit/s allows for its bytes (less the headers).
        assert v["rate_bps"] < 10e6
        assert v["pixel_ms"] is not None and v["pixel_ms"] > 0
        assert v["bytes_up"] > 0 and v["packets_up"] > 0
    s = result.summary
    assert s["n"] == 3 and s["n_timed_out"] == 0
    assert s["T_ms"] == pytest.approx(sum(u.values["T_ms"] for u in updates) / 3)
    assert s["setup_s"] > 0 and s["teardown_s"] >= 0
    # The link was verified at the start of the trial, on this trial's link.
    assert result.link["configured"]["rate_bps"] == 10e6
    assert result.link["mode"] == "full" and result.link["measured"]["tcp_down_bps"] > 5e6
    assert s["link_verified_in_full"] == 1.0
    assert result.provenance["server"] == "namespace" and result.provenance["protocol"] == protocol
    kinds = {(a.path.name, a.kind) for a in ctx.artifacts}
    assert ("capture.pcap", "pcap") in kinds and ("clicks.json", "json") in kinds
    assert ("manifest.json", "json") in kinds and any(k == "log" for _, k in kinds)
    assert all(a.path.is_file() for a in ctx.artifacts)
    assert not [n for n in os.listdir("/run/netns") if n.startswith(ctx.prefix)]


SCRIPT = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from qoelab import jobs
    from qoelab.jobtype import TrialContext
    from qoelab.params import validate_params

    protocol, prefix, workdir = sys.argv[1], sys.argv[2], Path(sys.argv[3])
    job = jobs.get("rd_qoe")
    params = validate_params(job.params, {"protocol": protocol, "rate": "10mbit", "delay": "10ms",
                                          "pages": 40, "pause": "2s", "verify_duration": "1s"})
    job.run(params, TrialContext(trial_id="k", workdir=workdir, prefix=prefix))
    """
)


def _marked(prefix: str) -> list[psutil.Process]:
    found = []
    for proc in psutil.process_iter():
        try:
            env = proc.environ()
        except (psutil.Error, OSError):
            continue
        if env.get(ENV_RD, "").startswith(prefix) or env.get(ENV_LINK, "").startswith(prefix):
            found.append(proc)
    return found


def test_a_trial_killed_halfway_leaves_nothing_behind_after_the_cleanups(tmp_path):
    reason = _why_not("x2go")
    if reason:
        pytest.skip(reason)
    from qoelab.emulation.cleanup import cleanup_leftovers as link_cleanup
    from qoelab.rd.cleanup import cleanup_leftovers as rd_cleanup

    prefix = _prefix()
    runner = subprocess.Popen(
        [sys.executable, "-c", SCRIPT, "x2go", prefix, str(tmp_path)],
        stdout=subprocess.DEVNULL,
        stderr=open(tmp_path / "runner.log", "wb"),  # noqa: SIM115 - closed with the process
    )
    try:
        # The capture starts right before the first click.
        deadline = time.time() + 75
        while not (tmp_path / "rd" / "capture.pcap").exists():
            assert runner.poll() is None, (tmp_path / "runner.log").read_text()[-2000:]
            assert time.time() < deadline, "the trial did not reach the clicks within 75 s"
            time.sleep(0.2)
        time.sleep(2)
        runner.send_signal(signal.SIGKILL)
        runner.wait()
        assert _marked(prefix), "expected live leftovers right after the kill"
        assert [n for n in os.listdir("/run/netns") if n.startswith(prefix)]
    finally:
        if runner.poll() is None:
            runner.kill()
            runner.wait()
        # What the worker does after a lost trial: the RD cleanup, then the link's.
        rd_cleanup(prefix)
        link_cleanup(prefix)
    time.sleep(0.5)
    assert not [p for p in _marked(prefix) if p.is_running()]
    assert not [n for n in os.listdir("/run/netns") if n.startswith(prefix)]
    assert not list(Path("/usr/local/bin").glob(f"qoelab-rd-{prefix}*"))
    assert not list(Path("/tmp").glob(f"{prefix}*"))
    assert not list(Path("/tmp").glob(f".x2go-*/C-*_stDqoelab-rd-{prefix}*"))
    assert not list(Path("/home").glob(f"*/.x2go/C-*_stDqoelab-rd-{prefix}*"))
    links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True, check=True).stdout
    assert prefix not in links


def test_rd_bench_prints_updates_summary_and_link_as_json():
    reason = _why_not("spice")
    if reason:
        pytest.skip(reason)
    import json

    out = subprocess.run(
        [sys.executable, "-m", "qoelab.rd.bench_cli", "bench", "--protocol", "spice", "--rate", "10mbit",
         "--delay", "10ms", "--loss", "0", "--pages", "2", "--verify-duration", "1s", "--json"],
        capture_output=True, text=True, timeout=90, check=False,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-2000:]
    doc = json.loads(out.stdout)
    assert len(doc["updates"]) == 2
    for u in doc["updates"]:
        assert {"T_ms", "bytes_down", "rate_bps", "pixel_ms", "page"} <= set(u)
        assert u["T_ms"] > 0 and u["bytes_down"] > 0
    assert doc["summary"]["n"] == 2 and doc["link"]["configured"]["rate_bps"] == 10e6


def test_rd_bench_names_the_field_of_a_bad_flag():
    out = subprocess.run(
        [sys.executable, "-m", "qoelab.rd.bench_cli", "bench", "--protocol", "rdp", "--rate", "1mbit"],
        capture_output=True, text=True, timeout=30, check=False,
    )  # fmt: skip
    if os.geteuid() != 0:
        assert out.returncode == 2 and "root" in out.stderr
        return
    assert out.returncode == 2
    assert "protocol:" in out.stderr and "'vnc', 'spice' or 'x2go'" in out.stderr
