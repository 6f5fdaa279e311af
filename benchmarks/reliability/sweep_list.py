"""The sweep list as the lab grows: latency of ``GET /api/sweeps/`` and the experiments page at 100,
1,000 and 10,000 sweeps, under open-loop loads of ``--rates`` requests/s (issue 33).

A private stack (benchmarks/stack.py: gunicorn with 2 sync workers, as ``make demo`` runs it behind
its nginx) is seeded with bulk inserts: sweeps of 4 trials each in a mix of states, 100 sweeps per
experiment, all the researcher's. At each size the script

- counts the SQL queries of one request of each target (Django's ``CaptureQueriesContext`` in a
  ``manage.py shell`` of the same database): constant across sizes means no N+1;
- at each rate, after 3 s of warm-up, sends that many requests/s for ``--seconds`` seconds, open loop:
  request i is due at ``start + i / rate`` whatever the earlier ones did, and its latency counts from
  that moment, so a slow server shows as queueing (a closed-loop client such as wrk would slow down
  with it instead). The target is the first rate (100); the second shows where a page that misses
  it stands.

Medians and percentiles go to benchmarks/reliability/sweep-list-last-run.json; ``--write-docs`` puts
the table into docs/reliability.md (between the ``--marker`` markers, sweep-list by default).

    set -a && . .state/env && set +a
    .venv/bin/python benchmarks/reliability/sweep_list.py --write-docs
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT / "workers"))
from docblock import write_block  # noqa: E402
from stack import PrivateStack  # noqa: E402

from qoelab.hostfacts import cpu_provenance  # noqa: E402

DOC = ROOT / "docs" / "reliability.md"
TARGET_P99_MS = 100.0

# Grows the lab to {total} sweeps (bulk inserts: 10,000 sweeps take seconds, not the minutes
# create_sweep's validation would), then prints a session key for the HTML page.
SEED = """
import random
from datetime import timedelta
from importlib import import_module
from django.conf import settings
from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY, get_user_model
from django.utils import timezone
from experiments.models import Experiment, Sweep, Trial
user = get_user_model().objects.get(username="bench")
rng = random.Random(Sweep.objects.count())
now = timezone.now()
have = Sweep.objects.count()
new = []
exp = Experiment.objects.filter(owner=user).order_by("-id").first()
for i in range(have, {total}):
    if i % 100 == 0 or exp is None:
        exp = Experiment.objects.create(owner=user, name=f"grown {{i // 100}}", job_type="link_check")
    new.append(Sweep(experiment=exp, name=f"sweep {{i}}", job_type="link_check",
                     grid={{"rate": ["8mbit", "16mbit"], "delay": ["5ms", "20ms"]}},
                     grid_order=["rate", "delay"], fixed={{"duration": "2s"}}, repetitions=1, seed=i,
                     trial_count=4, created_by=user))
trials = []
for sweep in Sweep.objects.bulk_create(new, batch_size=2000):
    for k, (rate, delay) in enumerate([(r, d) for r in ("8mbit", "16mbit") for d in ("5ms", "20ms")]):
        state = rng.choices(["succeeded", "failed", "running", "pending"], [6, 1, 1, 2])[0]
        start = now - timedelta(seconds=rng.uniform(60, 600))
        done = state in ("succeeded", "failed")
        trials.append(Trial(sweep=sweep, index=k, params={{"rate": rate, "delay": delay}}, resolved={{}},
                            status=state, started_at=start if state != "pending" else None,
                            finished_at=start + timedelta(seconds=rng.uniform(5, 40)) if done else None))
Trial.objects.bulk_create(trials, batch_size=5000)
# What autovacuum does to a lab that grew over months: planner statistics and a visibility map
# (without them a fresh bulk load is planned as if the tables were empty).
from django.db import connection
with connection.cursor() as cur:
    for table in ("experiments_experiment", "experiments_sweep", "experiments_trial"):
        cur.execute(f"VACUUM ANALYZE {{table}}")
