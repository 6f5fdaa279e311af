"""Evaluator waves: 100 evaluators each submit their rating three times at once; then again while
PostgreSQL restarts. Every answer must be stored exactly once: 0 lost, 0 doubled.

A private stack (benchmarks/stack.py) runs on its own throwaway PostgreSQL cluster, so the second
wave can restart it (``pg_ctl restart -m fast``: every open connection is cut) without touching any
other database. ``manage.py ratings_demo`` makes a recorded campaign with generated videos and
2 × ``--evaluators`` links. Each evaluator is a browser-like client with its own cookies: it opens
its link, gives consent on the page, fetches both videos in full (the server's proof of delivery),
reports them watched, and waits at a barrier. Then all of them post the page's rating form
``--copies`` times at once (a double click, a second tab). A submission that gets 503 does what the
page offers (``qoelab_web.unavailable``): wait ``Retry-After`` and send the same fields again.

The check reads the database: per evaluator, one rating per aspect for the condition it rated
(lost = none, doubled = more), and its position moved by exactly one.

    .venv/bin/python benchmarks/reliability/waves.py --write-docs
"""

from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import json
import os
import platform
import re
import sys
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))
from docblock import write_block  # noqa: E402
from stack import PrivatePostgres, PrivateStack  # noqa: E402

DOC = ROOT / "docs" / "reliability.md"
BEGIN, END = "<!-- waves:begin -->", "<!-- waves:end -->"
GIVE_UP_S = 120  # a submission still unanswered after this counts as lost


@dataclass
class Evaluator:
    token: str
    client: httpx.Client
    condition: int = 0
    form: dict[str, str] = field(default_factory=dict)


@dataclass
class Outcome:
    first: int | str  # status of the first answer (or the transport error's name)
    final: int | str
    tries: int
    seconds: float


def _csrf(html: str) -> str:
    m = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', html)
    if not m:
        raise SystemExit("the evaluator page has no CSRF field")
    return m.group(1)


def prepare(base: str, token: str) -> Evaluator:
    """Open the link, consent, watch both videos in full, report them seen; return the filled form."""
    c = httpx.Client(base_url=base, timeout=60)
    ev = Evaluator(token, c)
    page = c.get(f"/rate/{token}/")
    r = c.post(f"/rate/{token}/", data={"csrfmiddlewaretoken": _csrf(page.text), "action": "consent",
                                        "agree": "yes"})  # fmt: skip
    if r.status_code != 302:
        raise SystemExit(f"consent answered {r.status_code}: {r.text[:300]}")
    page = c.get(f"/rate/{token}/").text
    ev.condition = int(re.search(r'data-condition="(\d+)"', page).group(1))
    for src in re.findall(r'<video id="video-\w+"[^>]* src="([^"]+)"', page):
        with c.stream("GET", src) as resp:
            for _ in resp.iter_bytes():
                pass
    api = {"Authorization": f"Evaluator {token}"}
    for stage in ("reference", "degraded"):
        body = {"condition": ev.condition, "stage": stage, "index": 0}
        r = c.post("/api/rate/screens/", json=body, headers=api)
        if r.status_code != 200:
            raise SystemExit(f"screens answered {r.status_code}: {r.text[:300]}")
    aspects = sorted(set(re.findall(r'name="score_(\w+)"', page)))
    ev.form = {"csrfmiddlewaretoken": _csrf(page), "action": "rate", "condition": str(ev.condition)}
    ev.form |= {f"score_{a}": "4" for a in aspects}
    return ev


def submit(ev: Evaluator, answered: threading.Semaphore) -> Outcome:
    """Post the form; on 503 or a cut connection, do what the page says: wait, send it again."""
    t0 = time.monotonic()
    first: int | str | None = None
    tries = 0
    while True:
        tries += 1
        try:
            r = ev.client.post(f"/rate/{ev.token}/", data=ev.form)
            status: int | str = r.status_code
            wait = float(r.headers.get("Retry-After", 0)) if r.status_code == 503 else None
        except httpx.TransportError as err:
            status, wait = type(err).__name__, 1.0
        if first is None:
            first = status
            answered.release()
        if wait is None or time.monotonic() - t0 > GIVE_UP_S:
            return Outcome(first, status, tries, round(time.monotonic() - t0, 2))
        time.sleep(wait)


def wave(evaluators: list[Evaluator], copies: int, restart: PrivatePostgres | None, at: float) -> dict:
    """All submissions at once; with ``restart``, PostgreSQL restarts once the first ``at`` share of
    them has been answered, so the rest are in flight or not yet sent when the connections are cut."""
    total = len(evaluators) * copies
    go = threading.Barrier(total)
    answered = threading.Semaphore(0)
    restart_s: list[float] = []

    def one(ev: Evaluator) -> Outcome:
        go.wait()
        return submit(ev, answered)

    def restarter() -> None:
        for _ in range(max(1, int(total * at))):
            answered.acquire()
        assert restart is not None
        restart_s.append(restart.restart())

    with ThreadPoolExecutor(max_workers=total + 1) as pool:
        t0 = time.monotonic()
        if restart:
            pool.submit(restarter)
        futures = [pool.submit(one, ev) for ev in evaluators for _ in range(copies)]
        outcomes = [f.result() for f in futures]
        wall = time.monotonic() - t0
    return {
        "submissions": len(outcomes),
        "first_answers": dict(Counter(str(o.first) for o in outcomes)),
        "final_answers": dict(Counter(str(o.final) for o in outcomes)),
        "resent": sum(o.tries > 1 for o in outcomes),
        "max_tries": max(o.tries for o in outcomes),
        "slowest_s": max(o.seconds for o in outcomes),
        "wall_s": round(wall, 2),
        "restart_s": round(restart_s[0], 2) if restart_s else None,
    }


