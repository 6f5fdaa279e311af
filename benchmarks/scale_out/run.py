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
import datetime as dt
import json
import os
import platform
import statistics
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
BENCH_DB = "qoelab_scale_bench"
# Not 0 (demo and developers) nor 14 (the test suite flushes it): queues here are ours alone.
REDIS_DB = 12
# Explicit, distinct name bases: on one machine two workers must never share a prefix base.
HOSTS = (("scale-w1", "qsoa"), ("scale-w2", "qsob"))


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


def _run_sweep(
    stack: Any, api: Any, workers: int, trials: int, args: argparse.Namespace, label: str = "", rnd: int = 0
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

    sys.path.insert(0, str(ROOT / "benchmarks"))
    from stack import PrivateStack, namespaces

    phases: list[Phase] = []
    stack = PrivateStack(BENCH_DB, REDIS_DB, "qoelab-scale-out-")
    try:
        with stack:
            api = stack.start_web(workers=2)
            stack.start_scheduler(args.tick)
            for name, base in HOSTS:
                stack.start_worker(name, base, stack.add_host(name))
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
        left = [n for _, base in HOSTS for n in namespaces(base)]
    if left:
        raise SystemExit(f"namespaces left behind: {left} (logs in {stack.tmp})")

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
    print(f"logs in {stack.tmp}; written {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
