"""Scale-out benchmark: the same link_check sweep with one lab-host worker, then with two.

It starts a private stack like scripts/demo.sh (gunicorn web, ``manage.py scheduler``, real
``qoelab worker`` processes) on its own PostgreSQL database (``qoelab_scale_bench``, dropped and
made again each run) and its own Redis database number, and two hosts with separate names,
tokens, work dirs and trial-name prefixes. After one unmeasured warm-up sweep, each round runs the
sweep with the second host disabled (``PATCH /api/hosts/<name>/ {enabled: false}``, so both
worker processes exist in both phases), then with it enabled. It reports per phase the wall time
(sweep posted -> every trial ended, as the researcher sees it), trials per hour, the mean trial
duration, the share of worker time spent in trials, and the speed-up per round and its median,
and writes them to benchmarks/scale_out/last-run.json.

    set -a && . .state/env && set +a
    .venv/bin/python benchmarks/scale_out/run.py                  # 8 trials, 3 rounds
    .venv/bin/python benchmarks/scale_out/run.py --trials 12 --duration 2s --rounds 1

Needs root (network namespaces), PostgreSQL and Redis (DATABASE_URL / REDIS_URL as in .state/env).
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import os
import platform
import secrets
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

ROOT = Path(__file__).resolve().parents[2]
VENV_BIN = Path(sys.executable).parent
BENCH_DB = "qoelab_scale_bench"
# Not 0 (demo and developers) nor 14 (the test suite flushes it): queues here are ours alone.
REDIS_DB = 12
# Explicit, distinct name bases: on one machine two workers must never share a prefix base.
HOSTS = (("scale-w1", "qsoa"), ("scale-w2", "qsob"))
START_TIMEOUT_S = 120


@dataclass
class Phase:
    round: int
    workers: int
    trials: int
    wall_s: float
    trials_per_hour: float
    mean_trial_s: float
    # Share of the workers' wall time spent inside trials; the rest is dispatch (scheduler tick,
    # Celery, claim) and the tail where one worker has finished and the other has not.
    busy: float
    # Mean idle time of a worker between two of its trials (previous ended -> next claimed).
    mean_gap_s: float
    per_host: dict[str, int]


def _db_urls(base: str) -> tuple[str, str]:
    """(maintenance URL, benchmark URL) on the server of ``base``."""
    parts = urlsplit(base)
    return (
        urlunsplit((parts.scheme, parts.netloc, "/postgres", "", "")),
        urlunsplit((parts.scheme, parts.netloc, f"/{BENCH_DB}", "", "")),
    )


def _fresh_database(maint_url: str) -> None:
    import psycopg

    with psycopg.connect(maint_url, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{BENCH_DB}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{BENCH_DB}"')


def _drop_database(maint_url: str) -> None:
    import psycopg

    with psycopg.connect(maint_url, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{BENCH_DB}" WITH (FORCE)')


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _namespaces(prefix: str) -> list[str]:
    from pyroute2 import netns

    return sorted(n for n in netns.listnetns() if n.startswith(prefix))


class Stack:
    """Web, scheduler and workers as process groups, each logging to a file in ``tmp``."""

    def __init__(self, tmp: Path, env: dict[str, str], url: str) -> None:
        self.tmp = tmp
        self.env = env
        self.url = url
        self.procs: dict[str, subprocess.Popen] = {}

    def manage(self, *args: str) -> str:
        out = subprocess.run(
            [sys.executable, str(ROOT / "backend" / "manage.py"), *args],
            env=self.env, capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        if out.returncode != 0:
            raise SystemExit(f"manage.py {' '.join(args)} failed:\n{out.stdout}\n{out.stderr}")
        return out.stdout.strip()

    def launch(self, name: str, cmd: list[str], env: dict[str, str] | None = None) -> None:
        with (self.tmp / f"{name}.log").open("a") as log:
            self.procs[name] = subprocess.Popen(
                cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                env=env or self.env, start_new_session=True, cwd=ROOT,
            )  # fmt: skip

    def log_tail(self, name: str, lines: int = 30) -> str:
        path = self.tmp / f"{name}.log"
        text = path.read_text(errors="replace") if path.exists() else ""
        return f"--- {name} ---\n" + "\n".join(text.splitlines()[-lines:])

    def wait_until(self, what: str, check: Any, timeout: float, names: list[str]) -> Any:
        deadline = time.monotonic() + timeout
        while not (value := check()):
            for n in names:
                if self.procs[n].poll() is not None:
                    raise SystemExit(f"{n} exited while waiting for {what}\n{self.log_tail(n)}")
            if time.monotonic() > deadline:
                tails = "\n".join(self.log_tail(n) for n in names)
                raise SystemExit(f"timed out after {timeout:g} s waiting for {what}\n{tails}")
            time.sleep(0.5)
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


def _start_worker(stack: Stack, name: str, base: str, token: str, broker: str) -> None:
    env = {k: v for k, v in stack.env.items() if k not in ("DATABASE_URL", "DJANGO_SETTINGS_MODULE")}
    env.update(QOELAB_HOST_TOKEN=token, QOELAB_LEFTOVER_PREFIX=base, QOELAB_KVM="0", PYTHONUNBUFFERED="1")
    cmd = [
        str(VENV_BIN / "qoelab"), "worker", "--broker", broker, "--backend", stack.url,
        "--name", name, "--workdir", str(stack.tmp / name), "--concurrency", "1",
    ]  # fmt: skip
    stack.launch(name, cmd, env)
    log = stack.tmp / f"{name}.log"
    # The start-up heartbeat is synchronous: once this line is out, the scheduler sees the host.
    stack.wait_until(
        f"{name} to register",
        lambda: "registered with" in log.read_text(errors="replace"),
        START_TIMEOUT_S,
        [name],
    )


def _run_sweep(
    stack: Stack, api: Any, workers: int, trials: int, args: argparse.Namespace, label: str = "", rnd: int = 0
) -> Phase:
    spec = {
        "experiment": {"name": "scale-out benchmark"},
        "job_type": "link_check",
        "name": f"{label or 'measured'}: {trials} trials, {workers} worker(s)",
        "grid": {"rate": [args.rate]},
        "fixed": {"delay": "5ms", "duration": args.duration},
        "repetitions": trials,
    }
    t0 = time.monotonic()
    sweep = api.post("/api/sweeps/", spec, "creating the sweep")

    def done() -> dict[str, Any] | None:
        prog = api.get(f"/api/sweeps/{sweep['id']}/")["progress"]
        return prog if prog["total"] and prog["done"] == prog["total"] else None

    names = [n for n, _ in HOSTS] + ["web", "scheduler"]
    stack.wait_until(f"the sweep with {workers} worker(s)", done, 60 + trials * 120, names)
    wall = time.monotonic() - t0
    rows = api.get_all("/api/trials/", sweep=sweep["id"])
    bad = [r for r in rows if r["status"] != "succeeded" or r["attempts"] != 1]
    if bad:
        raise SystemExit(f"trials that did not succeed on their first attempt: {bad}")
    per_host: dict[str, int] = {}
    spans: dict[str, list[tuple[dt.datetime, dt.datetime]]] = {}
    for r in rows:
        per_host[r["host_name"]] = per_host.get(r["host_name"], 0) + 1
        span = (dt.datetime.fromisoformat(r["started_at"]), dt.datetime.fromisoformat(r["finished_at"]))
        spans.setdefault(r["host_name"], []).append(span)
    durations = [(end - start).total_seconds() for host_spans in spans.values() for start, end in host_spans]
    gaps = [
        (b[0] - a[1]).total_seconds()
        for host_spans in map(sorted, spans.values())
        for a, b in zip(host_spans, host_spans[1:], strict=False)
    ]
    if not label and len(per_host) != workers:
        raise SystemExit(f"expected trials on {workers} host(s), got {per_host}")
    return Phase(
        round=rnd,
        workers=workers,
        trials=trials,
        wall_s=round(wall, 1),
        trials_per_hour=round(trials / wall * 3600, 1),
        mean_trial_s=round(statistics.fmean(durations), 1),
        busy=round(sum(durations) / (wall * workers), 2),
        mean_gap_s=round(statistics.fmean(gaps), 1) if gaps else 0.0,
        per_host=per_host,
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=8, help="link_check trials per sweep (default 8)")
    ap.add_argument("--duration", default="1s", help="iperf3 seconds per direction (default 1s)")
    ap.add_argument(
        "--rate", default="8mbit", help="link rate; high rates make trials CPU-bound (default 8mbit)"
    )
    ap.add_argument("--rounds", type=int, default=3, help="1-worker + 2-worker pairs (default 3)")
    ap.add_argument("--tick", type=float, default=2.0, help="scheduler interval, s (default 2, as shipped)")
    ap.add_argument("--json", type=Path, default=Path(__file__).with_name("last-run.json"))
    args = ap.parse_args()
    if os.geteuid() != 0:
        raise SystemExit("needs root (network namespaces)")
    load_at_start = [round(x, 2) for x in os.getloadavg()]

    from qoelab.client import ApiClient

    maint, db_url = _db_urls(os.environ.get("DATABASE_URL") or "postgres://postgres@127.0.0.1:5432/qoelab")
    redis = urlsplit(os.environ.get("REDIS_URL") or "redis://127.0.0.1:6379/0")
    broker = urlunsplit((redis.scheme, redis.netloc, f"/{REDIS_DB}", "", ""))
    import redis as redis_lib

    redis_lib.Redis.from_url(broker).flushdb()  # stale messages of an earlier, killed run
    _fresh_database(maint)

    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    tmp = Path(tempfile.mkdtemp(prefix="qoelab-scale-out-"))
    env = {k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"}
    env.update(
        DATABASE_URL=db_url,
        REDIS_URL=broker,
        QOELAB_SECRET_KEY=secrets.token_urlsafe(50),
        QOELAB_DEBUG="false",
        QOELAB_ALLOWED_HOSTS="127.0.0.1,localhost",
        QOELAB_MEDIA_ROOT=str(tmp / "media"),
        QOELAB_STATIC_ROOT=str(tmp / "static"),
    )
    stack = Stack(tmp, env, url)
    phases: list[Phase] = []
    try:
        stack.manage("migrate", "--noinput")
        # Staff: only staff may enable or disable a host.
        api_token = stack.manage("create_researcher", "bench", "--staff")
        tokens = {}
        for name, _ in HOSTS:
            tokens[name] = secrets.token_urlsafe(32)
            stack.manage("add_host", name, "--token", tokens[name], "--concurrency", "1")
        stack.launch(
            "web",
            [str(VENV_BIN / "gunicorn"), "--chdir", "backend", "qoelab_web.wsgi",
             "-b", f"127.0.0.1:{port}", "--workers", "2", "--timeout", "120"],
        )  # fmt: skip
        api = ApiClient(url, api_token, retries=2)

        def web_up() -> bool:
            try:
                api.get("/api/status/")
            except Exception:
                return False
            return True

        stack.wait_until("the web server", web_up, START_TIMEOUT_S, ["web"])
        stack.launch(
            "scheduler",
            [sys.executable, str(ROOT / "backend" / "manage.py"), "scheduler", "--interval", str(args.tick)],
        )
        for name, base in HOSTS:
            _start_worker(stack, name, base, tokens[name], broker)
        # Unmeasured: each worker's first trial pays for first-use costs (page cache, tools).
        _run_sweep(stack, api, 2, 2, args, label="warm-up")
        second = HOSTS[1][0]
        for rnd in range(1, args.rounds + 1):
            for workers in (1, 2):
                # Between sweeps every trial has ended, so no host is busy when this switches.
                resp = api.request(
                    "PATCH", f"/api/hosts/{second}/", json={"enabled": workers == 2}, idempotent=True
                )
                api.check(resp, f"enabling/disabling {second}")
                phase = _run_sweep(stack, api, workers, args.trials, args, rnd=rnd)
                print(f"round {rnd}, {workers} worker(s): {phase}", flush=True)
                phases.append(phase)
    finally:
        stack.stop_all()
        left = [n for _, base in HOSTS for n in _namespaces(base)]
        _drop_database(maint)
        redis_lib.Redis.from_url(broker).flushdb()
    if left:
        raise SystemExit(f"namespaces left behind: {left} (logs in {tmp})")

    speed_ups = [
        round(one.wall_s / two.wall_s, 2) for one, two in zip(phases[::2], phases[1::2], strict=True)
    ]
    result = {
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "command": " ".join([".venv/bin/python", "benchmarks/scale_out/run.py", *sys.argv[1:]]),
        "machine": {
            "cpus": os.cpu_count(),
            "kernel": platform.release(),
            "load_at_start": load_at_start,
            "load_at_end": [round(x, 2) for x in os.getloadavg()],
        },
        "scheduler_tick_s": args.tick,
        "sweep": {
            "job_type": "link_check",
            "trials": args.trials,
            "rate": args.rate,
            "duration": args.duration,
        },
        "phases": [asdict(p) for p in phases],
        "speed_ups": speed_ups,
        "median_speed_up": statistics.median(speed_ups),
    }
    args.json.write_text(json.dumps(result, indent=2) + "\n")
    print(
        "\n| round | workers | wall time | trials/hour | mean trial | gap between trials | busy | speed-up |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for p in phases:
        cells = [str(p.round), str(p.workers), f"{p.wall_s:.1f} s", f"{p.trials_per_hour:.0f}"]
        cells += [f"{p.mean_trial_s:.1f} s", f"{p.mean_gap_s:.1f} s", f"{p.busy:.0%}"]
        cells.append(f"{speed_ups[p.round - 1]:.2f}x" if p.workers == 2 else "")
        print("| " + " | ".join(cells) + " |")
    print(f"\nmedian speed-up with two workers: {result['median_speed_up']:.2f}x")
    print(f"logs in {tmp}; written {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
