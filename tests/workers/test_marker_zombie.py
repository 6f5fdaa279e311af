"""A killed worker's pool process that is still a zombie is dead, not running its trial.

Found by the kill soak (benchmarks/reliability/kill_soak.py): a SIGKILLed worker's pool process is
reparented to init and stays a zombie until init reaps it. Some inits take a second (this lab's
development VM), some never do; psutil still gives a zombie its create time, so its marker looked
alive. The restarted worker then neither cleaned up nor reported the lost run at start-up, and its
heartbeat listed the trial as running: with an init that never reaps, for ever.
"""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import psutil
import pytest

from qoelab import celery_app


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setattr(celery_app, "settings", celery_app.WorkerSettings(name="lab1", workdir=tmp_path))
    return tmp_path


def test_a_zombie_pool_process_counts_as_dead(workdir: Path) -> None:
    proc = subprocess.Popen(["true"])  # not waited for: a zombie until the finally below
    try:
        zombie = psutil.Process(proc.pid)
        deadline = time.monotonic() + 10
        while zombie.status() != psutil.STATUS_ZOMBIE:
            assert time.monotonic() < deadline, "the child did not exit"
            time.sleep(0.01)
        (workdir / "running").mkdir()
        info = {"trial": "9", "pid": proc.pid, "create_time": zombie.create_time(), "prefix": "q9a"}
        (workdir / "running" / f"9.{proc.pid}.json").write_text(json.dumps(info))

        running, dead, live = celery_app.scan_markers()

        assert running == [] and live == {}
        assert [i["trial"] for _, i in dead] == ["9"]
    finally:
        proc.wait()
