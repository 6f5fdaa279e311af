"""What the storage targets share: the running-target object, process start, readiness, cleanup.

Every process is started through a caller-given ``popen`` (the server namespace:
``functools.partial(link.popen_in, "s")``) and carries ``QOELAB_LINK_PREFIX=<prefix>``; short
commands go through ``run`` (``functools.partial(link.run_in, "s")``). A target's files live in its
own directory ``qoelab-<prefix>-<kind>-XXXX`` under the trial's work dir, so cleanup by prefix finds
what a killed trial left (its mounts included).
"""

from __future__ import annotations

import contextlib
import re
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from qoelab.apt.targets import TargetError
from qoelab.emulation.system import check_prefix, marked_env
from qoelab.errors import QoelabError

Popen = Callable[..., subprocess.Popen]
Run = Callable[..., subprocess.CompletedProcess]
KINDS = ("nfs", "swift")


def run_here(argv: Sequence[str], timeout: float = 30) -> subprocess.CompletedProcess[str]:
    """``run`` in this namespace: text output captured, never raises on a failed command."""
    try:
        return subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        return subprocess.CompletedProcess(list(argv), 124, "", f"{argv[0]} timed out after {timeout:g} s")


def run_quietly(run: Run, argv: Sequence[str], timeout: float) -> subprocess.CompletedProcess[str]:
    """``run`` that turns a timeout (LinkError from ``link.run_in``, or TimeoutExpired) into exit 124."""
    try:
        return run(list(argv), timeout=timeout)
    except (subprocess.TimeoutExpired, QoelabError, OSError) as err:  # link.run_in raises LinkError
        return subprocess.CompletedProcess(list(argv), 124, "", str(err))


def instance_dir(prefix: str, kind: str, workdir: Path | None) -> Path:
    check_prefix(prefix)
    root = Path(workdir) if workdir is not None else Path(tempfile.gettempdir())
    root.mkdir(parents=True, exist_ok=True)
    return Path(tempfile.mkdtemp(prefix=f"qoelab-{prefix}-{kind}-", dir=root))


def tail(path: Path, lines: int = 8, skip: Sequence[str] = ()) -> str:
    """The file's last non-empty lines that contain none of ``skip`` (known harmless complaints)."""
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return ""
    found = [x.strip() for x in text.splitlines() if x.strip() and not any(s in x for s in skip)]
    return "\n".join(found[-lines:])


def wait_for(condition: Callable[[], bool], procs: Sequence[subprocess.Popen], timeout: float) -> bool:
    """Poll ``condition`` until it holds (True), one of ``procs`` exits or the time is up (False)."""
    deadline = time.monotonic() + timeout
    delay = 0.02
    while time.monotonic() < deadline:
        if condition():
            return True
        if any(p.poll() is not None for p in procs):
            return False
        time.sleep(delay)
        delay = min(delay * 2, 0.25)
    return condition()


class StorageTarget:
    """A running target: ``endpoint``, ``config`` (provenance), ``log_tail()``, ``stop()`` (idempotent).

    ``keep_files``: ``stop()`` leaves the instance directory (configs, logs) for the caller to
    collect; otherwise it goes, after the processes and after any mount in it.
    """

    kind = ""
    skip_in_tail: tuple[str, ...] = ()

    def __init__(self, prefix: str, directory: Path, keep_files: bool = False) -> None:
        self.prefix = prefix
        self.directory = directory
        self.keep_files = keep_files
        self.endpoint = ""
        self.config: dict[str, Any] = {"kind": self.kind}
        self.processes: dict[str, subprocess.Popen] = {}
        self.logs: dict[str, Path] = {}
        self._undo: list[Callable[[], object]] = []  # run in reverse order after the processes
        self._stopped = False

    def start(self, popen: Popen, name: str, argv: Sequence[str], extra_env: dict[str, str] | None = None):
        log_path = self.directory / f"{name}.out"
        self.logs.setdefault(name, log_path)
        with open(log_path, "ab") as log:
            proc = popen(
                list(argv),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=marked_env(self.prefix, extra_env),
                close_fds=True,
            )
        self.processes[name] = proc
        return proc

    def undo(self, step: Callable[[], object]) -> None:
        """Run ``step`` at ``stop()``, after the processes have ended (an unmount, say)."""
        self._undo.append(step)

    def log_tail(self, lines: int = 8) -> str:
        parts = []
        for name, path in self.logs.items():
            text = tail(path, lines, self.skip_in_tail)
            if text:
                parts.append(f"[{name}] " + " | ".join(text.splitlines()))
        return "\n".join(parts)

    def exited(self) -> list[str]:
        return [f"{n} (exit code {p.returncode})" for n, p in self.processes.items() if p.poll() is not None]

    def fail(self, message: str) -> TargetError:
        """Stop what was started and return the error to raise, with each log's last lines."""
        detail = "; ".join(x.replace("\n", " | ") for x in self.log_tail(2).splitlines() if x)
        self.stop()
        return TargetError(f"{message}: {detail}" if detail else message)

    def stop(self) -> None:
        if self._stopped:
            return
        self._stopped = True
        for proc in self.processes.values():
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + 5
        for proc in self.processes.values():
            try:
                proc.wait(timeout=max(0.05, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        for undo in reversed(self._undo):
            with contextlib.suppress(Exception):
                undo()
        if not self.keep_files:
            shutil.rmtree(self.directory, ignore_errors=True)

    def __enter__(self) -> StorageTarget:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def our_mounts(prefix: str) -> list[str]:
    """Mount points under a ``qoelab-<prefix>…-<kind>-`` directory, deepest first."""
    pattern = re.compile(rf"/qoelab-{re.escape(prefix)}[a-z0-9]*-(?:{'|'.join(KINDS)})-[^/]+/")
    found = []
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/mountinfo").read_text().splitlines():
            point = line.split()[4].replace("\\040", " ")
            if pattern.search(point + "/"):
                found.append(point)
    return sorted(set(found), key=len, reverse=True)


def unmount(point: str | Path) -> bool:
    """Unmount (lazily if busy); loop devices of ``mount -o loop`` go with it (autoclear)."""
    out = run_here(["umount", str(point)], timeout=30)
    if out.returncode != 0:
        out = run_here(["umount", "-l", str(point)], timeout=30)
    return out.returncode == 0