s = import_module(settings.SESSION_ENGINE).SessionStore()
s[SESSION_KEY] = str(user.pk)
s[BACKEND_SESSION_KEY] = settings.AUTHENTICATION_BACKENDS[0]
s[HASH_SESSION_KEY] = user.get_session_auth_hash()
s.create()
print(Sweep.objects.count(), s.session_key)
"""

# Queries of one request of each target, counted in-process against the same database, and the
# median time of one request there (no HTTP, no other load): the cost the open loop queues behind.
COUNT = """
import statistics, time
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
c = Client(HTTP_HOST="127.0.0.1", HTTP_AUTHORIZATION="Token {token}")
c.cookies["sessionid"] = "{session}"
for path in {paths!r}:
    accept = "application/json" if path.startswith("/api/") else "text/html"
    c.get(path)  # warm: first-request work is not the per-request cost
    with CaptureQueriesContext(connection) as ctx:
        r = c.get(path, HTTP_ACCEPT=accept)
    assert r.status_code == 200, (path, r.status_code)
    queries = len(ctx.captured_queries)  # now: the next request's start empties the log it reads
    took = []
    for _ in range(30):
        t = time.perf_counter()
        c.get(path, HTTP_ACCEPT=accept)
        took.append((time.perf_counter() - t) * 1e3)
    print(path, queries, round(statistics.median(took), 1))
