"""Shared fixtures of the integration tests: the ``qoelab`` command as a researcher would run it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

QOELAB = Path(sys.executable).with_name("qoelab")


@pytest.fixture
def run(live_server: Any, alice: Any) -> Any:
    """``run("sweep", "status", "3")``: the installed ``qoelab`` against the live backend as alice."""
    from accounts.services import issue_token

    token = issue_token(alice)
    env = {k: v for k, v in os.environ.items() if not k.startswith("QOELAB_")}
    env.update(QOELAB_API_URL=live_server.url, QOELAB_API_TOKEN=token, COLUMNS="100")

    def qoelab(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([str(QOELAB), *args], capture_output=True, text=True, env=env, timeout=60)

    return qoelab
