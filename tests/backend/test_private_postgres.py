"""scripts/services.sh never hands the lab a database superuser, and what it starts has passwords.

- The private PostgreSQL cluster it starts uses scram-sha-256, not `trust`, and the lab connects as
  the role `qoelab` (not a superuser); the private Redis asks for a password. Both passwords live in
  .state (0600) and never in a process's arguments.
- On a cluster it did not create whose superuser answers without a password (Debian's packaged
  cluster on the development machines), it makes the role `qoelab`, hands it the database and what
  an earlier run made in it as the superuser, and warns that the cluster trusts local connections.

Each test runs a copy of services.sh in a scratch directory on free ports, with the default URLs
pointed where nothing answers (or at a cluster the test made), so the lab's own services are not
touched.
"""

from __future__ import annotations

import glob
import json
import os
import shutil
import socket
import stat
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
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


@dataclass
class Scratch:
    root: Path
    env: dict[str, str]

    @property
    def state(self) -> Path:
        return self.root / ".state"

    def services(self, action: str = "up") -> subprocess.CompletedProcess:
        return subprocess.run(
            ["bash", str(self.root / "scripts" / "services.sh"), action],
            capture_output=True, text=True, env=self.env, timeout=180,
        )  # fmt: skip

    def lab_env(self) -> dict[str, str]:
        out = subprocess.run(["bash", "-c", f"source {self.state}/env; echo $DATABASE_URL; echo $REDIS_URL"],
                             capture_output=True, text=True, check=True)  # fmt: skip
        db, redis = out.stdout.split()
        return {"db": db, "redis": redis}


@pytest.fixture
def scratch() -> Iterator[Scratch]:
    """A copy of services.sh whose default PostgreSQL and Redis are ports where nothing answers."""
    root = Path(tempfile.mkdtemp(prefix="qoelab-pg-test-", dir="/tmp"))
    root.chmod(0o755)  # the postgres user must reach the data folder
    (root / "scripts").mkdir()
    script = (REPO / "scripts" / "services.sh").read_text()
    script = script.replace("@127.0.0.1:5432/qoelab", f"@127.0.0.1:{free_port()}/qoelab", 1)
    script = script.replace("redis://127.0.0.1:6379/0", f"redis://127.0.0.1:{free_port()}/0", 1)
    (root / "scripts" / "services.sh").write_text(script)
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL")}
    env["QOELAB_PRIVATE_PG_PORT"] = str(free_port())
    env["QOELAB_PRIVATE_REDIS_PORT"] = str(free_port())
    s = Scratch(root, env)
    try:
        yield s
    finally:
        s.services("down")
        shutil.rmtree(root, ignore_errors=True)


def sql(url: str, query: str) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PG")}
    out = subprocess.run(["psql", url, "-Atqc", query], capture_output=True, text=True, env=env, timeout=30)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


