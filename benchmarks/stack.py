"""A private lab stack for benchmarks: gunicorn web, scheduler and ``qoelab worker`` processes.

Each benchmark gets its own PostgreSQL database (dropped and made again per run), its own Redis
database number and a temporary directory for logs, media and work dirs, so it never touches the
demo's or the test suite's data. Processes run as process groups and log to ``<tmp>/<name>.log``.

    with PrivateStack("qoelab_x_bench", redis_db=12, tmp_prefix="qoelab-x-") as stack:
        api = stack.start_web(workers=2)
        stack.start_scheduler()
        stack.start_worker("x-w1", "qxa", stack.add_host("x-w1"))

Needs PostgreSQL and Redis (DATABASE_URL / REDIS_URL as in .state/env); workers need root.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

ROOT = Path(__file__).resolve().parents[1]
VENV_BIN = Path(sys.executable).parent
START_TIMEOUT_S = 120


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def namespaces(prefix: str) -> list[str]:
    from pyroute2 import netns

    return sorted(n for n in netns.listnetns() if n.startswith(prefix))


def with_database(url: str, name: str) -> str:
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc, f"/{name}", parts.query, ""))


def recreate_database(maint_url: str, name: str, drop_only: bool = False) -> None:
    import psycopg

    with psycopg.connect(maint_url, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        if not drop_only:
            conn.execute(f'CREATE DATABASE "{name}"')


class PrivatePostgres:
    """A throwaway PostgreSQL cluster (initdb in /var/tmp, a free port, a generated password) that a
    benchmark may restart; ``url`` is its ``postgres`` database. Gone when the ``with`` block ends."""

    def __init__(self) -> None:
        bins = sorted(Path("/usr/lib/postgresql").glob("*/bin/pg_ctl"))
        if not bins:
            raise SystemExit("PostgreSQL is not installed (make deps installs it)")
        self.bin = bins[-1].parent
        self.port = free_port()
        self.password = secrets.token_urlsafe(24)
        self.url = f"postgres://postgres:{self.password}@127.0.0.1:{self.port}/postgres"
        self.data = Path(tempfile.mkdtemp(prefix="qoelab-bench-pg-", dir="/var/tmp"))

    def _as_postgres(self, *cmd: str, timeout: float = 120) -> None:
        subprocess.run(["runuser", "-u", "postgres", "--", *cmd], check=True, timeout=timeout,
                       stdout=subprocess.DEVNULL)  # fmt: skip

    def pg_ctl(self, action: str, *extra: str) -> None:
        opts = f"-p {self.port} -k {self.data} -c listen_addresses=127.0.0.1"
        self._as_postgres(
            str(self.bin / "pg_ctl"), "-D", str(self.data / "db"), "-l", str(self.data / "server.log"),
            "-w", "-t", "60", "-o", opts, action, *extra,
        )  # fmt: skip

    def __enter__(self) -> PrivatePostgres:
        import shutil

        shutil.chown(self.data, "postgres")
        pwfile = self.data / "pw"
        pwfile.write_text(self.password)
        shutil.chown(pwfile, "postgres")
        self._as_postgres(
            str(self.bin / "initdb"), "-D", str(self.data / "db"), "-U", "postgres", "-E", "UTF8",
            "--auth-local=peer", "--auth-host=scram-sha-256", f"--pwfile={pwfile}",
        )  # fmt: skip
        pwfile.unlink()
        self.pg_ctl("start")
        return self

    def restart(self) -> float:
        """``pg_ctl restart -m fast`` (open connections are cut); returns the seconds it took."""
        t0 = time.monotonic()
        self.pg_ctl("restart", "-m", "fast")
        return time.monotonic() - t0

    def __exit__(self, *exc: object) -> None:
        import shutil

        with contextlib.suppress(Exception):
            self.pg_ctl("stop", "-m", "immediate")
        shutil.rmtree(self.data, ignore_errors=True)


class PrivateStack:
    """Start with ``with``; every process and the database are gone when the block ends."""

    def __init__(
        self,
        db_name: str,
        redis_db: int,
        tmp_prefix: str,
        database_url: str | None = None,
        keep_database: bool = False,
    ) -> None:
        base = database_url or os.environ.get("DATABASE_URL") or "postgres://postgres@127.0.0.1:5432/qoelab"
        self.maint_url = with_database(base, "postgres")
        self.db_url = with_database(base, db_name)
        self.db_name = db_name
        redis = urlsplit(os.environ.get("REDIS_URL") or "redis://127.0.0.1:6379/0")
        self.broker = urlunsplit((redis.scheme, redis.netloc, f"/{redis_db}", "", ""))
        self.tmp = Path(tempfile.mkdtemp(prefix=tmp_prefix))
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.keep_database = keep_database
        self.procs: dict[str, subprocess.Popen] = {}
        self.env = {k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"}
        self.env.update(
            DATABASE_URL=self.db_url,
            REDIS_URL=self.broker,
            QOELAB_SECRET_KEY=secrets.token_urlsafe(50),
            QOELAB_DEBUG="false",
            QOELAB_ALLOWED_HOSTS="127.0.0.1,localhost",
            QOELAB_MEDIA_ROOT=str(self.tmp / "media"),
            QOELAB_STATIC_ROOT=str(self.tmp / "static"),
        )

    # -- lifecycle -------------------------------------------------------------------------------
    def __enter__(self) -> PrivateStack:
        import redis as redis_lib

        redis_lib.Redis.from_url(self.broker).flushdb()  # stale messages of an earlier, killed run
        recreate_database(self.maint_url, self.db_name)
        self.manage("migrate", "--noinput")
        return self

    def __exit__(self, *exc: object) -> None:
        import redis as redis_lib

        self.stop_all()
        if not self.keep_database:
            with contextlib.suppress(Exception):
                recreate_database(self.maint_url, self.db_name, drop_only=True)
        with contextlib.suppress(Exception):
            redis_lib.Redis.from_url(self.broker).flushdb()

    # -- processes -------------------------------------------------------------------------------
    def manage(self, *args: str, timeout: float = 300) -> str:
        out = subprocess.run(
            [sys.executable, str(ROOT / "backend" / "manage.py"), *args],
            env=self.env, capture_output=True, text=True, timeout=timeout,
        )  # fmt: skip
        if out.returncode != 0:
            raise SystemExit(f"manage.py {' '.join(args)} failed:\n{out.stdout}\n{out.stderr}")
        return out.stdout.strip()

    def launch(self, name: str, cmd: list[str], env: dict[str, str] | None = None) -> subprocess.Popen:
        with (self.tmp / f"{name}.log").open("a") as log:
            self.procs[name] = subprocess.Popen(
                cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                env=env or self.env, start_new_session=True, cwd=ROOT,
            )  # fmt: skip
        return self.procs[name]

    def log_tail(self, name: str, lines: int = 30) -> str:
        path = self.tmp / f"{name}.log"
        text = path.read_text(errors="replace") if path.exists() else ""
        return f"--- {name} ---\n" + "\n".join(text.splitlines()[-lines:])

    def wait_until(self, what: str, check: Any, timeout: float, names: list[str] | None = None) -> Any:
        """Poll ``check`` until truthy; fail early, with log tails, if a watched process exits."""
        names = list(self.procs) if names is None else names
        deadline = time.monotonic() + timeout
        while not (value := check()):
            for n in names:
                if n in self.procs and self.procs[n].poll() is not None:
                    raise SystemExit(f"{n} exited while waiting for {what}\n{self.log_tail(n)}")
            if time.monotonic() > deadline:
                tails = "\n".join(self.log_tail(n) for n in names)
                raise SystemExit(f"timed out after {timeout:g} s waiting for {what}\n{tails}")
            time.sleep(0.2)
        return value

    def stop(self, name: str, timeout: float = 120) -> None:
        proc = self.procs.pop(name, None)
        if proc is None or proc.poll() is not None:
            return
        os.killpg(proc.pid, signal.SIGTERM)  # warm: a worker finishes its current trial
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=timeout)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)  # pool processes that outlived the main one
        proc.wait(timeout=10)

    def stop_all(self) -> None:
        for name in list(self.procs):
            self.stop(name)

    # -- the lab's parts -------------------------------------------------------------------------
    def start_web(self, workers: int = 2, researcher: str = "bench") -> Any:
        """gunicorn on a free port; returns an ApiClient for a staff researcher."""
        from qoelab.client import ApiClient

        self.api_token = self.manage("create_researcher", researcher, "--staff")
        self.launch(
            "web",
            [str(VENV_BIN / "gunicorn"), "--chdir", "backend", "qoelab_web.wsgi",
             "-b", f"127.0.0.1:{self.port}", "--workers", str(workers), "--timeout", "120",
             "--no-control-socket"],
        )  # fmt: skip
        api = ApiClient(self.url, self.api_token, retries=2)

        def up() -> bool:
            try:
                api.get("/api/status/")
            except Exception:
                return False
            return True

        self.wait_until("the web server", up, START_TIMEOUT_S, ["web"])
        return api

    def start_scheduler(self, tick: float = 2.0) -> None:
        self.launch(
            "scheduler",
            [sys.executable, str(ROOT / "backend" / "manage.py"), "scheduler", "--interval", str(tick)],
        )

    def add_host(self, name: str, concurrency: int = 1) -> str:
        token = secrets.token_urlsafe(32)
        self.manage("add_host", name, "--token", token, "--concurrency", str(concurrency))
        return token

    def start_worker(self, name: str, base: str, token: str, **extra_env: str) -> subprocess.Popen:
        """A ``qoelab worker`` with its own trial-name prefix base; returns once it registered."""
        env = {k: v for k, v in self.env.items() if k not in ("DATABASE_URL", "DJANGO_SETTINGS_MODULE")}
        env.update(QOELAB_HOST_TOKEN=token, QOELAB_LEFTOVER_PREFIX=base, QOELAB_KVM="0", PYTHONUNBUFFERED="1")
        env.update(extra_env)
        log = self.tmp / f"{name}.log"
        seen = len(log.read_text(errors="replace")) if log.exists() else 0
        cmd = [
            str(VENV_BIN / "qoelab"), "worker", "--broker", self.broker, "--backend", self.url,
            "--name", name, "--workdir", str(self.tmp / name), "--concurrency", "1",
        ]  # fmt: skip
        proc = self.launch(name, cmd, env)
        # The start-up heartbeat is synchronous: once this line is out, the scheduler sees the host.
        self.wait_until(
            f"{name} to register",
            lambda: "registered with" in log.read_text(errors="replace")[seen:],
            START_TIMEOUT_S,
            [name],
        )
        return proc
