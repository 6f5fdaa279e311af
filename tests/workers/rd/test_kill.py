"""A trial SIGKILLed halfway leaves nothing behind once the cleanup functions ran."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import psutil
import pytest

from qoelab.procs import ENV_RD
from qoelab.rd.cleanup import cleanup_leftovers, find_processes

pytestmark = [pytest.mark.netns, pytest.mark.slow]
ROLES = {
    "Xvfb",
    "Xvnc",
    "Xorg",
    "sshd",
    "chromium",
    "xtightvncviewer",
    "remote-viewer",
    "x2goagent",
    "dumpcap",
}

SCRIPT = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from qoelab.emulation import LinkProfile, emulated_link
    from qoelab.rd.bench import BenchRequest, run_bench

    protocol, prefix, workdir = sys.argv[1], sys.argv[2], Path(sys.argv[3])
    started = workdir / "driving"
    with emulated_link(LinkProfile.parse(rate="10mbit", delay="10ms"), prefix=prefix) as link:
        request = BenchRequest.across(link, protocol, workdir / "trial", pages=40, pause_s=2, prefix=prefix)
        run_bench(request, on_step=lambda i: started.write_text(str(i)))
    """
)


def _ours(prefix: str) -> list[psutil.Process]:
    found = []
    for proc in psutil.process_iter(["name"]):
        try:
            if proc.environ().get(ENV_RD, "").startswith(prefix):
                found.append(proc)
        except (psutil.Error, OSError):
            continue
    return found


@pytest.mark.parametrize("protocol", ["vnc", "x2go"])
def test_a_bench_killed_halfway_leaves_no_processes_after_cleanup(protocol, rd_prefix, tmp_path):
    if os.geteuid() != 0:
        pytest.skip("needs root to create network namespaces and start X servers")
    runner = subprocess.Popen(
        [sys.executable, "-c", SCRIPT, protocol, rd_prefix, str(tmp_path)],
        stdout=subprocess.DEVNULL,
        stderr=open(tmp_path / "runner.log", "wb"),  # noqa: SIM115 - closed with the process
    )
    try:
        deadline = time.time() + 60
        while not (tmp_path / "driving").exists():
            assert runner.poll() is None, (tmp_path / "runner.log").read_text()[-2000:]
            assert time.time() < deadline, "the trial did not reach the clicks within 60 s"
            time.sleep(0.2)
        # Halfway: kill once the session's processes run (not after a fixed second).
        while not {p.name() for p in _ours(rd_prefix) if p.is_running()} & ROLES:
            assert runner.poll() is None, (tmp_path / "runner.log").read_text()[-2000:]
            assert time.time() < deadline, "the session's processes never showed"
            time.sleep(0.1)
        runner.send_signal(signal.SIGKILL)
        runner.wait()
        # Killing the owner does not kill the trial's processes: they run in their own groups.
        left = {p.name() for p in _ours(rd_prefix) + find_processes(rd_prefix) if p.is_running()}
        assert left & ROLES, f"expected live leftovers before cleanup, found {left}"
    finally:
        if runner.poll() is None:
            runner.kill()
        removed = cleanup_leftovers(rd_prefix)
        from qoelab.emulation.cleanup import cleanup_leftovers as link_cleanup

        link_cleanup(rd_prefix)
    assert any(r.startswith("process") for r in removed)
    # The cleanup signalled them: until they are gone, within a bound a loaded host meets.
    gone_by = time.time() + 15
    while (alive := [p.pid for p in _ours(rd_prefix) if p.is_running()]) and time.time() < gone_by:
        time.sleep(0.1)
    assert alive == []
    assert find_processes(rd_prefix) == []
    assert not list(Path("/run/netns").glob(f"{rd_prefix}*"))
    assert not list(Path("/usr/local/bin").glob(f"qoelab-rd-{rd_prefix}*"))
