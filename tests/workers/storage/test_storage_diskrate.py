"""The optional disk rate (the thesis' 110/100 MiB/s HDD): parsing, the cgroup it makes on this host,
a real dd slowed inside it, and a killed run's cgroup removed."""

from __future__ import annotations

import secrets
import subprocess
import time
from pathlib import Path

import pytest

from qoelab.errors import ParameterError
from qoelab.jobs.storage_bench import StorageBenchParams, requires_for, storage_run
from qoelab.storage import diskrate
from qoelab.storage.diskrate import MIB, DiskRate, DiskRateError


def test_rates_parse_and_bad_ones_name_the_field_and_bound() -> None:
    assert DiskRate.parse("thesis") == DiskRate(110 * MIB, 100 * MIB)
    assert DiskRate.parse("50/20") == DiskRate(50 * MIB, 20 * MIB)
    assert DiskRate.parse("80 MiB/s") == DiskRate(80 * MIB, 80 * MIB)
    with pytest.raises(ParameterError, match="disk_rate: write rate must be 1..100000 MiB/s, got 0"):
        DiskRate.parse("10/0")
    with pytest.raises(ParameterError, match="disk_rate: must be 'thesis', 'R/W' or one rate"):
        DiskRate.parse("fast")


def test_the_job_takes_a_disk_rate_and_routes_it() -> None:
    params = StorageBenchParams(target="iscsi", disk_rate="thesis")
    assert params.disk_rate == "110/100 MiB/s"
    assert "storage.disk_rate" in requires_for(params)
    assert storage_run(params).disk_rate == DiskRate(110 * MIB, 100 * MIB)
    plain = StorageBenchParams(target="iscsi")
    assert "storage.disk_rate" not in requires_for(plain) and storage_run(plain).disk_rate is None
    with pytest.raises(ValueError, match="disk_rate"):
        StorageBenchParams(disk_rate="0")


def test_a_directory_not_on_a_disk_is_refused_in_words() -> None:
    shm = Path("/dev/shm")
    if not shm.is_dir() or shm.stat().st_dev >> 8:
        pytest.skip("/dev/shm is not a tmpfs here")
    with pytest.raises(DiskRateError, match="is not on a block device"):
        diskrate.device_of(shm)


@pytest.mark.netns  # root: cgroups
def test_dd_inside_the_cgroup_is_slowed_and_nothing_is_left(tmp_path: Path) -> None:
    if why := diskrate.unavailable():
        pytest.skip(why)
    prefix = "qdr" + secrets.token_hex(3)
    size_mib, rate_mib = 24, 8
    with diskrate.throttled(prefix, tmp_path, DiskRate(rate_mib * MIB, rate_mib * MIB)) as throttle:
        assert throttle.path.is_dir() and throttle.path.name == f"qoelab-{prefix}"
        data = tmp_path / "data"
        write = ["dd", "if=/dev/zero", f"of={data}", "bs=1M", f"count={size_mib}", "oflag=direct"]
        read = ["dd", f"if={data}", "of=/dev/null", "bs=1M", "iflag=direct"]
        subprocess.run(throttle.wrap(write), check=True, capture_output=True)
        started = time.monotonic()
        subprocess.run(throttle.wrap(read), check=True, capture_output=True)
        elapsed = time.monotonic() - started
        described = throttle.describe()
    # a throttle can only slow: 24 MiB at 8 MiB/s takes at least ~3 s whatever the load
    assert elapsed >= 0.75 * size_mib / rate_mib, elapsed
    assert described["rate"] == "8/8 MiB/s" and described["device"] == diskrate.device_of(tmp_path)
    assert not throttle.path.exists()


@pytest.mark.netns
def test_a_killed_runs_cgroup_is_removed_by_the_cleanup() -> None:
    if why := diskrate.unavailable():
        pytest.skip(why)
    prefix = "qdr" + secrets.token_hex(3)
    _, root = diskrate.controller()
    left = root / f"qoelab-{prefix}"
    left.mkdir()
    sleeper = subprocess.Popen(["sleep", "60"])
    try:
        (left / "cgroup.procs").write_text(str(sleeper.pid))
        assert diskrate.cleanup_leftovers(prefix) == [f"cgroup {left}"]
        assert not left.exists() and sleeper.poll() is None  # the process lives on, outside
    finally:
        sleeper.kill()
        sleeper.wait()
