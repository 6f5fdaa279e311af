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
import re
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
BENCH_DB = "qoelab_soak_bench"
REDIS_DB = 11  # not 0 (demo), 12 (scale-out), 14 (test suite)
HOST = "soak-w1"
BASE = "qsk"
DOCS = ROOT / "docs" / "reliability.md"
BEGIN, END = "<!-- kill-soak:begin -->", "<!-- kill-soak:end -->"
KINDS = ("link_check", "rd_qoe", "rd_qoe_vm")
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
CATEGORIES = (
    "namespaces", "devices", "tun", "qdiscs", "processes", "qemu", "overlays", "mounts", "files", "x2go_db",
)  # fmt: skip
ACTIVE = ("pending", "queued", "running")
PREFIX_TOKEN = re.compile(rf"\b({BASE}[a-z0-9]{{1,9}})")


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


def _json_cmd(argv: list[str]) -> list[dict[str, Any]]:
    try:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=20, check=False)
        return json.loads(out.stdout or "[]") if out.returncode == 0 else []
    except (OSError, ValueError, subprocess.TimeoutExpired):
        return []


def _netns_exec(ns: str, argv: list[str]) -> list[str]:
    return ["ip", "netns", "exec", ns, *argv]


def _prefix_of(text: str) -> str | None:
    m = PREFIX_TOKEN.search(text)
    return m.group(1) if m else None


def _owned(name: str, allowed: set[str]) -> bool:
    """Does ``name`` (a namespace, device, file name...) belong to a trial the new worker runs?"""
    return any(p in name for p in allowed)


def _tree(pid: int) -> set[int]:
    import psutil

    try:
        proc = psutil.Process(pid)
        return {pid, *(c.pid for c in proc.children(recursive=True))}
    except psutil.Error:
        return set()


