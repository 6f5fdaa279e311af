"""A killed X2Go trial's row in X2Go's session database is finished by the cleanup.

Found by the kill soak (benchmarks/reliability/kill_soak.py): a trial killed while x2gostartagent
ran left its session in the database as running, with an empty agent PID and ports (the row
x2goinsertsession makes before the agent starts). The X2Go client cannot parse that line of
``x2golistsessions``, so every later X2Go trial of the host failed ("x2golistsessions command
failed after we have tried 20 times") until someone cleared the database by hand.
"""

from __future__ import annotations

import os
import secrets
import shutil
import socket
import subprocess
import time

import pytest

from qoelab.rd.cleanup import cleanup_leftovers
from qoelab.rd.desktop import RD_USER

X2GO_LIB = "/usr/lib/x2go"


def _as_rd_user(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run(["runuser", "-u", RD_USER, "--", *argv], capture_output=True, text=True, timeout=30)


def _listed(session: str) -> bool:
    out = _as_rd_user("x2golistsessions")
    assert out.returncode == 0, out.stderr
    return any(line.split("|")[1:2] == [session] for line in out.stdout.splitlines())


def test_a_half_started_x2go_session_of_a_killed_trial_is_finished_by_the_cleanup() -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root (runs X2Go's tools as the remote-desktop user)")
    if shutil.which("x2golistsessions") is None or not os.path.exists(f"{X2GO_LIB}/x2goinsertsession"):
        pytest.skip("x2goserver is not installed")
    try:
        import pwd

        pwd.getpwnam(RD_USER)
    except KeyError:
        pytest.skip(f"no user {RD_USER} (qoelab rd setup)")
    prefix = "rdt" + secrets.token_hex(3)
    # Named as x2gostartagent names sessions (a 2-4 digit display). The database keeps finished rows
    # and wants each display once: random displays far above those X2Go hands out (from 50 up).
    host = socket.gethostname().split(".")[0]  # x2golistsessions lists this server's sessions
    sessions = []
    for tag in (prefix, "rdx" + secrets.token_hex(3)):
        for _ in range(20):
            display = str(5000 + secrets.randbelow(5000))
            sid = f"{RD_USER}-{display}-{int(time.time())}_stDqoelab-rd-{tag}_dp24"
            if _as_rd_user(f"{X2GO_LIB}/x2goinsertsession", display, host, sid).returncode == 0:
                sessions.append(sid)
                break
    assert len(sessions) == 2, "could not insert the test sessions"
    session, other = sessions
    try:
        assert _listed(session) and _listed(other)

        removed = cleanup_leftovers(prefix)

        assert not _listed(session), "the killed trial's session is still listed as running"
        assert f"x2go session {session}" in removed
        assert _listed(other), "another trial's session was touched"
    finally:
        for sid in sessions:
            _as_rd_user(f"{X2GO_LIB}/x2gochangestatus", "F", sid)
