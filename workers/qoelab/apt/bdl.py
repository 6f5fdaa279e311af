"""The block-device layer of BDL-APT: drives the native helper ``apt-bdl`` (apt/csrc/bdl.c).

apt-bdl opens ``sessions`` NBD or iSCSI sessions to one target, reads the device sequentially
striped over the first ``active`` of them and prints a cumulative per-session byte count every
``report_ms``; ``set_active`` changes how many are active. The helper is started through a
caller-given ``popen`` (``functools.partial(link.popen_in, "c")`` for the client namespace) from
the calling thread: it dies with that thread (PR_SET_PDEATHSIG), and when its stdin pipe closes.

A reader thread drains its stdout at once (raw ``os.read``, no Python lock held while blocked), so
the helper never stalls on a full pipe while the caller measures; events wait in a queue.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import subprocess
import tempfile
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any
from urllib.parse import urlsplit

from qoelab import helpers
from qoelab.emulation.system import marked_env
from qoelab.errors import ParameterError, QoelabError
from qoelab.procs import end_process

ENV_BINARY = helpers.APT_BDL.env
NOT_BUILT = helpers.APT_BDL.not_built
EXIT_OPEN, EXIT_USAGE, EXIT_LOST = 1, 2, 3  # apt-bdl's exit codes (see the header of bdl.c)
QUIT_TIMEOUT_S = 10.0  # apt-bdl drains in-flight reads for up to 5 s after "quit"
_EOF = object()

Popen = Callable[..., subprocess.Popen]


class BdlError(QoelabError):
    """The block-device layer failed; the message says how."""


class SessionOpenError(BdlError):
    """The target refused a session or did not answer; ``opened`` sessions had been accepted."""

    def __init__(self, message: str, session: int, opened: int, detail: str) -> None:
        super().__init__(message)
        self.session, self.opened, self.detail = session, opened, detail


class SessionLostError(BdlError):
    """A session failed while reading (connection reset, target gone, read error)."""

    def __init__(self, message: str, session: int, t: float, detail: str) -> None:
        super().__init__(message)
        self.session, self.t, self.detail = session, t, detail


@dataclass(frozen=True, slots=True)
class Report:
    """One periodic report: ``bytes`` are cumulative completed bytes per session."""

    t: float  # seconds since the sessions were ready
    active: int
    inflight: int
    requests: int  # completed application requests
    bytes: tuple[int, ...]

    @property
    def total(self) -> int:
        return sum(self.bytes)


def goodput_bps(first: Report, last: Report) -> float:
    """Aggregate goodput between two reports, in bit/s."""
    if last.t <= first.t:
        raise ValueError("the second report must be later than the first")
    return 8 * (last.total - first.total) / (last.t - first.t)


binary_path = helpers.APT_BDL.path


def _ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


class BlockDeviceLayer:
    """A running apt-bdl; ``start()`` returns once every session is open (its ``ready`` line)."""

    def __init__(
        self,
        protocol: str,
        uri: str,
        sessions: int,
        active: int,
        *,
        stripe: int = 131072,
        request: int = 10485760,
        readahead: int = 134217728,
        report_ms: int = 100,
        connect_timeout_s: float = 10.0,
        stall_timeout_s: float | None = None,
        initiator: str | None = None,
        prefix: str | None = None,
        popen: Popen | None = None,
        log_path: Path | None = None,
        ready_timeout_s: float | None = None,
    ) -> None:
        if protocol not in ("nbd", "iscsi"):
            raise ParameterError("protocol", f"must be nbd or iscsi, got {protocol!r}")
        if not 1 <= active <= sessions:
            raise ParameterError("active", f"must be from 1 to sessions ({sessions}), got {active}")
        self.protocol, self.uri, self.sessions, self.active = protocol, uri, sessions, active
        self.stripe, self.request, self.readahead, self.report_ms = stripe, request, readahead, report_ms
        self.connect_timeout_s = connect_timeout_s
        self.stall_timeout_s = stall_timeout_s  # None: a session may wait for replies for ever
        self.initiator, self.prefix = initiator, prefix
        self.popen = popen or subprocess.Popen
        self.log_path = log_path
        self.ready_timeout_s = ready_timeout_s if ready_timeout_s is not None else connect_timeout_s + 10
        self.ready: dict[str, Any] = {}
        self.latest: Report | None = None
        self.returncode: int | None = None
        self._proc: subprocess.Popen | None = None
        self._events: queue.Queue[Any] = queue.Queue()
        self._backlog: deque[Report] = deque()
        self._reader: threading.Thread | None = None
        self._err: IO[bytes] | None = None
        self._err_from = 0
        self._exited = False
        self._failure: BdlError | None = None  # raised again by every later call

    # -- process ---------------------------------------------------------------------------------
    def command(self) -> list[str]:
        argv = [
            str(binary_path()),
            "--protocol", self.protocol,
            "--uri", self.uri,
            "--sessions", str(self.sessions),
            "--active", str(self.active),
            "--stripe", str(self.stripe),
            "--request", str(self.request),
            "--readahead", str(self.readahead),
            "--report-ms", str(self.report_ms),
            "--connect-timeout-ms", str(max(1, round(self.connect_timeout_s * 1000))),
        ]  # fmt: skip
        if self.stall_timeout_s:
            argv += ["--stall-ms", str(max(1, round(self.stall_timeout_s * 1000)))]
        if self.initiator:
            argv += ["--initiator", self.initiator]
        if self.prefix:
            argv += ["--tag", self.prefix]
        return argv

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    @property
    def target(self) -> str:
        """The target's host:port (for messages)."""
        return urlsplit(self.uri).netloc or self.uri

    @property
    def size(self) -> int:
        return int(self.ready.get("size", 0))

    def start(self) -> dict[str, Any]:
        if self._proc is not None:
            raise BdlError("this block-device layer is already started")
        argv = self.command()
        if not os.access(argv[0], os.X_OK):
            raise BdlError(NOT_BUILT)
        if self.log_path is not None:
            self._err = open(self.log_path, "a+b")  # noqa: SIM115 - closed in close()
        else:
            self._err = tempfile.TemporaryFile()  # noqa: SIM115 - closed in close()
        self._err_from = self._err.tell()  # a log may hold earlier runs
        kwargs: dict[str, Any] = {"stdin": subprocess.PIPE, "stdout": subprocess.PIPE, "stderr": self._err}
        if self.prefix:
            kwargs["env"] = marked_env(self.prefix)
        try:
            self._proc = self.popen(argv, bufsize=0, close_fds=True, **kwargs)
        except OSError as err:
            self._err.close()
            self._err = None
            raise BdlError(f"cannot start the block-device layer helper: {err}") from None
        assert self._proc.stdout is not None
        self._reader = threading.Thread(
            target=self._read_loop, args=(self._proc.stdout.fileno(),), name="apt-bdl-reader", daemon=True
        )
        self._reader.start()
        try:
            self._wait_ready()
        except BaseException:
            self.close()
            raise
        return self.ready

    def _read_loop(self, fd: int) -> None:
        buf = b""
        try:
            while chunk := os.read(fd, 65536):
                *lines, buf = (buf + chunk).split(b"\n")
                for line in lines:
                    try:
                        self._events.put(json.loads(line))
                    except ValueError:
                        self._events.put({"event": "unparsed", "line": line.decode(errors="replace")})
        except OSError:
            pass
        self._events.put(_EOF)

    def _stderr_text(self) -> str:
        if self._err is None:
            return ""
        self._err.flush()
        self._err.seek(self._err_from)
        lines = self._err.read().decode(errors="replace").splitlines()
        self._err.seek(0, os.SEEK_END)
        return "; ".join(x.removeprefix("apt-bdl: ") for x in lines[-3:] if x.strip())

    def _next_event(self, deadline: float | None) -> dict[str, Any] | None:
        """The next event, None when the deadline passed; raises when the helper ended or failed."""
        if self._failure is not None:
            raise self._failure
        if self._exited:
            raise self._exit_error()
        try:
            timeout = None if deadline is None else max(0.0, deadline - time.monotonic())
            event = self._events.get(timeout=timeout)
        except queue.Empty:
            return None
        if event is _EOF:
            self._exited = True
            raise self._exit_error()
        kind = event.get("event")
        if kind == "report":
            self.latest = Report(
                float(event["t"]),
                int(event["active"]),
                int(event["inflight"]),
                int(event.get("requests", 0)),
                tuple(int(b) for b in event["bytes"]),
            )
        elif kind == "session_lost":
            self._drain_last_report()
            self._failure = self._lost_error(event)
            raise self._failure
        elif kind == "bad_command":
            raise BdlError(f"the block-device layer did not understand {event.get('line')!r}")
        return event

    def _drain_last_report(self) -> None:
        # apt-bdl prints one last report after session_lost, then exits
        with contextlib.suppress(BdlError):
            while (event := self._next_event(time.monotonic() + 2.0)) is not None:
                if event.get("event") == "report":
                    return

    def _exit_error(self) -> BdlError:
        code = self._wait_exit(5.0)
        detail = self._stderr_text() or f"exit code {code}"
        if code == EXIT_USAGE:
            return BdlError(f"the block-device layer rejected its arguments: {detail}")
        return BdlError(f"the block-device layer exited unexpectedly ({detail})")

    def _wait_exit(self, timeout: float) -> int | None:
        if self._proc is None:
            return self.returncode
        try:
            self.returncode = self._proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return None
        return self.returncode

    def _proto(self) -> str:
        return "NBD" if self.protocol == "nbd" else "iSCSI"

    def _open_error(self, event: dict[str, Any]) -> SessionOpenError:
        session, opened = int(event.get("session", 0)), int(event.get("opened", 0))
        detail = str(event.get("error", "unknown error"))
        where = f"the {self._proto()} target at {self.target}"
        if detail.startswith("no answer within"):
            msg = f"{where} did not answer within {self.connect_timeout_s:g} s"
            msg += f" ({opened} of {self.sessions} sessions open)" if opened else ""
        elif opened:
            msg = f"{where} accepted {opened} sessions and refused the {_ordinal(opened + 1)}: {detail}"
        else:
            msg = f"cannot open a session to {where}: {detail}"
        return SessionOpenError(msg, session, opened, detail)

    def _lost_error(self, event: dict[str, Any]) -> SessionLostError:
        session, t = int(event.get("session", -1)), float(event.get("t", 0.0))
        detail = str(event.get("error", "unknown error"))
        where = f"the {self._proto()} target at {self.target}"
        msg = f"session {session} to {where} was lost after {t:.1f} s: {detail}"
        return SessionLostError(msg, session, t, detail)

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + self.ready_timeout_s
        while True:
            event = self._next_event(deadline)
            if event is None:
                raise BdlError(
                    f"the block-device layer did not open {self.sessions} sessions to {self.target} "
                    f"within {self.ready_timeout_s:g} s"
                )
            kind = event.get("event")
            if kind == "ready":
                self.ready = event
                return
            if kind == "error":
                self._wait_exit(5.0)
                self._exited = True
                raise self._open_error(event)

    # -- control ---------------------------------------------------------------------------------
    def _send(self, line: str) -> None:
        if self._failure is not None:
            raise self._failure
        if self._proc is None or self._proc.stdin is None:
            raise BdlError("the block-device layer is not running")
        try:
            self._proc.stdin.write(line.encode() + b"\n")
            self._proc.stdin.flush()
        except (BrokenPipeError, ValueError):
            self._exited = self._exited or self._proc.poll() is not None
            raise BdlError("the block-device layer is not running") from None

    def set_active(self, k: int, timeout: float = 5.0) -> None:
        """Make sessions 0..k-1 the active ones; returns once the helper confirmed."""
        if not 1 <= k <= self.sessions:
            raise ParameterError("active", f"must be from 1 to {self.sessions}, got {k}")
        self._send(f"active {k}")
        deadline = time.monotonic() + timeout
        while (event := self._next_event(deadline)) is not None:
            if event.get("event") == "report":
                self._backlog.append(self.latest)  # type: ignore[arg-type]
            elif event.get("event") == "active" and event.get("active") == k:
                self.active = k
                return
        raise BdlError(f"the block-device layer did not confirm {k} active sessions within {timeout:g} s")

    def reports(self, until: float | None = None) -> Iterator[Report]:
        """Reports as they arrive, until ``until`` (time.monotonic()) or forever if None.

        Raises SessionLostError when a session fails, BdlError when the helper ends on its own.
        """
        while True:
            if self._backlog:  # reports read while set_active waited for its answer
                yield self._backlog.popleft()
                continue
            event = self._next_event(until)
            if event is None:
                return
            if event.get("event") == "report":
                assert self.latest is not None
                yield self.latest

    def read_reports(self, until: float) -> list[Report]:
        """Every report that arrives before ``until`` (time.monotonic())."""
        return list(self.reports(until))

    def bytes_per_session(self) -> list[int]:
        """Cumulative completed bytes per session, as of the latest report read."""
        return list(self.latest.bytes) if self.latest else [0] * self.sessions

    # -- stopping --------------------------------------------------------------------------------
    def close(self, timeout: float = QUIT_TIMEOUT_S) -> int | None:
        """Quit (in-flight reads drain, sessions disconnect), else terminate, else kill; idempotent.

        Returns the helper's exit code.
        """
        proc = self._proc
        if proc is None:
            return self.returncode
        if proc.poll() is None:
            with contextlib.suppress(BdlError):
                self._send("quit")
        if proc.stdin is not None:
            with contextlib.suppress(OSError):
                proc.stdin.close()  # EOF means quit too
        self.returncode = end_process(proc, after_s=timeout, grace_s=3.0)
        if self._reader is not None:
            self._reader.join(timeout=5.0)
        if proc.stdout is not None:
            with contextlib.suppress(OSError):
                proc.stdout.close()
        if self._err is not None:
            self._err.close()
            self._err = None
        self._proc = None
        return self.returncode

    def __enter__(self) -> BlockDeviceLayer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
