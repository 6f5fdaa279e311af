"""QEMU held to a CPU quota (a benchmark's slowed condition): bounds, the real cgroup, its removal."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from qoelab.errors import ParameterError
from qoelab.vm import throttle


@pytest.mark.parametrize("raw", ["0.01", "65", "fast"])
def test_a_quota_out_of_bounds_is_refused_naming_the_variable_and_the_bound(monkeypatch, raw: str) -> None:
    monkeypatch.setenv(throttle.ENV_CPU_QUOTA, raw)
    with pytest.raises(ParameterError) as caught:
        throttle.cpu_quota_from_env()
    message = str(caught.value)
    assert throttle.ENV_CPU_QUOTA in message and raw in message, message
    if raw != "fast":
        assert "0.05..64.0 cores" in message, message


def test_no_quota_unless_asked(monkeypatch) -> None:
    monkeypatch.delenv(throttle.ENV_CPU_QUOTA, raising=False)
    assert throttle.cpu_quota_from_env() is None
    monkeypatch.setenv(throttle.ENV_CPU_QUOTA, "0.6")
    assert throttle.cpu_quota_from_env() == 0.6


def test_a_process_is_held_in_its_own_cgroup_with_the_quota_and_the_cgroup_goes_with_it() -> None:
    try:
        root, version = throttle._cpu_hierarchy()
    except throttle.ThrottleError as err:
        print(f"no CPU cgroup here: {err}")
        pytest.skip(f"host feature missing: {err}")
    if not (root / "cgroup.procs").exists() or not Path("/proc/self/cgroup").exists():
        print(f"no cgroup.procs under {root}: cannot move a process into a CPU cgroup here")
        pytest.skip("host feature missing: a writable cgroup hierarchy")
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        group = throttle.hold(proc.pid, 0.5, "qvq-test0001")
        assert group in throttle.leftover_groups("qvq-test")
        assert str(proc.pid) in (group / "cgroup.procs").read_text().split()
        if version == "v2":
            assert (group / "cpu.max").read_text().split() == ["50000", "100000"]
        else:
            assert (group / "cpu.cfs_quota_us").read_text().strip() == "50000"
            assert (group / "cpu.cfs_period_us").read_text().strip() == "100000"
        assert "qoelab-qvq-test0001" in Path(f"/proc/{proc.pid}/cgroup").read_text()
    finally:
        proc.kill()
        proc.wait(timeout=10)
    throttle.release(group)
    assert not group.exists()
    assert not throttle.leftover_groups("qvq-test")
