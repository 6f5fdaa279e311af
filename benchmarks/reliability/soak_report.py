"""The kill soak's report: the result's summary, its markdown tables and the docs section."""

from __future__ import annotations

import collections
import re
import statistics
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from soak_census import BASE, CATEGORIES, KINDS

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: docblock
from docblock import write_block  # noqa: E402

DOCS = Path(__file__).resolve().parents[2] / "docs" / "reliability.md"
BEGIN, END = "<!-- kill-soak:begin -->", "<!-- kill-soak:end -->"

if TYPE_CHECKING:
    from kill_soak import Soak


def reason_group(text: str) -> str:
    """An error text without the numbers and names that differ from trial to trial."""
    first = (text or "").strip().splitlines()[0] if text else "(no reason)"
    first = re.sub(rf"\b{BASE}[a-z0-9]+", "<prefix>", first)
    first = re.sub(r"\d+(\.\d+)?", "N", first)
    return first[:140]


def summarise(soak: Soak, drained: bool, final: dict[str, Any], after_stop: dict[str, Any]) -> dict[str, Any]:
    rows = [r for r in soak.api.get_all("/api/trials/") if r["sweep"] in soak.sweeps]
    details = {r["id"]: soak.trial(r["id"]) for r in rows}
    by_status = collections.Counter(r["status"] for r in rows)
    killed = {k.trial for k in soak.kills}
    failed_reasons = collections.Counter(reason_group(r["error"]) for r in rows if r["status"] == "failed")
    # Every entry of a trial that ended in success, and all but the last of a failed one, is a re-queue.
    requeue_reasons: collections.Counter[str] = collections.Counter()
    for d in details.values():
        log = d.get("attempt_log") or []
        if d["status"] == "failed":
            log = log[:-1]
        for e in log:
            requeue_reasons[reason_group(e.get("reason", ""))] += 1
    trials = {
        "total": len(rows),
        "killed": len(killed),
        "by_status": dict(by_status),
        "succeeded_first_attempt": sum(1 for r in rows if r["status"] == "succeeded" and r["attempts"] == 1),
        "requeued_and_finished": sum(1 for r in rows if r["status"] == "succeeded" and r["attempts"] > 1),
        "failed": by_status.get("failed", 0),
        "failed_second_kill": sum(
            1 for r in rows if r["status"] == "failed" and sum(k.trial == r["id"] for k in soak.kills) >= 2
        ),
        "failed_without_reason": sum(1 for r in rows if r["status"] == "failed" and not r["error"].strip()),
        "failed_reasons": dict(failed_reasons.most_common()),
        "requeue_reasons": dict(requeue_reasons.most_common()),
        "stuck_running": by_status.get("running", 0),
        "stuck_pending_or_queued": by_status.get("pending", 0) + by_status.get("queued", 0),
        "killed_attempts_by_outcome": dict(
            collections.Counter(
                f"attempt {k.attempt} -> {details[k.trial]['status']}" for k in soak.kills
            ).most_common()
        ),
    }
    per_kind: dict[str, dict[str, int]] = {}
    for r in rows:
        kind = soak.sweeps[r["sweep"]]
        d = per_kind.setdefault(kind, collections.Counter())
        d["trials"] += 1
        d[r["status"]] += 1
        d["requeued_and_finished"] += int(r["status"] == "succeeded" and r["attempts"] > 1)
    # A succeeded trial's started_at is its last attempt's: that one ran to the end, unkilled.
    durations = collections.defaultdict(list)
    for r in rows:
        if r["status"] == "succeeded" and r["duration_s"]:
            durations[soak.sweeps[r["sweep"]]].append(r["duration_s"])

    def sums(key: str) -> dict[str, Any]:
        cats = {c: sum(k.__dict__[key]["counts"][c] for k in soak.kills) for c in CATEGORIES}
        return {
            "sum": cats,
            "total": sum(cats.values()),
            "max_per_kill": max((k.__dict__[key]["total"] for k in soak.kills), default=0),
            "kills_with_leftovers": sum(1 for k in soak.kills if k.__dict__[key]["total"]),
        }

    return {
        "kills": {
            "total": len(soak.kills),
            "by_kind": dict(collections.Counter(k.kind for k in soak.kills)),
            "by_mode": dict(collections.Counter(k.mode for k in soak.kills)),
            "by_phase": dict(collections.Counter(k.phase for k in soak.kills).most_common()),
            "by_attempt": dict(collections.Counter(k.attempt for k in soak.kills)),
            "status_at_kill": dict(collections.Counter(k.status_at_kill for k in soak.kills)),
            "by_protocol": dict(collections.Counter(f"{k.kind} {k.protocol}".strip() for k in soak.kills)),
        },
        "windows_s": {
            f"{kind} {protocol}".strip(): round(statistics.median(v), 1)
            for (kind, protocol), v in sorted(
                (
                    (k.kind, k.protocol),
                    [x.window_s for x in soak.kills if (x.kind, x.protocol) == (k.kind, k.protocol)],
                )
                for k in soak.kills
            )
        },
        "trials": trials,
        "per_kind": {k: dict(v) for k, v in per_kind.items()},
        "trial_duration_s": {
            k: {"n": len(v), "median": round(statistics.median(v), 1), "max": round(max(v), 1)}
            for k, v in durations.items()
        },
        "leftovers_before_restart": sums("before"),
        "leftovers_after_restart": sums("after"),
        "leftovers_settled": sums("settled") if all(k.settled for k in soak.kills) and soak.kills else None,
        "library_vs_census_before_restart": {
            c: sum(k.before["library_counts"][c] for k in soak.kills)
            for c in ("namespaces", "devices", "processes", "overlays")
        },
        "library_missed": sum(1 for k in soak.kills for c in (k.before, k.after) if c["missed_by_census"]),
        "restart_s": {
            "median": round(statistics.median(soak.restarts), 1) if soak.restarts else None,
            "max": round(max(soak.restarts), 1) if soak.restarts else None,
        },
        "misses": len(soak.misses),
        "drained": drained,
        "final_leftovers": final,
        "after_stop_leftovers": after_stop,
    }


