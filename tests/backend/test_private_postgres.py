"""The private PostgreSQL cluster scripts/services.sh starts has a password, not `trust`.

Runs the private-cluster branch of a copy of services.sh in a scratch directory on a free port, with
the default URL pointed at a port where nothing answers, so the lab's own PostgreSQL is not touched.
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import stat
import subprocess
import tempfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        os.geteuid() != 0, reason="services.sh starts PostgreSQL as the postgres user: needs root"
    ),
    pytest.mark.skipif(
        not glob.glob("/usr/lib/postgresql/*/bin/initdb"), reason="PostgreSQL is not installed"
    ),
]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def psql(url: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PG")}
    return subprocess.run(
        ["psql", url, "-Atqc", "select 1"], capture_output=True, text=True, env=env, timeout=30
    )


def test_the_private_cluster_refuses_a_connection_without_its_generated_password():
    root = Path(tempfile.mkdtemp(prefix="qoelab-pg-test-", dir="/tmp"))
    root.chmod(0o755)  # the postgres user must reach the data folder
    (root / "scripts").mkdir()
    script = (REPO / "scripts" / "services.sh").read_text()
    unused = free_port()
    script = script.replace("@127.0.0.1:5432/qoelab", f"@127.0.0.1:{unused}/qoelab", 1)
    (root / "scripts" / "services.sh").write_text(script)
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL")}
    env["QOELAB_PRIVATE_PG_PORT"] = str(port)
    run = ["bash", str(root / "scripts" / "services.sh")]
    try:
        up = subprocess.run([*run, "up"], capture_output=True, text=True, env=env, timeout=180)
        assert up.returncode == 0, up.stdout + up.stderr
        state = root / ".state"
        password = (state / "pg_password").read_text().strip()
        assert len(password) >= 32 and password not in up.stdout  # printed masked
        for f in ("pg_password", "env"):
            assert stat.S_IMODE((state / f).stat().st_mode) == 0o600, f
        hba = (state / "postgres" / "pg_hba.conf").read_text()
        rules = [line.split() for line in hba.splitlines() if line.strip() and not line.startswith("#")]
        assert rules and not any("trust" in r for r in rules), hba
        url = f"postgres://postgres:{password}@127.0.0.1:{port}/qoelab"
        assert f"DATABASE_URL={url}" in (state / "env").read_text()
        assert psql(url).returncode == 0
        assert psql(f"postgres://postgres@127.0.0.1:{port}/qoelab").returncode != 0
        assert psql(f"postgres://postgres:wrong@127.0.0.1:{port}/qoelab").returncode != 0
        again = subprocess.run([*run, "up"], capture_output=True, text=True, env=env, timeout=120)
        assert again.returncode == 0 and "initialising" not in again.stdout, again.stdout + again.stderr
    finally:
        subprocess.run([*run, "down"], capture_output=True, env=env, timeout=120)
        shutil.rmtree(root, ignore_errors=True)