def test_the_private_cluster_and_redis_have_passwords_and_the_lab_is_not_a_superuser(scratch):
    up = scratch.services()
    assert up.returncode == 0, up.stdout + up.stderr
    state, port = scratch.state, scratch.env["QOELAB_PRIVATE_PG_PORT"]
    admin = (state / "pg_password").read_text().strip()
    password = (state / "db_password").read_text().strip()
    redis_password = (state / "redis_password").read_text().strip()
    assert min(len(admin), len(password), len(redis_password)) >= 32
    for secret in (admin, password, redis_password):
        assert secret not in up.stdout + up.stderr  # printed masked
    for f in ("pg_password", "db_password", "redis_password", "env", "redis/redis.conf"):
        assert stat.S_IMODE((state / f).stat().st_mode) == 0o600, f
    hba = (state / "postgres" / "pg_hba.conf").read_text()
    rules = [line.split() for line in hba.splitlines() if line.strip() and not line.startswith("#")]
    assert rules and not any("trust" in r for r in rules), hba

    urls = scratch.lab_env()
    assert urls["db"] == f"postgres://qoelab:{password}@127.0.0.1:{port}/qoelab"
    assert (
        sql(urls["db"], "select rolsuper, rolcreaterole from pg_roles where rolname = current_user") == "f|f"
    )
    assert (
        sql(urls["db"], "select pg_get_userbyid(datdba) from pg_database where datname = 'qoelab'")
        == "qoelab"
    )
    assert "made role qoelab" in up.stdout and "trusts local connections" not in up.stderr
    assert (
        psql(f"postgres://postgres:{admin}@127.0.0.1:{port}/qoelab").returncode == 0
    )  # kept for services.sh
    assert psql(f"postgres://postgres@127.0.0.1:{port}/qoelab").returncode != 0
    assert psql(f"postgres://qoelab:wrong@127.0.0.1:{port}/qoelab").returncode != 0

    rport = scratch.env["QOELAB_PRIVATE_REDIS_PORT"]
    assert urls["redis"] == f"redis://:{redis_password}@127.0.0.1:{rport}/0"
    cli = ["redis-cli", "-p", rport, "ping"]
    assert "NOAUTH" in subprocess.run(cli, capture_output=True, text=True, timeout=10).stdout
    with_auth = subprocess.run(
        cli, capture_output=True, text=True, timeout=10, env={"REDISCLI_AUTH": redis_password}
    )
    assert with_auth.stdout.strip() == "PONG"
    pid = (state / "redis" / "redis.pid").read_text().strip()
    assert redis_password not in Path(f"/proc/{pid}/cmdline").read_bytes().decode()  # ps shows argv to all

    again = scratch.services()
    assert again.returncode == 0 and "initialising" not in again.stdout, again.stdout + again.stderr
    assert scratch.lab_env() == urls


def test_on_a_trusting_cluster_it_did_not_make_the_lab_gets_its_own_role_and_a_warning(scratch):
    """Debian's packaged cluster trusted 127.0.0.1: `make demo` connected as postgres, and so could
    any local user, reading password hashes and live session keys (issue 33)."""
    bin_dir = Path(sorted(glob.glob("/usr/lib/postgresql/*/bin"))[-1])
    data, port = scratch.root / "host-cluster", free_port()
    data.mkdir()
    shutil.chown(data, "postgres")

    def as_postgres(*cmd: str) -> None:
        subprocess.run(["su", "postgres", "-s", "/bin/sh", "-c", " ".join(cmd)], check=True,
                       capture_output=True, timeout=120)  # fmt: skip

    as_postgres(f"{bin_dir}/initdb", "-D", str(data), "-U", "postgres", "--auth=trust", ">/dev/null")
    as_postgres(f"{bin_dir}/pg_ctl", "-D", str(data), "-l", f"{data}/log", "-w", "-t", "60",
                "-o", f"'-p {port} -k /tmp -c listen_addresses=127.0.0.1'", "start")  # fmt: skip
    try:
        host = f"postgres://postgres@127.0.0.1:{port}"
        sql(f"{host}/postgres", "create database qoelab")
        sql(f"{host}/qoelab", "create table older_run (id bigint generated always as identity, note text)")
        scratch.env["DATABASE_URL"] = f"{host}/qoelab"  # what an admin's .env or the old default gave
        up = scratch.services()
        assert up.returncode == 0, up.stdout + up.stderr
        assert "made role qoelab" in up.stdout and "trusts local connections" in up.stderr
        url = scratch.lab_env()["db"]
        assert url.startswith("postgres://qoelab:") and url.endswith(f"@127.0.0.1:{port}/qoelab")
        assert sql(url, "select rolsuper from pg_roles where rolname = current_user") == "f"
        # What the superuser made before is the lab role's now: migrations can alter it.
        assert sql(url, "select tableowner from pg_tables where tablename = 'older_run'") == "qoelab"
        sql(url, "alter table older_run add column more text; insert into older_run (note) values ('x')")
        # The role can make and drop the test database pytest-django needs, and nothing above that.
        sql(url.rsplit("/", 1)[0] + "/postgres", "create database test_qoelab_check")
        sql(url.rsplit("/", 1)[0] + "/postgres", "drop database test_qoelab_check")
        flags = "select json_build_array(rolcreatedb, rolcreaterole, rolreplication) from pg_roles"
        assert json.loads(sql(url, f"{flags} where rolname = 'qoelab'")) == [True, False, False]
    finally:
        as_postgres(f"{bin_dir}/pg_ctl", "-D", str(data), "-m", "immediate", "stop")