def markdown(result: dict[str, Any]) -> str:
    s = result["summary"]
    k, t = s["kills"], s["trials"]
    b, a = s["leftovers_before_restart"], s["leftovers_after_restart"]
    fin = s["final_leftovers"]
    lines = [
        "| kills | "
        + " | ".join(f"{c}" for c in ("link_check", "rd_qoe (namespace)", "rd_qoe (VM)", "total"))
        + " |",
        "|---|---|---|---|---|",
        "| SIGKILLs | " + " | ".join(str(k["by_kind"].get(c, 0)) for c in KINDS) + f" | {k['total']} |",
    ]
    per = s["per_kind"]
    for label, key in (
        ("trials", "trials"),
        ("succeeded", "succeeded"),
        ("of these re-queued and finished", "requeued_and_finished"),
        ("failed, with a recorded reason", "failed"),
        ("stuck in running", "running"),
        ("stuck in pending/queued", None),
    ):
        cells = []
        for c in KINDS:
            d = per.get(c, {})
            cells.append(str(d.get("pending", 0) + d.get("queued", 0) if key is None else d.get(key, 0)))
        total = {
            "trials": t["total"],
            "succeeded": t["by_status"].get("succeeded", 0),
            "requeued_and_finished": t["requeued_and_finished"],
            "failed": t["failed"],
            "running": t["stuck_running"],
            None: t["stuck_pending_or_queued"],
        }[key]
        lines.append(f"| {label} | " + " | ".join(cells) + f" | {total} |")
    lines += [
        "",
        "| leftovers | " + " | ".join(CATEGORIES) + " | total |",
        "|---|" + "---|" * (len(CATEGORIES) + 1),
        "| right after the kill, sum over kills | "
        + " | ".join(str(b["sum"][c]) for c in CATEGORIES)
        + f" | {b['total']} (max {b['max_per_kill']} per kill) |",
        "| after the restart, sum over kills | "
        + " | ".join(str(a["sum"][c]) for c in CATEGORIES)
        + f" | **{a['total']}** ({a['kills_with_leftovers']} kills) |",
        "| at the end, every trial ended | "
        + " | ".join(str(fin["counts"][c]) for c in CATEGORIES)
        + f" | **{fin['total']}** |",
    ]
    return "\n".join(lines)


# What the soak found while it was being written (docs only; the fixes have regression tests).
FINDINGS = """While this soak was written (2026-11-26) it found two faults, fixed at their cause:

- A SIGKILLed worker's pool process is re-parented to init and stays a zombie until init reaps it
  (about a second on this VM; some inits never do). The running marker counted a zombie as alive, so
  after a kill the restarted worker neither cleaned up nor reported the lost run at start-up:
  its marker outlived the restart, and the heartbeat went on listing the trial as running until the
  zombie was gone (with an init that never reaps: for ever, the trial stuck in `running`). A zombie
  now counts as dead (`qoelab.celery_app`; tests/workers/test_marker_zombie.py).
- An X2Go trial killed while `x2gostartagent` ran left its session in X2Go's session database as
  running, with an empty agent PID and ports. The X2Go client cannot parse that line of
  `x2golistsessions`, so every later X2Go trial on the host failed ("x2golistsessions command failed
  after we have tried 20 times") until the database was cleared by hand. The RD cleanup now marks the
  trial prefix's sessions finished (`qoelab.rd.cleanup.finish_x2go_sessions`;
  tests/workers/rd/test_x2go_session_db.py); the census counts such rows (`x2go_db`)."""


