"""Kill soak (issue 14): SIGKILL the worker at random moments of running trials, restart it, count leftovers.

A private stack (benchmarks/stack.py: gunicorn web, ``manage.py scheduler``, one real ``qoelab worker``
for host ``soak-w1`` with trial-name prefix base ``qsk``, database ``qoelab_soak_bench``, Redis DB 11)
runs one-trial sweeps of ``link_check``, ``rd_qoe`` (namespace desktop, VNC/SPICE/X2Go in turn) and
``rd_qoe`` with ``server: vm`` (a QEMU guest under TCG). For each kill the script waits until the
trial it aims at is ``running``, sleeps a random time (seeded) within that trial's expected duration
from the claim, and SIGKILLs the worker. Kills alternate between two meanings of "kill the worker":

* ``main``: only the main ``qoelab worker`` process (as the OOM killer or ``kill -9 PID`` would).
  Celery gives its prefork pool processes PR_SET_PDEATHSIG=SIGKILL, so the pool process running the
  trial dies with it; everything the trial started (iperf3, X/VNC/SPICE servers and viewers, X2Go,
  QEMU; the link emulator only if its own parent-death signal did not fire) is orphaned.
* ``group``: the worker's whole process group (main + pool + what the trial started without a
  session of its own, as ``docker kill`` or a service manager would); what the trial started in its
  own sessions (QEMU, desktops) is orphaned.

Right after the kill the script takes a census of what the host holds under the prefix base (what
the dead worker left: expected non-zero), restarts the worker, waits until it registered (its
start-up cleanup runs before that) and takes the census again: the target is nothing left. The
census is the script's own (``/run/netns``, ``ip``/``tc`` JSON, psutil over all processes,
``/proc/mounts``, the VM overlay directory, the work dir, X2Go's session database) beside what the
library's own finders report (``qoelab.emulation.cleanup.leftovers``, ``qoelab.rd.cleanup
.find_processes``, ``qoelab.vm.guest.find_qemu_processes``/``overlays_of``). Objects of a trial the
*new* worker has already started (its pool process's marker names the prefix) are not leftovers.

A kill plan aims at one trial; some plans (``--second-kill-share``) also kill the same trial's
second attempt, which exhausts its two attempts: it must then fail with a recorded reason. After
the last kill every trial is let end (bounded wait) and the script reports kills by trial type,
kill mode and trial phase, the trials' outcomes (succeeded first time, re-queued and finished,
failed with the reason, stuck), leftovers after each kill before and after the restart, and the
final leftovers, writes benchmarks/reliability/kill-soak-last-run.json and prints a markdown table;
``--write-docs`` puts the table into docs/reliability.md (between the kill-soak markers).

    set -a && . .state/env && set +a   # if the lab's services are private ones
    .venv/bin/python benchmarks/reliability/kill_soak.py --kills 6
    .venv/bin/python benchmarks/reliability/kill_soak.py --write-docs     # 100 kills

Needs root (namespaces), PostgreSQL and Redis; the VM kills need the guest image (make vm-image).
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import dataclasses
import datetime as dt
import json
import os
import platform
import random
import signal
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from soak_census import BASE, KINDS, Census, parse_time, process_tree, stale_x_locks, trial_phase
from soak_report import DOCS, markdown, reading, summarise, write_docs

ROOT = Path(__file__).resolve().parents[2]
BENCH_DB = "qoelab_soak_bench"
REDIS_DB = 11  # not 0 (demo), 12 (scale-out), 14 (test suite)
HOST = "soak-w1"
# Kills per trial type: the full 100-kill run takes about 35 min on the 2-core development host
# (each kill costs its trial's re-run; a VM trial ~20 s with the host's saved guest state, more when
# the guest must boot under TCG).
DEFAULT_MIX = {"link_check": 55, "rd_qoe": 37, "rd_qoe_vm": 8}
# The kill lands uniformly within this many seconds after the claim, until trials of the same type
# (and protocol) have succeeded in this run: then within their median duration, so kills spread over
# the whole trial (link set-up, measurement, desktop or guest start, session, teardown, upload and
# the finish call). VM trials: at most the first VM_WINDOW_S (a cold TCG boot takes minutes).
DEFAULT_SPAN = {"link_check": 7.0, "rd_qoe": 7.0, "rd_qoe_vm": 18.0}
VM_WINDOW_S = 90.0
RD_PROTOCOLS = ("vnc", "spice", "x2go")
ACTIVE = ("pending", "queued", "running")


# --- the trials -------------------------------------------------------------------------------


def sweep_spec(kind: str, protocol: str, n: int) -> dict[str, Any]:
    if kind == "link_check":
        return {
            "experiment": {"name": "kill soak: link_check"},
            "job_type": "link_check",
            "name": f"kill soak {n}: link_check",
            "grid": {"rate": ["8mbit"]},
            "fixed": {"delay": "5ms", "duration": "2s"},
            "repetitions": 1,
        }
    fixed: dict[str, Any] = {"rate": "10mbit", "delay": "10ms", "pages": 1, "verify_duration": "1s"}
    if kind == "rd_qoe_vm":
        fixed.update(server="vm", quiet="2s")  # as examples/rd_qoe_vm.yaml: TCG guests pause
    return {
        "experiment": {"name": "kill soak: rd_qoe"},
        "job_type": "rd_qoe",
        "name": f"kill soak {n}: {kind} {protocol}",
        "grid": {"protocol": [protocol]},
        "fixed": fixed,
        "repetitions": 1,
    }


@dataclasses.dataclass
class Plan:
    kind: str
    protocol: str
    kills: int  # 1, or 2: the re-run is killed too (its attempts are then used up)


def make_plans(mix: dict[str, int], second_share: float, rng: random.Random) -> list[Plan]:
    plans: list[Plan] = []
    for kind, kills in mix.items():
        doubles = round(kills * second_share / 2)
        counts = [2] * doubles + [1] * (kills - 2 * doubles)
        for i, k in enumerate(counts):
            protocol = RD_PROTOCOLS[i % len(RD_PROTOCOLS)] if kind != "link_check" else ""
            plans.append(Plan(kind, protocol, k))
    rng.shuffle(plans)
    return plans


# --- the census -------------------------------------------------------------------------------


@dataclasses.dataclass
class Kill:
    n: int
    kind: str
    protocol: str
    mode: str
    trial: int
    attempt: int
    window_s: float  # the kill was aimed uniformly within this many seconds after the claim
    aimed_s: float  # seconds after the claim the kill was aimed at
    at_s: float  # seconds after the claim it happened
    status_at_kill: str
    phase: str
    before: dict[str, Any]
    after: dict[str, Any]
    restart_s: float
    settled: dict[str, Any] | None = None


class Soak:
    def __init__(self, stack: Any, api: Any, args: argparse.Namespace, rng: random.Random) -> None:
        self.stack, self.api, self.args, self.rng = stack, api, args, rng
        self.token = stack.add_host(HOST)
        self.workdir = stack.tmp / HOST
        self.census = Census(self.workdir, stale_x_locks())
        self.sweeps: dict[int, str] = {}  # sweep id -> kind
        self.kills: list[Kill] = []
        self.durations: dict[tuple[str, str], list[float]] = collections.defaultdict(list)
        self.restarts: list[float] = []
        self._trial_sweep: dict[int, int] = {}
        self.misses: list[dict[str, Any]] = []

    # -- the worker --------------------------------------------------------------------------
    @property
    def worker(self) -> Any:
        return self.stack.procs.get(HOST)

    def start_worker(self) -> float:
        t0 = time.monotonic()
        self.stack.start_worker(HOST, BASE, self.token)
        took = time.monotonic() - t0
        self.restarts.append(took)
        return took

    def kill_worker(self, mode: str) -> None:
        proc = self.stack.procs.pop(HOST)
        if mode == "main":
            os.kill(proc.pid, signal.SIGKILL)
        else:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)

    def worker_pids(self) -> set[int]:
        proc = self.worker
        return process_tree(proc.pid) if proc is not None and proc.poll() is None else set()

    def take_census(self) -> dict[str, Any]:
        pids = self.worker_pids()
        found = self.census.take(pids, self.census.live_prefixes(pids))
        if found["total"] and self.worker is not None:
            # The live worker may have forked a pool process or begun a trial meanwhile: what belongs
            # to it now is not a leftover, so count again with its current processes and prefixes.
            pids |= self.worker_pids()
            found = self.census.take(pids, self.census.live_prefixes(pids))
        return found

    # -- the API -----------------------------------------------------------------------------
    def trial(self, trial_id: int) -> dict[str, Any]:
        return self.api.get(f"/api/trials/{trial_id}/")

    def wait_for(self, what: str, check: Any, timeout: float) -> Any:
        return self.stack.wait_until(what, check, timeout, ["web", "scheduler", HOST])

    def post(self, plan: Plan) -> int:
        spec = sweep_spec(plan.kind, plan.protocol, len(self.sweeps) + 1)
        sweep = self.api.post("/api/sweeps/", spec, "creating a sweep")
        self.sweeps[sweep["id"]] = plan.kind
        (row,) = self.api.get_all("/api/trials/", sweep=sweep["id"])
        return int(row["id"])

    def wait_running(self, trial_id: int, attempt: int, kind: str) -> dict[str, Any] | None:
        """The trial's row once it runs its ``attempt``; None if it ended instead."""
        # Everything before it in the queue (re-runs of killed trials) runs first, undisturbed.
        timeout = 900 + (600 if kind == "rd_qoe_vm" else 0)

        def check() -> dict[str, Any] | None | bool:
            row = self.api.get_all("/api/trials/", sweep=self.sweep_of(trial_id))[0]
            if row["status"] == "running" and row["attempts"] == attempt:
                return row
            if row["status"] not in ACTIVE or row["attempts"] > attempt:
                return {"ended": row}
            return None

        row = self.wait_for(f"trial {trial_id} attempt {attempt} to run", check, timeout)
        return None if "ended" in row else row

    def span(self, plan: Plan) -> float:
        """Kill window from the claim: the given span, else the median of this type's (and
        protocol's) trials that succeeded so far (their last, unkilled attempt), else the default."""
        if plan.kind in self.args.span:
            return self.args.span[plan.kind]
        seen = self.durations.get((plan.kind, plan.protocol), [])
        if len(seen) < 1:
            return DEFAULT_SPAN[plan.kind]
        return min(statistics.median(seen), VM_WINDOW_S if plan.kind == "rd_qoe_vm" else 1e9)

    def note_durations(self) -> None:
        self.durations = collections.defaultdict(list)
        for r in self.api.get_all("/api/trials/"):
            if r["sweep"] in self.sweeps and r["status"] == "succeeded" and r["duration_s"]:
                kind = self.sweeps[r["sweep"]]
                protocol = str(r["params"].get("protocol", "")) if kind != "link_check" else ""
                self.durations[(kind, protocol)].append(float(r["duration_s"]))

    def sweep_of(self, trial_id: int) -> int:
        return self._trial_sweep[trial_id]

    # -- one plan ----------------------------------------------------------------------------
    def run_plan(self, plan: Plan) -> int:
        """Kill the plan's trial (and its re-run); returns how many of its kills did not happen."""
        trial_id = self.post(plan)
        self._trial_sweep[trial_id] = max(self.sweeps)
        for attempt in range(1, plan.kills + 1):
            if len(self.kills) >= self.args.kills:
                return 0
            row = self.wait_running(trial_id, attempt, plan.kind)
            if row is None:
                print(f"  trial {trial_id} ended before its attempt {attempt} could be killed", flush=True)
                return plan.kills - attempt + 1
            started = parse_time(row["started_at"]) or time.time()
            window = self.span(plan)
            aimed = self.rng.uniform(0, window)
            time.sleep(max(0.0, started + aimed - time.time()))
            mode = ("main", "group")[len(self.kills) % 2] if self.args.mode == "alternate" else self.args.mode
            status = self.api.get_all("/api/trials/", sweep=self.sweep_of(trial_id))[0]["status"]
            if status != "running":
                # The moment fell after the trial's end (it ran shorter than the window): not a kill
                # during a trial. Another trial of the same type takes it.
                self.misses.append({"kind": plan.kind, "protocol": plan.protocol, "trial": trial_id,
                                    "aimed_s": round(aimed, 1), "status": status})  # fmt: skip
                print(f"  trial {trial_id} ended ({status}) before {aimed:.1f} s: no kill", flush=True)
                return plan.kills - attempt + 1
            phase = trial_phase(self.workdir, trial_id, attempt, plan.kind)
            at = time.time() - started
            self.kill_worker(mode)
            before = self.take_census()  # the worker is dead: everything under the base counts
            if (
                plan.kind == "rd_qoe_vm"
                and before["counts"]["qemu"]
                and phase in ("link verification", "setup")
            ):
                phase = "guest start"  # booting or restoring: QEMU runs, the trial log is quiet meanwhile
            restart = self.start_worker()
            after = self.take_census()
            settled = None
            if self.args.settle:
                time.sleep(self.args.settle)
                settled = self.take_census()
            kill = Kill(
                n=len(self.kills) + 1, kind=plan.kind, protocol=plan.protocol, mode=mode, trial=trial_id,
                attempt=attempt, window_s=round(window, 1), aimed_s=round(aimed, 1), at_s=round(at, 1),
                status_at_kill=status,
                phase=phase, before=before, after=after, restart_s=round(restart, 1), settled=settled,
            )  # fmt: skip
            self.kills.append(kill)
            left = ", ".join(f"{c} {n}" for c, n in before["counts"].items() if n) or "nothing"
            after_txt = ", ".join(f"{c} {n}" for c, n in after["counts"].items() if n) or "nothing"
            print(
                f"kill {kill.n:3d} {plan.kind:10s} {plan.protocol:5s} {mode:5s} trial {trial_id} "
                f"attempt {attempt} at {at:5.1f} s ({phase}); left: {left}; after restart "
                f"({restart:.1f} s): {after_txt}",
                flush=True,
            )
            if after["total"]:
                print(f"    after restart: {json.dumps(after['items'])}", flush=True)
            if settled and settled["total"]:
                print(f"    {self.args.settle:g} s later: {json.dumps(settled['items'])}", flush=True)
        return 0

    def run(self, plans: list[Plan], deadline: float | None) -> bool:
        self.start_worker()
        queue = collections.deque(plans)
        while queue and len(self.kills) < self.args.kills:
            if deadline is not None and time.time() > deadline:
                print("stopping early: --stop-at reached", flush=True)
                return False
            plan = queue.popleft()
            missing = self.run_plan(plan)
            if missing:
                queue.append(Plan(plan.kind, plan.protocol, missing))
            self.note_durations()
        return True

    def drain(self, timeout: float) -> bool:
        """Let every trial end; True if they all did within ``timeout``."""

        def done() -> bool:
            rows = self.api.get_all("/api/trials/")
            return not any(r["status"] in ACTIVE for r in rows if r["sweep"] in self.sweeps)

        try:
            self.wait_for("every trial to end", done, timeout)
        except SystemExit as err:
            print(f"drain: {str(err).splitlines()[0]}", flush=True)
            return False
        return True