def stored(db_url: str, evaluators: list[Evaluator], n_aspects: int) -> dict[str, int]:
    """Lost / once / doubled per evaluator, from the database itself."""
    import psycopg

    tally = Counter()
    with psycopg.connect(db_url) as conn:
        for ev in evaluators:
            n = conn.execute(
                "SELECT count(*) FROM ratings_rating r JOIN ratings_evaluator e ON e.id = r.evaluator_id "
                "WHERE r.condition_id = %s AND e.token_hash = %s",
                (ev.condition, hashlib.sha256(ev.token.encode()).hexdigest()),
            ).fetchone()[0]
            tally[
                "lost" if n == 0 else "once" if n == n_aspects else "doubled" if n > n_aspects else "partial"
            ] += 1
    return {k: tally.get(k, 0) for k in ("once", "lost", "doubled", "partial")}


def markdown(result: dict[str, Any]) -> str:
    lines = [
        f"Measured {result['date']} on {result['machine']['cpus']} cores, gunicorn with 2 sync workers, the "
        f"clients on the same host; a throwaway PostgreSQL {result['postgres']} cluster. "
        f"{result['evaluators']} evaluators per wave, each posting its rating form {result['copies']} "
        "times at once.",
        "",
        "| wave | submissions | first answers | resent after 503 | final answers | stored once | lost | "
        "doubled | wall time |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for name, w in result["waves"].items():
        s = w["stored"]
        first = ", ".join(f"{k}: {v}" for k, v in sorted(w["first_answers"].items()))
        final = ", ".join(f"{k}: {v}" for k, v in sorted(w["final_answers"].items()))
        label = name + (f" (restart took {w['restart_s']} s)" if w.get("restart_s") else "")
        lines.append(
            f"| {label} | {w['submissions']} | {first} | {w['resent']} | {final} | {s['once']} | "
            f"{s['lost']} | {s['doubled'] + s['partial']} | {w['wall_s']} s |"
        )
    lines += [
        "",
        "302 is the page's answer to a stored (or already stored) rating; 503 is the database-down "
        'page with its "Send again" form.',
        "",
        "```",
        result["command"],
        "```",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--evaluators", type=int, default=100)
    ap.add_argument("--copies", type=int, default=3, help="submissions per evaluator at once (default 3)")
    ap.add_argument(
        "--restart-at", type=float, default=0.3, help="share of the second wave answered before the restart"
    )
    ap.add_argument("--json", type=Path, default=Path(__file__).with_name("waves-last-run.json"))
    ap.add_argument("--write-docs", action="store_true")
    args = ap.parse_args(argv)
    if os.geteuid() != 0:
        raise SystemExit("needs root (the throwaway PostgreSQL cluster runs as the 'postgres' user)")
    with (
        PrivatePostgres() as pg,
        PrivateStack(
            "qoelab_waves_bench", redis_db=9, tmp_prefix="qoelab-waves-", database_url=pg.url
        ) as stack,
    ):
        stack.start_web(workers=2)
        out = stack.manage("ratings_demo", "bench", "--evaluators", str(2 * args.evaluators),
                           "--base-url", stack.url)  # fmt: skip
        tokens = re.findall(r"/rate/([A-Za-z0-9_-]+)/", out)
        if len(tokens) != 2 * args.evaluators:
            raise SystemExit(f"ratings_demo printed {len(tokens)} links:\n{out}")
        version = stack.manage("shell", "-c", "from django.db import connection as c; "
                               "print(c.cursor().connection.info.server_version)")  # fmt: skip
        result: dict[str, Any] = {"waves": {}}
        for name, batch, restart in (
            ("steady", tokens[: args.evaluators], None),
            ("PostgreSQL restart", tokens[args.evaluators :], pg),
        ):
            with ThreadPoolExecutor(max_workers=16) as pool:
                evaluators = list(pool.map(lambda t: prepare(stack.url, t), batch))
            n_aspects = sum(k.startswith("score_") for k in evaluators[0].form)
            w = wave(evaluators, args.copies, restart, args.restart_at)
            w["stored"] = stored(stack.db_url, evaluators, n_aspects)
            print(f"{name}: {w}", flush=True)
            result["waves"][name] = w
            for ev in evaluators:
                ev.client.close()
    v = int(version.split()[-1])
    result |= {
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "command": " ".join([".venv/bin/python", "benchmarks/reliability/waves.py", *sys.argv[1:]]),
        "machine": {"cpus": os.cpu_count(), "kernel": platform.release()},
        "postgres": f"{v // 10000}.{v % 10000}",
        "evaluators": args.evaluators,
        "copies": args.copies,
    }
    args.json.write_text(json.dumps(result, indent=2) + "\n")
    table = markdown(result)
    print(table)
    if args.write_docs:
        write_block(DOC, BEGIN, END, table)
    bad = sum(
        w["stored"]["lost"] + w["stored"]["doubled"] + w["stored"]["partial"]
        for w in result["waves"].values()
    )
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