def write_docs(result: dict[str, Any]) -> None:
    s = result["summary"]
    k, t, m = s["kills"], s["trials"], result["machine"]
    phases = ", ".join(f"{p} {n}" for p, n in k["by_phase"].items())
    reasons = "\n".join(f"  - {n} x `{r}`" for r, n in t["failed_reasons"].items()) or "  - none"
    requeues = "\n".join(f"  - {n} x `{r}`" for r, n in t["requeue_reasons"].items()) or "  - none"
    durations = ", ".join(
        f"{kind} {v['median']:g} s (max {v['max']:g} s)" for kind, v in s["trial_duration_s"].items()
    )
    windows = ", ".join(f"{kind} {v:g} s" for kind, v in s["windows_s"].items())
    lib, cen = s["library_vs_census_before_restart"], s["leftovers_before_restart"]["sum"]
    seen = ", ".join(f"{c} {lib[c]} of {cen[c]}" for c in lib)
    planned, share = result["planned_kills"], result["second_kill_share"]
    modes = ", ".join(f"{mode} {n}" for mode, n in k["by_mode"].items())
    restart = s["restart_s"]
    short = (
        f" **Only {k['total']} of the {planned} planned kills ran** ({result['stopped_early'] or 'see log'})."
        if k["total"] < planned
        else ""
    )
    load = m["load_at_start"]
    body = f"""Measured {result["date"]} on {m["cpus"]} cores (kernel {m["kernel"]}, load {load} at the
start), {result["wall_min"]:.0f} min. Reproduce with

    {result["command"]}

One worker (`soak-w1`, prefix base `qsk`) on a private stack runs one-trial sweeps: `link_check`
(8 Mbit/s, 5 ms, 2 s per direction), `rd_qoe` with the namespace desktop (10 Mbit/s, 10 ms, 1 page;
VNC, SPICE and X2Go in turn) and `rd_qoe` with `server: vm` (QEMU under TCG, the guest restored from
the host's saved state; fewer kills, as each costs a VM trial's re-run). Each kill waits until the
trial it aims at runs, sleeps a uniformly random time from its claim (seed {result["seed"]}) within the median
duration of the run's earlier trials of that type and protocol (median windows: {windows}), and
SIGKILLs the worker. Kills alternate between the main `qoelab worker` process only (Celery's pool
processes have a parent-death SIGKILL, so the trial's pool process dies too and everything the trial
started is orphaned) and the worker's whole process group. {share:.0%} of the kills hit a
trial's second attempt (both attempts used: it must fail with a recorded reason).{short} Leftovers are
counted right after the kill and again once the restarted worker has registered (its start-up cleanup
runs before that); `processes` includes orphaned QEMU (`qemu`), `files` the trial work dirs, running
markers, X2Go session files and stale X locks, `x2go_db` sessions listed in X2Go's database.

{markdown(result)}

- Kills by trial phase (the last line of the trial's own log when the kill came): {phases}.
- Kill modes: {modes}. The restart (to "registered", start-up cleanup included) took
  {restart["median"]} s median, {restart["max"]} s max. Successful attempts took {durations}.
- The library's own finders saw, of what the census counted before the restarts: {seen}.
- Re-queue reasons in the trials' attempt logs:
{requeues}
- Failure reasons:
{reasons}

{result["reading"]}

{FINDINGS}"""
    write_block(DOCS, BEGIN, END, body.strip())


def reading(result: dict[str, Any]) -> str:
    s = result["summary"]
    t, a, fin = s["trials"], s["leftovers_after_restart"], s["final_leftovers"]
    ok = (
        a["total"] == 0
        and fin["total"] == 0
        and t["stuck_running"] == 0
        and t["stuck_pending_or_queued"] == 0
    )
    misses = s["misses"]
    return str(
        f"Reading: the targets {'hold' if ok else 'do not hold'}: {a['total']} objects were left after the "
        f"restarts and {fin['total']} at the end; {t['stuck_running']} trials stuck in `running`, "
        f"{t['stuck_pending_or_queued']} in `pending`/`queued`. {t['failed']} trials failed "
        f"({t['failed_without_reason']} without a recorded reason): {t['failed_second_kill']} because both "
        f"their attempts were killed, {t['failed'] - t['failed_second_kill']} for another reason. "
        + (
            f"{misses} drawn kill moments fell after their trial had already ended; those trials were not "
            "killed and a further trial of the same type took the kill."
            if misses
            else ""
        )
    ).strip()
