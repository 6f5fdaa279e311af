"""Processes of a trial: started in a namespace, in their own process group, marked with its prefix.

Every process carries ``QOELAB_RD_PREFIX=<prefix>`` and ``QOELAB_LINK_PREFIX=<prefix>`` in its
environment, so :func:`qoelab.rd.cleanup.cleanup_leftovers` (and the link's own cleanup) can find
it after its owner was killed. Each runs in a new session, so stopping kills the whole group
(``ip netns exec`` execs the program, so the pid we hold is the program's own).
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from qoelab.errors import MissingToolError, QoelabError

ENV_RD = "QOELAB_RD_PREFIX"
ENV_LINK = "QOELAB_LINK_PREFIX"  # the emulation layer's marker (qoelab.emulation.system.ENV_MARK)

log = logging.getLogger("qoelab.rd")


class SetupError(QoelabError):
    """A part of the remote-desktop session did not come up; the message says which and why."""


def require_tool(name: str, package: str) -> str:
    """Absolute path of a program, or MissingToolError naming the Debian package."""
    path = shutil.which(name) or next(
        (
            str(p)
            for d in ("/usr/sbin", "/sbin", "/usr/bin", "/usr/lib/xorg")
            if (p := Path(d) / name).exists()
        ),
        None,
    )
    if path is None:
        raise MissingToolError(name, package)
    return path


def marked_env(prefix: str, extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {
        "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        "HOME": os.environ.get("HOME", "/root"),
        "LANG": "C.UTF-8",
        ENV_RD: prefix,
        ENV_LINK: prefix,
    }
    env.update(extra or {})
    return env


def end_process(
    popen: subprocess.Popen,
    *,
    after_s: float = 0.0,
    sig: int = signal.SIGTERM,
    grace_s: float = 0.0,
    group: bool = False,
    reap_s: float | None = None,
) -> int | None:
    """End a process the lab started and reap it: the one stop rule of its helpers and trial processes.

    Waits ``after_s`` for it to exit by itself (it was told to: a quit command, EOF on its stdin, its
    final line), then sends ``sig`` and waits ``grace_s`` (when > 0), then SIGKILL. ``group``: the
    signals go to its process group (started with ``start_new_session``), and a SIGKILL follows to
    whatever of the group outlived the leader. ``reap_s`` bounds the wait after SIGKILL (None: until
    it is reaped). Returns the exit status, None if it could not be reaped within ``reap_s``.
    """

    def send(s: int) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(popen.pid, s) if group else popen.send_signal(s)

    steps: list[tuple[int | None, float | None]] = []
    if after_s > 0:
        steps.append((None, after_s))
    if grace_s > 0:
        steps.append((sig, grace_s))
    steps.append((signal.SIGKILL, reap_s))
    code = popen.poll()
    for s, wait in steps:
        if code is not None:
            break
        if s is not None:
            send(s)
        try:
            code = popen.wait(timeout=wait)
        except subprocess.TimeoutExpired:
            continue
    if group:  # children that stayed in the group (those that left it are found by their markers)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(popen.pid, signal.SIGKILL)
    return code


@dataclass
class Proc:
    """A started program; ``stop()`` kills its whole process group."""

    name: str
    popen: subprocess.Popen
    log_path: Path
    stop_signal: int = signal.SIGTERM

    @property
    def pid(self) -> int:
        return self.popen.pid

    def alive(self) -> bool:
        return self.popen.poll() is None

    def log_tail(self, n: int = 8) -> str:
        try:
            lines = self.log_path.read_text(errors="replace").strip().splitlines()
        except OSError:
            return ""
        return " | ".join(lines[-n:])

    def stop(self, timeout: float = 3.0, sig: int | None = None) -> None:
        end_process(self.popen, sig=sig or self.stop_signal, grace_s=timeout, group=True, reap_s=timeout)


@dataclass
class ProcSet:
    """The processes of one trial, stopped in reverse start order."""

    prefix: str
    log_dir: Path
    procs: list[Proc] = field(default_factory=list)

    def spawn(
        self,
        name: str,
        argv: Sequence[str],
        *,
        ns: str | None = None,
        env: dict[str, str] | None = None,
        cwd: Path | None = None,
    ) -> Proc:
        full = ["ip", "netns", "exec", ns, *argv] if ns else list(argv)
        self.log_dir.mkdir(parents=True, exist_ok=True)
        log_path = self.log_dir / f"{name}.log"
        with open(log_path, "ab") as out:
            out.write(f"$ {' '.join(full)}\n".encode())
            out.flush()
            popen = subprocess.Popen(
                full,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                env=marked_env(self.prefix, env),
                cwd=cwd,
                start_new_session=True,
            )
        proc = Proc(name, popen, log_path)
        self.procs.append(proc)
        log.debug("%s: started %s (pid %d)", self.prefix, name, popen.pid)
        return proc

    def stop_all(self, keep: int = 0) -> None:
        """Stop every process, or all but the first ``keep`` started (a retried step's own)."""
        while len(self.procs) > keep:
            proc = self.procs.pop()
            try:
                proc.stop()
            except Exception as err:  # noqa: BLE001 - teardown must go on
                log.warning("%s: stopping %s failed: %s", self.prefix, proc.name, err)

    def logs(self) -> list[Path]:
        return sorted(self.log_dir.glob("*.log"))


def wait_for(
    what: str, check: Callable[[], object], timeout: float, proc: Proc | None = None, poll: float = 0.1
) -> object:
    """Poll ``check`` until it returns something truthy; fail with a sentence naming ``what``."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if proc is not None and not proc.alive():
            raise SetupError(f"{what}: {proc.name} exited with {proc.popen.returncode} ({proc.log_tail()})")
        if time.monotonic() > deadline:
            tail = f" ({proc.log_tail()})" if proc is not None else ""
            raise SetupError(f"{what}: not ready after {timeout:g} s{tail}")
        time.sleep(poll)


def run(
    argv: Sequence[str], *, ns: str | None = None, env: dict[str, str] | None = None, timeout: float = 20
) -> subprocess.CompletedProcess:
    full = ["ip", "netns", "exec", ns, *argv] if ns else list(argv)
    base = dict(os.environ)
    base.update(env or {})
    return subprocess.run(full, capture_output=True, text=True, env=base, timeout=timeout, check=False)
