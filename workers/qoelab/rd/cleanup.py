"""Remove what an RD trial left behind, even when its owner was SIGKILLed.

Found by prefix: processes whose environment carries ``QOELAB_RD_PREFIX=<prefix>...`` (everything
``ProcSet`` starts), and processes living in a namespace whose name starts with the prefix (what
sshd starts for the X2Go session runs with a fresh environment but stays in the namespace).
Afterwards the X lock files of dead displays and the X2Go session files of the trial are removed.
Namespaces themselves belong to whoever built the link (``qoelab.emulation.cleanup``).
"""

from __future__ import annotations

import contextlib
import glob
import logging
import os
import re
import shutil
import subprocess
from pathlib import Path

import psutil

from qoelab.emulation.system import kill_processes
from qoelab.procs import ENV_RD
from qoelab.rd.display import DISPLAY_RANGE, display_free

log = logging.getLogger("qoelab.rd.cleanup")
_PREFIX_OK = re.compile(r"^[a-z][a-z0-9-]{1,20}$")
NETNS_DIR = Path("/run/netns")
# The link itself is the emulation layer's to stop, never ours.
_NOT_OURS = {"linkemu", "qoelab-linkemu"}


def _net_inode(pid: int) -> int | None:
    try:
        return os.stat(f"/proc/{pid}/ns/net").st_ino
    except OSError:
        return None


def _protected() -> set[int]:
    me = psutil.Process()
    return {me.pid, *(p.pid for p in me.parents())}


def find_processes(prefix: str, namespaces: list[str] | None = None) -> list[psutil.Process]:
    names = set(namespaces or [])
    with contextlib.suppress(OSError):
        names |= {n for n in os.listdir(NETNS_DIR) if n.startswith(prefix)}
    inodes = set()
    for n in names:
        with contextlib.suppress(OSError):
            inodes.add((NETNS_DIR / n).stat().st_ino)
    protected = _protected()
    found = []
    for proc in psutil.process_iter():
        if proc.pid in protected:
            continue
        try:
            if inodes and _net_inode(proc.pid) in inodes:
                if proc.name() not in _NOT_OURS:
                    found.append(proc)
                continue
            mark = proc.environ().get(ENV_RD)
        except (psutil.Error, OSError):
            continue
        if mark is not None and mark.startswith(prefix):
            found.append(proc)
    return found


def _rd_homes() -> list[str]:
    from qoelab.rd.desktop import RD_USER

    try:
        import pwd

        return [pwd.getpwnam(RD_USER).pw_dir]
    except KeyError:
        return []


def terminate_x2go_sessions(prefix: str, server_ns: str, timeout: float = 10.0) -> list[str]:
    """End the trial's X2Go sessions on the server side, locally, before the client is stopped.

    pyhoca-cli's own ending (SIGINT with --terminate-on-ctrl-c) runs x2goterminate-session over
    SSH across the emulated link and then lingers for seconds before it exits. Running the same
    server script in the server namespace ends the agent and marks the session finished in
    X2Go's session database, so the client can simply be killed. Returns the sessions ended.
    """
    from qoelab.procs import run
    from qoelab.rd.desktop import RD_USER

    ended = []
    for home in _rd_homes():
        for path in sorted(glob.glob(f"{home}/.x2go/C-*_stDqoelab-rd-{prefix}*")):
            session = os.path.basename(path)[2:]
            argv = ["runuser", "-u", RD_USER, "--", "env", f"HOME={home}", "x2goterminate-session", session]
            try:
                res = run(argv, ns=server_ns, timeout=timeout)
            except Exception as err:  # noqa: BLE001 - the cleanup that follows kills what is left
                log.warning("x2goterminate-session %s: %s", session, err)
                continue
            if res.returncode == 0:
                ended.append(session)
            else:
                log.warning("x2goterminate-session %s exited %d: %s", session, res.returncode,
                            (res.stderr or res.stdout).strip()[-200:])  # fmt: skip
    return ended


def finish_x2go_sessions(prefix: str, timeout: float = 10.0) -> list[str]:
    """Mark the trial's X2Go sessions finished in X2Go's session database; returns their names.

    A killed trial's session stays listed as running; one killed while x2gostartagent ran is listed
    with an empty agent PID and ports, a line the X2Go client cannot parse: every later X2Go
    session of the RD user would fail ("x2golistsessions command failed after we have tried 20
    times"). Only the database changes here; the session's processes are killed by the caller.
    """
    from qoelab.rd.desktop import RD_USER

    changestatus = "/usr/lib/x2go/x2gochangestatus"  # `x2gopath libexec`
    if not _rd_homes() or shutil.which("x2golistsessions") is None or not os.path.exists(changestatus):
        return []
    as_user = ["runuser", "-u", RD_USER, "--"]
    try:
        out = subprocess.run([*as_user, "x2golistsessions"], capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired) as err:
        log.warning("x2golistsessions: %s", err)
        return []
    finished = []
    # Lines are agent_pid|session|display|server|status|...; the session names its command.
    for session in (line.split("|")[1] for line in out.stdout.splitlines() if line.count("|") > 1):
        if f"_stDqoelab-rd-{prefix}" not in session:
            continue
        try:
            res = subprocess.run([*as_user, changestatus, "F", session], capture_output=True, text=True,
                                 timeout=timeout)  # fmt: skip
        except (OSError, subprocess.TimeoutExpired) as err:
            log.warning("x2gochangestatus F %s: %s", session, err)
            continue
        if res.returncode == 0:
            finished.append(session)
        else:
            log.warning(
                "x2gochangestatus F %s exited %d: %s", session, res.returncode, res.stderr.strip()[-200:]
            )
    return finished


def cleanup_leftovers(prefix: str, namespaces: list[str] | None = None) -> list[str]:
    """Kill the trial's processes, finish its X2Go sessions, drop stale X locks and session files;
    return what went."""
    if not _PREFIX_OK.fullmatch(prefix):
        raise ValueError(f"prefix must be 2-21 lowercase letters, digits or '-', got {prefix!r}")
    removed: list[str] = kill_processes(find_processes(prefix, namespaces), log)
    removed += [f"x2go session {s}" for s in finish_x2go_sessions(prefix)]
    lo, hi = DISPLAY_RANGE
    for lock in glob.glob("/tmp/.X*-lock"):
        m = re.fullmatch(r"/tmp/\.X(\d+)-lock", lock)
        if m and lo <= int(m.group(1)) < hi and display_free(int(m.group(1))):
            removed.append(f"stale X lock :{m.group(1)}")
    # X2Go keeps per-session directories named after the session command (qoelab-rd-<prefix>).
    x2go_dirs = [f"{home}/.x2go/C-*_stDqoelab-rd-{prefix}*" for home in _rd_homes()]
    x2go_dirs.append(f"/tmp/.x2go-*/C-*_stDqoelab-rd-{prefix}*")
    for path in [
        *glob.glob(f"/tmp/{prefix}*-x2go-*"),
        *glob.glob(f"/usr/local/bin/qoelab-rd-{prefix}*"),
        *(p for pattern in x2go_dirs for p in glob.glob(pattern)),
    ]:
        with contextlib.suppress(OSError):
            if os.path.isdir(path) and not os.path.islink(path):
                shutil.rmtree(path)
            else:
                os.unlink(path)
            removed.append(path)
    if removed:
        log.info("rd cleanup %s: removed %s", prefix, ", ".join(removed))
    return removed
