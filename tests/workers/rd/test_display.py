"""X displays: free-number selection with lock files, start/stop, screenshots, stability."""

from __future__ import annotations

import os
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from qoelab.procs import ProcSet
from qoelab.rd.display import ScreenWatch, display_free, find_free_display, start_xvfb, wait_stable

pytestmark = pytest.mark.netns


@pytest.fixture
def procs(tmp_path, rd_prefix):
    if os.geteuid() != 0 or not Path("/usr/bin/Xvfb").exists():
        pytest.skip("needs root and Xvfb (Debian package xvfb)")
    ps = ProcSet(rd_prefix, tmp_path / "logs")
    yield ps
    ps.stop_all()


def test_it_treats_a_lock_of_a_dead_server_as_free_and_removes_it():
    n = find_free_display()
    lock = Path(f"/tmp/.X{n}-lock")
    dead = subprocess.Popen(["true"])
    dead.wait()
    lock.write_text(f"{dead.pid:>10}\n")
    try:
        assert display_free(n)
        assert not lock.exists()
    finally:
        lock.unlink(missing_ok=True)


def test_it_treats_a_lock_of_a_live_process_as_taken():
    n = find_free_display()
    lock = Path(f"/tmp/.X{n}-lock")
    lock.write_text(f"{os.getpid():>10}\n")
    try:
        assert not display_free(n)
        assert lock.exists()
    finally:
        lock.unlink(missing_ok=True)


def test_it_starts_and_stops_xvfb_on_a_free_display(procs):
    display = start_xvfb(procs, 640, 480)
    lock = Path(f"/tmp/.X{display.number}-lock")
    assert lock.exists() and int(lock.read_text()) == display.proc.pid
    img = display.grab()
    assert img.shape == (480, 640, 3)
    procs.stop_all()
    assert not display.proc.alive()
    assert not lock.exists()
    assert display_free(display.number)


def test_it_sees_the_screen_change_and_then_settle(procs):
    display = start_xvfb(procs, 320, 240)
    assert wait_stable(display, 0.3, timeout_s=5) is not None
    watch = ScreenWatch(display).start()
    try:
        time.sleep(0.3)
        before = time.time()
        subprocess.run(["xsetroot", "-display", display.name, "-solid", "red"], check=True)
        deadline = time.time() + 3
        while watch.last_change < before and time.time() < deadline:
            time.sleep(0.05)
        assert watch.last_change >= before
        time.sleep(0.4)
        assert watch.stable_for(0.3)
        assert (display.grab()[10, 10] == (255, 0, 0)).all()
    finally:
        watch.stop()


def test_it_skips_display_numbers_whose_lock_is_held(procs, monkeypatch):
    first = start_xvfb(procs, 320, 240)
    import qoelab.rd.display as d

    monkeypatch.setattr(d, "DISPLAY_RANGE", (first.number, first.number + 2))
    with tempfile.TemporaryDirectory():
        second = start_xvfb(procs, 320, 240)
    assert second.number == first.number + 1