class Census:
    """What the host holds under the prefix base, found independently and by the library."""

    def __init__(self, workdir: Path, x_locks_at_start: set[str]) -> None:
        from qoelab.vm.guest import overlay_dir

        self.workdir = workdir
        self.overlay_dir = overlay_dir()
        self.x_locks_at_start = x_locks_at_start

    def live_prefixes(self, worker_tree: set[int]) -> set[str]:
        """Prefixes of the trials the live worker's pool processes run (from their marker files)."""
        out: set[str] = set()
        for path in (self.workdir / "running").glob("*.json"):
            with contextlib.suppress(OSError, ValueError, KeyError, TypeError):
                info = json.loads(path.read_text())
                if int(info["pid"]) in worker_tree and info.get("prefix"):
                    out.add(str(info["prefix"]))
        return out

    def take(self, exclude_pids: set[int], allowed: set[str]) -> dict[str, Any]:
        import psutil

        found: dict[str, list[str]] = {c: [] for c in CATEGORIES}
        # Namespaces: /run/netns entries, and nsfs mounts there (a namespace whose file is gone but
        # whose mount is not would hide from a directory listing).
        ns_names = set()
        with contextlib.suppress(OSError):
            ns_names |= {n for n in os.listdir("/run/netns") if n.startswith(BASE)}
        mounts = Path("/proc/self/mounts").read_text().splitlines()
        for line in mounts:
            fields = line.split()
            if len(fields) > 2 and fields[2] == "nsfs" and fields[1].startswith(f"/run/netns/{BASE}"):
                ns_names.add(fields[1].rsplit("/", 1)[-1])
        namespaces = sorted(n for n in ns_names if not _owned(n, allowed))
        found["namespaces"] = namespaces
        # Devices in the root namespace; TUN devices and qdiscs in the root namespace and in ours.
        for link in _json_cmd(["ip", "-d", "-j", "link", "show"]):
            name = link.get("ifname", "")
            if name.startswith(BASE) and not _owned(name, allowed):
                found["devices"].append(name)
                if link.get("linkinfo", {}).get("info_kind") == "tun":
                    found["tun"].append(name)
        for q in _json_cmd(["tc", "-j", "qdisc", "show"]):
            if str(q.get("dev", "")).startswith(BASE) and not _owned(q["dev"], allowed):
                found["qdiscs"].append(f"{q['dev']}: {q.get('kind')}")
        ns_inodes: dict[int, str] = {}
        for ns in sorted(ns_names):
            with contextlib.suppress(OSError):
                ns_inodes[os.stat(f"/run/netns/{ns}").st_ino] = ns
            if ns not in namespaces or not os.path.exists(f"/run/netns/{ns}"):
                continue
            for link in _json_cmd(_netns_exec(ns, ["ip", "-d", "-j", "link", "show"])):
                if link.get("linkinfo", {}).get("info_kind") == "tun":
                    found["tun"].append(f"{ns}/{link.get('ifname')}")
            for q in _json_cmd(_netns_exec(ns, ["tc", "-j", "qdisc", "show"])):
                if q.get("dev") != "lo" and q.get("kind") != "noqueue":
                    found["qdiscs"].append(f"{ns}/{q.get('dev')}: {q.get('kind')}")
        # Processes: anything that names the base or the work dir, carries a qoelab prefix marker of
        # ours in its environment, or lives in one of our namespaces; never the live worker's tree.
        me = os.getpid()
        skip = exclude_pids | _tree(me) | {p.pid for p in psutil.Process(me).parents()}
        wd = str(self.workdir)
        owned_pids: set[int] = set()
        for proc in psutil.process_iter(["pid", "name", "cmdline", "cwd", "environ"]):
            if proc.pid in skip:
                continue
            info = proc.info
            cmd = " ".join(info.get("cmdline") or [])
            env = info.get("environ") or {}
            prefix: str | None = None
            why = ""
            marks = [v for k, v in env.items() if k.startswith("QOELAB_") and k.endswith("PREFIX")]
            if any(v.startswith(BASE) for v in marks):
                prefix = next((v for v in marks if v.startswith(BASE) and len(v) > len(BASE)), None)
                why = "env"
            elif wd in cmd or str(info.get("cwd") or "").startswith(wd):
                why = "workdir"
            elif _prefix_of(cmd):
                prefix, why = _prefix_of(cmd), "cmdline"
            else:
                try:
                    inode = os.stat(f"/proc/{proc.pid}/ns/net").st_ino
                except OSError:
                    inode = None
                if inode in ns_inodes:
                    prefix, why = ns_inodes[inode], "netns"
            if not why:
                continue
            prefix = prefix or _prefix_of(cmd)
            if prefix and _owned(prefix, allowed):
                owned_pids.add(proc.pid)
                continue
            desc = f"{proc.pid} {info.get('name')} ({why}{', ' + prefix if prefix else ''})"
            found["processes"].append(desc)
            if str(info.get("name") or "").startswith("qemu-system"):
                found["qemu"].append(desc)
        # Overlays and half-saved snapshots of our trials (any file named after the base).
        for d in (self.overlay_dir, self.overlay_dir / "snapshots"):
            with contextlib.suppress(OSError):
                for entry in os.listdir(d):
                    if entry.startswith(BASE) and not _owned(entry, allowed):
                        found["overlays"].append(str(d / entry))
        # Mounts other than the namespaces' own nsfs mounts (counted above as namespaces).
        for line in mounts:
            fields = line.split()
            if len(fields) > 2 and fields[2] == "nsfs" and fields[1].startswith("/run/netns/"):
                continue
            if ((BASE in line and _prefix_of(line)) or wd in line) and not _owned(line, allowed):
                found["mounts"].append(line)
        # Files: trial work dirs, stale markers, X2Go session files, new stale X locks.
        for path in self.workdir.glob("trial-*"):
            if not any(path.name.startswith(f"trial-{t}-") for t in self._live_trials(exclude_pids)):
                found["files"].append(str(path))
        for path in (self.workdir / "running").glob("*.json"):
            with contextlib.suppress(OSError, ValueError, KeyError, TypeError):
                if int(json.loads(path.read_text())["pid"]) not in exclude_pids:
                    found["files"].append(str(path))
        import glob

        session_dirs = [f"{d}/C-*_stDqoelab-rd-{BASE}*" for d in ("/tmp/.x2go-*", "/home/*/.x2go")]
        for pattern in (f"/tmp/{BASE}*-x2go-*", f"/usr/local/bin/qoelab-rd-{BASE}*", *session_dirs):
            found["files"] += [p for p in glob.glob(pattern) if not _owned(p, allowed)]
        found["files"] += sorted(stale_x_locks() - self.x_locks_at_start)
        # X2Go's session database: sessions of our trials still listed (running or suspended).
        found["x2go_db"] = [s for s in x2go_sessions() if not _owned(s, allowed)]
        counts = {c: len(v) for c, v in found.items()}
        library = self.library(allowed, skip | owned_pids)
        independent = {
            *found["namespaces"],
            *found["devices"],
            *(int(p.split()[0]) for p in found["processes"]),
        }
        missed_by_census = [x for x in library["items"] if x not in independent]
        return {
            "counts": counts,
            "total": sum(counts.values()),
            "items": {c: v for c, v in found.items() if v},
            "library_counts": library["counts"],
            "missed_by_census": missed_by_census,
        }

    def _live_trials(self, pids: set[int]) -> set[str]:
        out = set()
        for path in (self.workdir / "running").glob("*.json"):
            with contextlib.suppress(OSError, ValueError, KeyError, TypeError):
                info = json.loads(path.read_text())
                if int(info["pid"]) in pids:
                    out.add(str(info["trial"]))
        return out

    def library(self, allowed: set[str], not_leftovers: set[int]) -> dict[str, Any]:
        """The library's own finders, for comparison (they do not know the live trial: filtered here)."""
        from qoelab.emulation.cleanup import leftovers
        from qoelab.rd.cleanup import find_processes as rd_processes
        from qoelab.vm.guest import find_qemu_processes, overlays_of

        link = leftovers(BASE)
        ns = [n for n in link["namespaces"] if not _owned(n, allowed)]
        dev = [n for n in link["devices"] if not _owned(n, allowed)]
        procs = {int(p.split()[0]) for p in link["processes"]}
        with contextlib.suppress(Exception):
            procs |= {p.pid for p in rd_processes(BASE)}
        with contextlib.suppress(Exception):
            procs |= {p.pid for p in find_qemu_processes(BASE)}
        procs -= not_leftovers
        overlays = [str(p) for p in overlays_of(BASE, self.overlay_dir) if not _owned(p.name, allowed)]
        counts = {
            "namespaces": len(ns),
            "devices": len(dev),
            "processes": len(procs),
            "overlays": len(overlays),
        }
        return {"counts": counts, "items": [*ns, *dev, *sorted(procs)]}


