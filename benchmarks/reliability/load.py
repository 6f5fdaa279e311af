"""Load: requests/s and latency of what every open dashboard polls, under 200 concurrent clients.

A private stack (benchmarks/stack.py: gunicorn with 2 sync workers, as ``make demo`` runs it) is
seeded with a lab of ``--experiments`` experiments whose sweeps hold ``--trials`` trials in a mix of
states. Then ``wrk`` (C, one thread, so the load generator takes as little of the 2 cores as
possible) drives, one after the other in the same run:

- ``sweep detail``: ``GET /api/sweeps/<id>/``, the whole sweep with its progress — what the sweep
  page polled before the progress endpoint existed;
- ``sweep progress``: ``GET /api/sweeps/<id>/progress/``, the cheap endpoint the page polls now;
- ``experiments page``: ``GET /`` as a logged-in researcher (HTML).

Each target is measured at 1 client (the single-request latency) and at ``--clients`` clients, and
the targets take turns per round (``--rounds``) so a drift of the host's load hits both endpoints
alike. The medians over rounds go to benchmarks/reliability/load-last-run.json; ``--write-docs``
puts the table into docs/reliability.md.

    set -a && . .state/env && set +a
    .venv/bin/python benchmarks/reliability/load.py --write-docs
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))
from docblock import write_block  # noqa: E402
from stack import PrivateStack  # noqa: E402

DOC = ROOT / "docs" / "reliability.md"
BEGIN, END = "<!-- load:begin -->", "<!-- load:end -->"

SEED = """
import random
from django.contrib.auth import get_user_model
from importlib import import_module
from django.conf import settings
from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY
from django.utils import timezone
from datetime import timedelta
from experiments import services
from experiments.models import Trial
user = get_user_model().objects.get(username="bench")
rng = random.Random(1)
first = None
for e in range({experiments}):
    sweep = services.create_sweep({{
        "experiment": {{"name": f"load {{e}}"}},
        "job_type": "link_check",
        "name": f"sweep {{e}}",
        "grid": {{"rate": ["8mbit", "16mbit"], "delay": ["5ms", "20ms"]}},
        "fixed": {{"duration": "2s"}},
        "repetitions": max(1, {trials} // 4),
    }}, user)
    first = first or sweep
    now = timezone.now()
    for t in sweep.trials.all():
        state = rng.choices(["succeeded", "failed", "running", "pending"], [6, 1, 1, 2])[0]
        if state in ("succeeded", "failed"):
            start = now - timedelta(seconds=rng.uniform(60, 600))
            Trial.objects.filter(pk=t.pk).update(
                status=state, started_at=start, finished_at=start + timedelta(seconds=rng.uniform(5, 40))
            )
        elif state == "running":
            Trial.objects.filter(pk=t.pk).update(status=state, started_at=now)
s = import_module(settings.SESSION_ENGINE).SessionStore()
s[SESSION_KEY] = str(user.pk)
s[BACKEND_SESSION_KEY] = settings.AUTHENTICATION_BACKENDS[0]
s[HASH_SESSION_KEY] = user.get_session_auth_hash()
s.create()
print(first.pk, s.session_key)
"""


def wrk(url: str, clients: int, seconds: float, headers: dict[str, str]) -> dict[str, Any]:
    """One wrk run: requests/s, p50/p99 latency (ms), non-2xx answers and socket errors."""
    cmd = ["wrk", "-t1", f"-c{clients}", f"-d{seconds:g}s", "--latency", "--timeout", "30s"]
    for k, v in headers.items():
        cmd += ["-H", f"{k}: {v}"]
    run = subprocess.run([*cmd, url], capture_output=True, text=True, timeout=seconds + 120, check=True)
    out = run.stdout

    def ms(label: str) -> float:
        m = re.search(rf"^\s+{label}%\s+([\d.]+)(us|ms|s)\s*$", out, re.M)
        if not m:
            raise SystemExit(f"wrk printed no {label}% latency:\n{out}")
        return float(m.group(1)) * {"us": 1e-3, "ms": 1.0, "s": 1e3}[m.group(2)]

    rps = re.search(r"Requests/sec:\s+([\d.]+)", out)
    non2xx = re.search(r"Non-2xx or 3xx responses:\s+(\d+)", out)
    errors = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", out)
    return {
        "rps": float(rps.group(1)) if rps else 0.0,
        "p50_ms": ms("50"),
        "p99_ms": ms("99"),
        "non_2xx": int(non2xx.group(1)) if non2xx else 0,
        "socket_errors": sum(map(int, errors.groups())) if errors else 0,
    }


def median_row(runs: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "rps": round(statistics.median(r["rps"] for r in runs), 1),
        "p50_ms": round(statistics.median(r["p50_ms"] for r in runs), 1),
        "p99_ms": round(statistics.median(r["p99_ms"] for r in runs), 1),
        "non_2xx": sum(r["non_2xx"] for r in runs),
        "socket_errors": sum(r["socket_errors"] for r in runs),
        "rounds": len(runs),
    }


def markdown(result: dict[str, Any]) -> str:
    lines = [
        f"Measured {result['date']} on {result['machine']['cpus']} cores (Linux "
        f"{result['machine']['kernel']}), gunicorn with {result['web_workers']} sync workers, "
        f"wrk with one thread on the same host; {result['seed']['experiments']} experiments of "
        f"{result['seed']['trials_per_sweep']} trials. Medians of {result['rounds']} rounds of "
        f"{result['seconds']:g} s per cell; targets take turns within each round.",
        "",
        f"| target | 1 client: p50 | {result['clients']} clients: requests/s | p50 | p99 | errors |",
        "|---|---|---|---|---|---|",
    ]
    for name, row in result["targets"].items():
        one, many = row["single"], row["loaded"]
        errors = many["non_2xx"] + many["socket_errors"] + one["non_2xx"] + one["socket_errors"]
        lines.append(
            f"| {name} (`{row['path']}`) | {one['p50_ms']:.1f} ms | {many['rps']:.0f} | "
            f"{many['p50_ms']:.0f} ms | {many['p99_ms']:.0f} ms | {errors} |"
        )
    ratio = result.get("progress_vs_detail")
    if ratio:
        lines += ["", f"The progress endpoint serves **{ratio:.2f}×** the sweep detail's requests/s."]
    lines += ["", "```", result["command"], "```"]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--clients", type=int, default=200)
    ap.add_argument("--seconds", type=float, default=15, help="length of each loaded wrk run (default 15)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--experiments", type=int, default=20, help="experiments (one sweep each) to seed")
    ap.add_argument("--trials", type=int, default=100, help="trials per sweep (default 100)")
    ap.add_argument("--web-workers", type=int, default=2, help="gunicorn workers (default 2, as make demo)")
    ap.add_argument("--json", type=Path, default=Path(__file__).with_name("load-last-run.json"))
    ap.add_argument("--write-docs", action="store_true")
    args = ap.parse_args(argv)
    if not shutil.which("wrk"):
        raise SystemExit("wrk is not installed (make deps installs it)")
    load_at_start = [round(x, 2) for x in os.getloadavg()]
    with PrivateStack("qoelab_load_bench", redis_db=10, tmp_prefix="qoelab-load-") as stack:
        stack.start_web(workers=args.web_workers)
        out = stack.manage("shell", "-c", SEED.format(experiments=args.experiments, trials=args.trials))
        sweep_id, session = out.split()[-2:]
        token = {"Authorization": f"Token {stack.api_token}", "Accept": "application/json"}
        targets = {
            "sweep detail": (f"/api/sweeps/{sweep_id}/", token),
            "sweep progress": (f"/api/sweeps/{sweep_id}/progress/", token),
            "experiments page": ("/", {"Cookie": f"sessionid={session}"}),
        }
        for name, (path, headers) in list(targets.items()):  # each answers 200 before it is measured
            resp = httpx.get(stack.url + path, headers=headers, timeout=30)
            if resp.status_code == 404 and name == "sweep progress":
                print("this version has no progress endpoint: measuring the others", flush=True)
                del targets[name]
            elif resp.status_code != 200:
                raise SystemExit(f"{path} answered {resp.status_code}: {resp.text[:300]}")
        single: dict[str, list] = {n: [] for n in targets}
        loaded: dict[str, list] = {n: [] for n in targets}
        for rnd in range(args.rounds):
            for name, (path, headers) in targets.items():
                single[name].append(wrk(stack.url + path, 1, 5, headers))
                loaded[name].append(wrk(stack.url + path, args.clients, args.seconds, headers))
                print(f"round {rnd + 1} {name}: {loaded[name][-1]}", flush=True)
    rows = {
        name: {"path": path, "single": median_row(single[name]), "loaded": median_row(loaded[name])}
        for name, (path, _) in targets.items()
    }
    result = {
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "command": " ".join([".venv/bin/python", "benchmarks/reliability/load.py", *sys.argv[1:]]),
        "machine": {
            "cpus": os.cpu_count(),
            "kernel": platform.release(),
            "load_at_start": load_at_start,
            "load_at_end": [round(x, 2) for x in os.getloadavg()],
        },
        "web_workers": args.web_workers,
        "clients": args.clients,
        "seconds": args.seconds,
        "rounds": args.rounds,
        "seed": {"experiments": args.experiments, "trials_per_sweep": args.trials},
        "targets": rows,
        "progress_vs_detail": round(
            rows["sweep progress"]["loaded"]["rps"] / rows["sweep detail"]["loaded"]["rps"], 2
        )
        if "sweep progress" in rows
        else None,
    }
    args.json.write_text(json.dumps(result, indent=2) + "\n")
    table = markdown(result)
    print(table)
    if args.write_docs:
        write_block(DOC, BEGIN, END, table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
