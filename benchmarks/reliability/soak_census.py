"""The kill soak's census: what a killed worker left on the host (namespaces, devices, qdiscs,
processes, QEMU guests, overlays, mounts, files, X2Go session rows), counted independently of the
worker library's own finders, and the phase a trial was in when the kill came.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import re
import subprocess
from pathlib import Path
from typing import Any

BASE = "qsk"  # the soak worker's trial-name prefix base
KINDS = ("link_check", "rd_qoe", "rd_qoe_vm")
CATEGORIES = (
    "namespaces", "devices", "tun", "qdiscs", "processes", "qemu", "overlays", "mounts", "files", "x2go_db",
)  # fmt: skip
PREFIX_TOKEN = re.compile(rf"\b({BASE}[a-z0-9]{{1,9}})")


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


def process_tree(pid: int) -> set[int]:
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
        skip = exclude_pids | process_tree(me) | {p.pid for p in psutil.Process(me).parents()}
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


def parse_time(value: str | None) -> float | None:
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