def x2go_sessions() -> list[str]:
    """Sessions of our trials that X2Go's database lists as running or suspended."""
    from qoelab.rd.desktop import RD_USER

    try:
        out = subprocess.run(["runuser", "-u", RD_USER, "--", "x2golistsessions"], capture_output=True,
                             text=True, timeout=20, check=False)  # fmt: skip
    except (OSError, subprocess.TimeoutExpired):
        return []
    sessions = (line.split("|")[1] for line in out.stdout.splitlines() if line.count("|") > 1)
    return [s for s in sessions if f"_stDqoelab-rd-{BASE}" in s]


def stale_x_locks() -> set[str]:
    """X lock files in the remote-desktop display range whose server is gone."""
    out = set()
    for name in os.listdir("/tmp"):
        m = re.fullmatch(r"\.X(\d+)-lock", name)
        if m and 300 <= int(m.group(1)) < 600:
            try:
                pid = int(Path(f"/tmp/{name}").read_text().strip())
                alive = Path(f"/proc/{pid}").exists()
            except (OSError, ValueError):
                alive = False
            if not alive:
                out.add(f"/tmp/{name}")
    return out


# --- the soak ---------------------------------------------------------------------------------


def _ts(value: str | None) -> float | None:
    return dt.datetime.fromisoformat(value).timestamp() if value else None


def trial_phase(workdir: Path, trial_id: int, attempt: int, kind: str) -> str:
    """Where the trial was when the kill came, from the last line of its own log (the runner's)."""
    log = workdir / f"trial-{trial_id}-{attempt}" / f"trial-{trial_id}.log"
    try:
        lines = log.read_text(errors="replace").splitlines()
    except OSError:
        return "claim"  # claimed, the runner has not opened the trial log yet
    last = next((line for line in reversed(lines) if " trial=" in line), "")
    checks = [
        ("report", r"finished: "),
        ("upload", r"uploaded |artifact .* (does not exist|is empty)|(succeeded|failed): "),
        ("cleanup", r"cleanup "),
        ("session", r"click \d|page -> client offset"),
        ("guest start", r"guest|snapshot|qemu|QEMU"),
        ("desktop start", r"server up on|desktop|viewer"),
        ("link measurement" if kind == "link_check" else "link verification", r"link \S+ up|verif"),
        ("link setup", r"resolved parameters|userspace link|sch_netem"),
    ]
    for phase, pattern in checks:
        if re.search(pattern, last):
            return phase
    return "setup"


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
        return _tree(proc.pid) if proc is not None and proc.poll() is None else set()

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
            started = _ts(row["started_at"]) or time.time()
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
    text = DOCS.read_text()
    start, end = text.index(BEGIN) + len(BEGIN), text.index(END)
    DOCS.write_text(text[:start] + "\n" + body.strip() + "\n" + text[end:])


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
        from qoelab.vm.guest import vm_capability

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
