"""Two live workers on one host never share a trial prefix base: the second refuses to start."""

from __future__ import annotations

import subprocess
import sys

import pytest

from qoelab import celery_app
from qoelab.errors import QoelabError

# A worker process that takes base qwzq in DIR, says so, and holds it until its stdin closes.
HOLD = """
import pathlib, sys
from qoelab import celery_app as c
c.BASE_LOCK_DIR = pathlib.Path(sys.argv[1])
c.claim_prefix_base("qwzq")
print("held", flush=True)
sys.stdin.read()
"""


def test_a_second_worker_with_the_same_prefix_base_refuses_to_start(tmp_path, monkeypatch):
    monkeypatch.setattr(celery_app, "BASE_LOCK_DIR", tmp_path)
    monkeypatch.setattr(celery_app, "_base_lock", None)
    first = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(tmp_path)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert first.stdout.readline().strip() == "held"  # waits until the first worker holds the lock
        with pytest.raises(QoelabError, match="already uses the trial prefix base 'qwzq'"):
            celery_app.claim_prefix_base("qwzq")
        celery_app.claim_prefix_base("qwzr")  # another base is free
    finally:
        first.communicate("\n", timeout=10)
    # The first worker is gone, and the kernel dropped its lock with it: a successor may start.
    monkeypatch.setattr(celery_app, "_base_lock", None)
    celery_app.claim_prefix_base("qwzq")
