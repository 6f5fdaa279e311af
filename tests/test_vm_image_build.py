"""The wait for the guest image that ``make test`` builds beside tests/backend
(tests/fixtures/vm_image_build.py), against a real background process standing in for the build."""

from __future__ import annotations

import subprocess
from pathlib import Path

from fixtures.vm_image_build import TESTS, build_outcome, runs_beside_the_build, wait_for_build


def _start(directory: Path, script: str) -> subprocess.Popen:
    """A background build as scripts/test.sh starts one: its pid in ``pid``, its status in ``rc``."""
    status = f"echo $? > {directory}/rc.tmp; mv {directory}/rc.tmp {directory}/rc"
    proc = subprocess.Popen(["bash", "-c", f"( {script} ); {status}"])
    (directory / "pid").write_text(f"{proc.pid}\n")
    return proc


def test_only_the_backends_tests_run_beside_the_build() -> None:
    assert runs_beside_the_build(TESTS / "backend" / "test_dashboard.py")
    assert not runs_beside_the_build(TESTS / "e2e" / "sweeps" / "test_lifecycle_in_chromium.py")
    assert not runs_beside_the_build(TESTS / "workers" / "vm" / "test_vm_guest.py")
    assert not runs_beside_the_build(TESTS / "test_compose.py")
    assert not runs_beside_the_build(Path("/elsewhere/backend/test_x.py"))


def test_the_wait_ends_when_the_build_writes_its_status(tmp_path: Path) -> None:
    (tmp_path / "log").write_text("vm-image: debootstrap\nvm-image: built out in 3 s\n")
    gate = tmp_path / "go"
    proc = _start(tmp_path, f"while [ ! -e {gate} ]; do sleep 0.05; done; exit 0")
    assert build_outcome(tmp_path) is None  # still running: the tests wait
    gate.touch()
    rc, tail, waited = wait_for_build(tmp_path, limit_s=60)
    proc.wait(timeout=10)
    assert rc == "0" and "built out in 3 s" in tail and waited >= 0


def test_a_failed_build_gives_its_status_and_the_end_of_its_log(tmp_path: Path) -> None:
    (tmp_path / "log").write_text("vm-image: debootstrap failed\n")
    _start(tmp_path, "exit 3").wait(timeout=10)
    assert wait_for_build(tmp_path, limit_s=60)[:2] == ("3", "vm-image: debootstrap failed")


def test_a_build_gone_without_a_status_is_not_waited_for(tmp_path: Path) -> None:
    proc = subprocess.Popen(["true"])
    proc.wait(timeout=10)
    (tmp_path / "pid").write_text(f"{proc.pid}\n")
    rc, tail, _ = wait_for_build(tmp_path, limit_s=60)
    assert rc == "gone" and "no log" in tail


def test_a_hung_build_ends_the_wait_at_its_limit(tmp_path: Path) -> None:
    proc = _start(tmp_path, "sleep 60")
    try:
        assert wait_for_build(tmp_path, limit_s=0.5)[0] == "hung"
    finally:
        proc.kill()
        proc.wait(timeout=10)