# --- the report -------------------------------------------------------------------------------


def parse_mix(text: str) -> dict[str, int]:
    mix = dict.fromkeys(KINDS, 0)
    for part in filter(None, text.split(",")):
        kind, _, n = part.partition("=")
        if kind not in KINDS or not n.isdigit():
            raise argparse.ArgumentTypeError(f"--mix wants {'=N,'.join(KINDS)}=N, got {part!r}")
        mix[kind] = int(n)
    return mix


def parse_span(text: str) -> dict[str, float]:
    out = {}
    for part in filter(None, text.split(",")):
        kind, _, n = part.partition("=")
        if kind not in KINDS:
            raise argparse.ArgumentTypeError(f"--span wants KIND=SECONDS, got {part!r}")
        out[kind] = float(n)
    return out


def scale_mix(mix: dict[str, int], kills: int) -> dict[str, int]:
    """The mix's proportions for ``kills`` kills (largest remainders)."""
    total = sum(mix.values())
    if total == kills or total == 0:
        return mix
    raw = {k: v * kills / total for k, v in mix.items()}
    out = {k: int(v) for k, v in raw.items()}
    for k in sorted(raw, key=lambda k: raw[k] - out[k], reverse=True)[: kills - sum(out.values())]:
        out[k] += 1
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kills", type=int, default=100, help="SIGKILLs in all (default 100)")
    ap.add_argument(
        "--mix", type=parse_mix, default=None,
        help="kills per trial type, scaled to --kills (default link_check=55,rd_qoe=37,rd_qoe_vm=8)",
    )  # fmt: skip
    ap.add_argument("--seed", type=int, default=14)
    ap.add_argument("--mode", choices=("alternate", "main", "group"), default="alternate",
                    help="kill the main process, its process group, or alternate (default)")  # fmt: skip
    ap.add_argument("--second-kill-share", type=float, default=0.2,
                    help="share of kills that hit a trial's second attempt (default 0.2)")  # fmt: skip
    ap.add_argument("--span", type=parse_span, default={},
                    help="KIND=SECONDS,...: a fixed kill window from the claim (default: the median "
                    "duration of the run's earlier trials of the type and protocol; before any: "
                    + ",".join(f"{k}={v:g}" for k, v in DEFAULT_SPAN.items()) + ")")  # fmt: skip
    ap.add_argument("--settle", type=float, default=0.0,
                    help="a third census this many seconds after each restart (default: none)")  # fmt: skip
    ap.add_argument("--drain-timeout", type=float, default=900.0, help="bound on the final wait, s")
    ap.add_argument("--stop-at", default=None,
                    help="HH:MM (UTC): no new kill plan after this time (then drain, report)")  # fmt: skip
    ap.add_argument("--json", type=Path, default=Path(__file__).with_name("kill-soak-last-run.json"))
    ap.add_argument("--write-docs", action="store_true", help=f"replace the kill-soak section of {DOCS}")
    args = ap.parse_args()
    if os.geteuid() != 0:
        raise SystemExit("needs root (network namespaces)")
    mix = scale_mix(args.mix or DEFAULT_MIX, args.kills)
    rng = random.Random(args.seed)
    plans = make_plans(mix, args.second_kill_share, rng)
    deadline = None
    if args.stop_at:
        hh, mm = map(int, args.stop_at.split(":"))
        now = dt.datetime.now(dt.UTC)
        stop = now.replace(hour=hh, minute=mm, second=0, microsecond=0)
        deadline = (stop if stop > now else stop + dt.timedelta(days=1)).timestamp()
    if mix.get("rd_qoe_vm"):
        from qoelab.vm.capability import vm_capability

        if not vm_capability()["available"]:
            raise SystemExit(
                f"VM kills need the guest image: {vm_capability()['image_note']} (make vm-image)"
            )
    load_at_start = [round(x, 2) for x in os.getloadavg()]
    started = time.time()
    date = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")

    sys.path.insert(0, str(ROOT / "benchmarks"))
    from stack import PrivateStack

    stack = PrivateStack(BENCH_DB, REDIS_DB, "qoelab-kill-soak-")
    # SIGTERM (a killed run) unwinds like Ctrl-C: the stack stops its processes and drops its database.
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    soak: Soak | None = None
    result: dict[str, Any] | None = None
    safety: list[str] = []
    try:
        with stack:
            api = stack.start_web(workers=2)
            stack.start_scheduler()
            soak = Soak(stack, api, args, rng)
            print(
                f"plans: {len(plans)} trials for {sum(mix.values())} kills {mix}; logs in {stack.tmp}",
                flush=True,
            )
            finished = soak.run(plans, deadline)
            drained = soak.drain(args.drain_timeout)
            final = soak.take_census()
            stack.stop(HOST)
            after_stop = soak.census.take(set(), set())
            summary = summarise(soak, drained, final, after_stop)
            result = {
                "date": date,
                "command": " ".join(
                    [".venv/bin/python", "benchmarks/reliability/kill_soak.py", *sys.argv[1:]]
                ),
                "machine": {
                    "cpus": os.cpu_count(),
                    "kernel": platform.release(),
                    "load_at_start": load_at_start,
                    "load_at_end": [round(x, 2) for x in os.getloadavg()],
                },  # fmt: skip
                "seed": args.seed,
                "mix": mix,
                "planned_kills": sum(mix.values()),
                "stopped_early": "" if finished else f"--stop-at {args.stop_at} reached",
                "second_kill_share": args.second_kill_share,
                "wall_min": round((time.time() - started) / 60, 1),
                "summary": summary,
                "kills": [dataclasses.asdict(k) for k in soak.kills],
                "logs": str(stack.tmp),
            }
            result["reading"] = reading(result)
    except KeyboardInterrupt:
        print("interrupted: workers stopped, database dropped", flush=True)
    finally:
        # Whatever happened: nothing of ours may stay on the host (reported if anything did).
        from qoelab.runner import cleanup_prefix

        with contextlib.suppress(Exception):
            safety = cleanup_prefix(BASE)
        if safety:
            print(f"safety-net cleanup removed: {safety}", flush=True)
    if result is None:
        print(f"no result (interrupted or failed); logs in {stack.tmp}", flush=True)
        return 1
    result["safety_net_removed"] = safety
    args.json.write_text(json.dumps(result, indent=1, default=str) + "\n")
    print()
    print(markdown(result))
    print()
    print(result["reading"])
    print(
        json.dumps(
            {k: result["summary"]["trials"][k] for k in ("failed_reasons", "requeue_reasons")}, indent=1
        )
    )
    if args.write_docs:
        write_docs(result)
        print(f"wrote {DOCS}")
    print(f"written {args.json}; logs in {stack.tmp}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