"""


async def fetch(host: str, port: int, request: bytes) -> int:
    """One request on its own connection (gunicorn's sync workers close after each answer);
    returns the status code once the whole body has arrived."""
    reader, writer = await asyncio.open_connection(host, port)
    try:
        writer.write(request)
        answer = await reader.read()  # to EOF: the server closes when the body is complete
    finally:
        writer.close()
    return int(answer[9:12]) if answer.startswith(b"HTTP/1.") else 0


async def open_loop(url: str, headers: dict[str, str], rate: float, seconds: float) -> dict[str, Any]:
    """Send ``rate`` requests/s for ``seconds`` s on a schedule; latencies from each due time.

    Raw asyncio streams, not an HTTP client library: at 100 requests/s httpx used most of a core
    of the two the server shares, which measured the client (issue 33)."""
    parts = urlsplit(url)
    host, port = parts.hostname or "127.0.0.1", parts.port or 80
    lines = [f"GET {parts.path}{'?' + parts.query if parts.query else ''} HTTP/1.1", f"Host: {host}",
             "Connection: close", *(f"{k}: {v}" for k, v in headers.items())]  # fmt: skip
    request = ("\r\n".join(lines) + "\r\n\r\n").encode()
    n = int(rate * seconds)
    latencies: list[float] = []
    errors = 0
    start = time.perf_counter() + 0.5

    async def one(i: int) -> None:
        nonlocal errors
        due = start + i / rate
        await asyncio.sleep(max(0.0, due - time.perf_counter()))
        try:
            code = await asyncio.wait_for(fetch(host, port, request), 30)
        except (OSError, TimeoutError):
            code = 0
        if code == 200:
            latencies.append((time.perf_counter() - due) * 1e3)
        else:
            errors += 1

    await asyncio.gather(*(one(i) for i in range(n)))
    elapsed = time.perf_counter() - start
    lat = np.array(latencies) if latencies else np.array([float("nan")])
    return {
        "sent": n,
        "ok": len(latencies),
        "errors": errors,
        "achieved_rps": round(n / elapsed, 1),
        "p50_ms": round(float(np.percentile(lat, 50)), 1),
        "p90_ms": round(float(np.percentile(lat, 90)), 1),
        "p99_ms": round(float(np.percentile(lat, 99)), 1),
        "max_ms": round(float(lat.max()), 1),
    }


def markdown(result: dict[str, Any]) -> str:
    m = result["machine"]
    lines = [
        f"Measured {result['date']} at commit {result['commit']} on {m['cpu']} ({m['cpus']} cores, Linux "
        f"{m['kernel']}, load {m['load_at_start'][0]} at the start), gunicorn with "
        f"{result['web_workers']} sync workers reached directly, the client on the same host; open loop "
        f"for {result['seconds']:g} s per cell, latency from each request's due time. Target: p99 ≤ "
        f"{TARGET_P99_MS:g} ms at {result['rates'][0]:g} requests/s.",
        "",
        "| sweeps | target | queries per request | one request in-process | offered req/s | achieved req/s "
        "| p50 | p90 | p99 | max | errors | p99 ≤ 100 ms |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for size in result["sizes"]:
        for row in size["cells"]:
            met = "yes" if row["p99_ms"] <= TARGET_P99_MS and not row["errors"] else "**no**"
            lines.append(
                f"| {size['sweeps']:,} | {row['target']} (`{row['path']}`) | {row['queries']} "
                f"| {row['in_process_ms']} ms | {row['rate']:g} | {row['achieved_rps']} "
                f"| {row['p50_ms']} ms | {row['p90_ms']} ms "
                f"| {row['p99_ms']} ms | {row['max_ms']} ms | {row['errors']} | {met} |"
            )
    lines += ["", "```", result["command"], "```"]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="100,1000,10000", help="lab sizes in sweeps (default 100,1000,10000)")
    ap.add_argument("--rates", default="100,50", help="requests/s, open loop (default 100,50)")
    ap.add_argument("--seconds", type=float, default=20.0, help="length of each cell (default 20)")
    ap.add_argument("--web-workers", type=int, default=2, help="gunicorn workers (default 2, as make demo)")
    ap.add_argument("--json", type=Path, default=Path(__file__).with_name("sweep-list-last-run.json"))
    ap.add_argument("--write-docs", action="store_true")
    ap.add_argument("--marker", default="sweep-list", help="the doc block to write (default sweep-list)")
    ap.add_argument("--report", action="store_true", help="render --json again; measure nothing")
    args = ap.parse_args(argv)
    if args.report:
        result = json.loads(args.json.read_text())
    else:
        result = measure(args)
        args.json.write_text(json.dumps(result, indent=2) + "\n")
    table = markdown(result)
    print(table)
    if args.write_docs:
        write_block(DOC, f"<!-- {args.marker}:begin -->", f"<!-- {args.marker}:end -->", table)
    return 0


def measure(args: argparse.Namespace) -> dict[str, Any]:
    """Grow the lab size by size and load each target at each rate; the result as committed."""
    sizes = sorted(int(s) for s in args.sizes.split(","))
    rates = [float(r) for r in args.rates.split(",")]
    load_at_start = [round(x, 2) for x in os.getloadavg()]
    results = []
    with PrivateStack("qoelab_sweeplist_bench", redis_db=9, tmp_prefix="qoelab-sweeplist-") as stack:
        stack.start_web(workers=args.web_workers)
        token = {"Authorization": f"Token {stack.api_token}", "Accept": "application/json"}
        for size in sizes:
            out = stack.manage("shell", "-c", SEED.format(total=size), timeout=900)
            count, session = out.split()[-2:]
            targets = {
                "sweep list": ("/api/sweeps/", token),
                "experiments page": ("/", {"Cookie": f"sessionid={session}"}),
            }
            counted = stack.manage(
                "shell",
                "-c",
                COUNT.format(token=stack.api_token, session=session, paths=[p for p, _ in targets.values()]),
            )
            measured = [line.split() for line in counted.splitlines() if line.startswith("/")]
            queries = {path: int(n) for path, n, _ in measured}
            in_process = {path: float(ms) for path, _, ms in measured}
            rows = []
            for name, (path, headers) in targets.items():
                for rate in rates:
                    # Warm-up at the same rate, not counted: imports, connection pools, plan caches.
                    asyncio.run(open_loop(stack.url + path, headers, rate, 3.0))
                    row = asyncio.run(open_loop(stack.url + path, headers, rate, args.seconds))
                    rows.append(
                        {
                            "target": name,
                            "path": path,
                            "rate": rate,
                            "queries": queries[path],
                            "in_process_ms": in_process[path],
                            **row,
                        }
                    )
                    print(f"{count} sweeps: {rows[-1]}", flush=True)
            results.append({"sweeps": int(count), "cells": rows})
    commit = os.popen(f"git -C {ROOT} describe --always --dirty --abbrev=12").read().strip()
    return {
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "commit": commit,
        "command": " ".join([".venv/bin/python", "benchmarks/reliability/sweep_list.py", *sys.argv[1:]]),
        "machine": {
            "cpu": cpu_provenance().get("model", "unknown CPU"),
            "cpus": os.cpu_count(),
            "kernel": platform.release(),
            "load_at_start": load_at_start,
            "load_at_end": [round(x, 2) for x in os.getloadavg()],
        },
        "web_workers": args.web_workers,
        "rates": rates,
        "seconds": args.seconds,
        "sizes": results,
    }


if __name__ == "__main__":
    sys.exit(main())
