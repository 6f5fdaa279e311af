"""The `userspace` link-emulation backend: drives the C packet path `linkemu` (workers/csrc/).

linkemu creates one non-persistent TUN device in the client namespace and one in the server
namespace and forwards IP packets between them, applying each direction's rate, queue, delay,
jitter and loss. It is a forwarder, not a TCP proxy, so the endpoints' TCP sees the emulated path.
Because the TUN devices are not persistent they vanish with the process however it ends; linkemu
also ends when its stdin (a pipe held by this object) closes or this process dies
(PR_SET_PDEATHSIG), so a crashed driver leaves nothing behind.

Addresses, routes and the MTU of the TUN devices are the caller's job (topology code); linkemu only
sets the MTU it was given and brings the devices up.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import select
import shlex
import signal
import subprocess
import tempfile
import time
from pathlib import Path
from typing import IO, Any, Protocol

from qoelab import helpers
from qoelab.errors import ParameterError, PrivilegeError, QoelabError
from qoelab.procs import end_process

ENV_BINARY = helpers.LINKEMU.env
NOT_BUILT = helpers.LINKEMU.not_built
NEEDS_NET_ADMIN = "creating TUN devices needs CAP_NET_ADMIN; run the worker as root or with that capability"
CAP_NET_ADMIN_BIT = 12

# linkemu's exit codes (see the header of workers/csrc/linkemu.c).
EXIT_USAGE, EXIT_PERM, EXIT_NONS, EXIT_NOTUN = 2, 3, 4, 5
DEFAULT_MAX_INFLIGHT = 131072  # packets per direction linkemu may hold (buffers are allocated lazily)
# The queues linkemu runs in front of a direction's rate stage: the drop-tail FIFO, the two-class
# priority queue, drop-head, CoDel (RFC 8289) and PIE (RFC 8033).
QUEUES = ("fifo", "prio", "drophead", "codel", "pie")
# With a profile's ``offload``: linkemu's --batch-us, the longest a packet waits for others to leave
# with it, above 20000 packets a second only (docs/emulation.md, "Offload").
OFFLOAD_BATCH_US = 400


class Direction(Protocol):
    """One direction of a link profile (defined in qoelab.emulation.profile; duck-typed here)."""

    rate_bps: float | None
    delay_s: float
    jitter_s: float
    jitter_dist: str
    reorder: bool
    loss_pct: float
    gemodel: tuple[float, float, float, float] | None
    limit_pkts: int | None
    limit_bytes: int | None
    queue: str
    queue_target_s: float | None
    queue_interval_s: float | None
    queue_max_burst_s: float | None
    trace: str | None
    outage: tuple[float, float] | None
    outage_windows: tuple[tuple[float, float], ...] | None


class Profile(Protocol):
    up: Direction
    down: Direction
    mtu: int
    seed: int
    offload: bool


binary_path = helpers.LINKEMU.path


def _has_net_admin() -> bool:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("CapEff:"):
                return bool(int(line.split()[1], 16) >> CAP_NET_ADMIN_BIT & 1)
    except OSError:
        pass
    return os.geteuid() == 0


def available() -> tuple[bool, str]:
    """Whether this host can run the userspace backend, and if not, why (one sentence)."""
    path = binary_path()
    if not (path.is_file() and os.access(path, os.X_OK)):
        return False, NOT_BUILT
    try:
        fd = os.open("/dev/net/tun", os.O_RDWR)
    except OSError as err:
        return False, f"/dev/net/tun is not usable here ({err.strerror}); the kernel needs TUN support"
    os.close(fd)
    if not _has_net_admin():
        return False, NEEDS_NET_ADMIN
    return True, "ok"


def _num(x: float) -> str:
    return repr(float(x))


def direction_spec(d: Direction, name: str) -> str:
    """The `--up`/`--down` argument for one direction; raises ParameterError naming the field."""

    def check(field: str, value: float, lo: float, hi: float) -> float:
        if value is None or not math.isfinite(value) or value < lo or value > hi:
            raise ParameterError(f"{name}.{field}", f"must be between {lo:g} and {hi:g}, got {value!r}")
        return value

    rate = check("rate_bps", d.rate_bps or 0.0, 0.0, 1e12)
    parts = [
        f"rate={_num(rate)}",
        f"delay={_num(check('delay_s', d.delay_s, 0.0, 60.0))}",
        f"jitter={_num(check('jitter_s', d.jitter_s, 0.0, 60.0))}",
    ]
    if d.jitter_dist not in ("uniform", "normal"):
        raise ParameterError(f"{name}.jitter_dist", f"must be 'uniform' or 'normal', got {d.jitter_dist!r}")
    parts.append(f"dist={d.jitter_dist}")
    parts.append(f"reorder={1 if d.reorder else 0}")
    parts.append(f"loss={_num(check('loss_pct', d.loss_pct, 0.0, 100.0))}")
    if d.gemodel is not None:
        if d.loss_pct:
            raise ParameterError(f"{name}.gemodel", "give either loss_pct or gemodel, not both")
        if len(d.gemodel) != 4:
            raise ParameterError(f"{name}.gemodel", "needs four percentages (p, r, 1-h, 1-k) as netem")
        ge = [check("gemodel", g, 0.0, 100.0) for g in d.gemodel]
        parts.append("ge=" + ":".join(_num(g) for g in ge))
    if d.limit_pkts is not None:
        parts.append(f"limit={int(check('limit_pkts', d.limit_pkts, 1, 1e7))}")
    if d.limit_bytes is not None:
        parts.append(f"limit_bytes={int(check('limit_bytes', d.limit_bytes, 64, 1e11))}")
    outage = getattr(d, "outage", None)
    if outage is not None:
        on, off = (check("outage", x, 0.001, 86400.0) for x in outage)
        parts.append(f"outage={_num(on)}:{_num(off)}")
    windows = getattr(d, "outage_windows", None)
    if windows:
        checked = [(check("outage_windows", a, 0.0, 86400.0), check("outage_windows", b, 0.0, 86400.0))
                   for a, b in windows]  # fmt: skip
        parts.append("outages=" + "/".join(f"{_num(a)}:{_num(b)}" for a, b in checked))
    trace = getattr(d, "trace", None)
    if trace is not None:
        if d.rate_bps:
            raise ParameterError(f"{name}.trace", "give either rate_bps or a trace, not both")
        if "," in trace:
            raise ParameterError(f"{name}.trace", f"the path must not contain a comma: {trace!r}")
        parts.append(f"trace={trace}")
    queue = getattr(d, "queue", "fifo")  # duck-typed directions from before the field existed
    if queue not in QUEUES:
        raise ParameterError(f"{name}.queue", f"must be one of {', '.join(QUEUES)}, got {queue!r}")
    # linkemu refuses a served queue without a rate stage itself; a FIFO spec stays free of
    # prio= and qdisc= so that its command lines are byte-for-byte what they were.
    if queue == "prio":
        parts.append("prio=1")
    elif queue != "fifo":
        parts.append(f"qdisc={queue}")
    for key, field in (("target", "queue_target_s"), ("interval", "queue_interval_s"),
                       ("max_burst", "queue_max_burst_s")):  # fmt: skip
        value = getattr(d, field, None)
        if value is not None:
            parts.append(f"{key}={_num(check(field, value, 1e-4, 60.0))}")
    return ",".join(parts)


class UserspaceLink:
    """A running linkemu between two existing network namespaces.

    ``start()`` returns once both TUN devices exist and packets are forwarded; ``stop()`` ends
    the emulator and returns its final per-direction counters (``{"up": {...}, "down": {...}}``).
    """

    def __init__(
        self,
        client_ns: str,
        server_ns: str,
        client_if: str,
        server_if: str,
        profile: Profile,
        log_path: Path | None = None,
        ready_timeout_s: float = 5.0,
        rt_prio: int = 10,
        records_up: Path | None = None,
        records_down: Path | None = None,
    ) -> None:
        """``records_up``/``records_down``: where linkemu writes that direction's per-packet records
        (``qoelab.emulation.records``); None = no recording."""
        for field, value in (("client_if", client_if), ("server_if", server_if)):
            if not value or len(value) > 15:
                raise ParameterError(field, f"must be 1 to 15 characters, got {value!r}")
        self.client_ns, self.server_ns = client_ns, server_ns
        self.client_if, self.server_if = client_if, server_if
        self.profile = profile
        self.log_path = log_path
        self.ready_timeout_s = ready_timeout_s
        # SCHED_FIFO priority for linkemu (0 = normal): keeps delays exact on a busy host.
        self.rt_prio = rt_prio
        self.records_up, self.records_down = records_up, records_down
        self._proc: subprocess.Popen[bytes] | None = None
        self._buf = b""
        self._err: IO[bytes] | None = None  # linkemu's stderr: the log file or a temporary file
        self._err_from = 0
        self._final: dict[str, Any] | None = None

    # -- process ---------------------------------------------------------------------------------
    def command(self) -> list[str]:
        """linkemu's argv; it names both namespaces so leftovers can be found by prefix."""
        p = self.profile
        mtu = int(p.mtu)
        limit = max(d.limit_pkts or 0 for d in (p.up, p.down))
        if not 576 <= mtu <= 65000:
            raise ParameterError("mtu", f"must be between 576 and 65000, got {p.mtu!r}")
        return [
            str(binary_path()),
            "--client-ns", self.client_ns,
            "--server-ns", self.server_ns,
            "--client-if", self.client_if,
            "--server-if", self.server_if,
            "--mtu", str(mtu),
            "--seed", str(int(p.seed)),
            "--rt-prio", str(int(self.rt_prio)),
            "--up", direction_spec(p.up, "up"),
            "--down", direction_spec(p.down, "down"),
            # room for the largest queue plus what is in flight on the delay line
            "--max-inflight", str(min(1 << 24, max(DEFAULT_MAX_INFLIGHT, limit + DEFAULT_MAX_INFLIGHT))),
            *(["--offload", "1", "--batch-us", str(OFFLOAD_BATCH_US)] if p.offload else []),
            *(["--records-up", str(self.records_up)] if self.records_up is not None else []),
            *(["--records-down", str(self.records_down)] if self.records_down is not None else []),
        ]  # fmt: skip

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    def start(self) -> None:
        if self._proc is not None:
            raise QoelabError("this userspace link is already started")
        argv = self.command()
        if not os.access(argv[0], os.X_OK):
            raise QoelabError(NOT_BUILT)
        # No reader threads: a helper that forks (pyroute2's NetNS does) while a thread holds a
        # lock can deadlock its child. stdout is read on demand (linkemu only writes when asked),
        # stderr goes to a file.
        if self.log_path is not None:
            self._err = open(self.log_path, "ab")  # noqa: SIM115 - closed in _close()
            self._err.write(f"# {time.strftime('%Y-%m-%dT%H:%M:%S')} {shlex.join(argv)}\n".encode())
            self._err.flush()
        else:
            self._err = tempfile.TemporaryFile()  # noqa: SIM115 - closed in _close()
        self._err_from = self._err.tell()
        # stdin stays an open pipe: linkemu exits when it closes, i.e. when this process dies.
        self._proc = subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._err, bufsize=0, close_fds=True
        )
        try:
            self._wait_ready()
        except BaseException:
            self._kill()
            raise

    def _readline(self, deadline: float) -> str | None:
        """The next stdout line, "" on timeout, None at EOF (linkemu exited)."""
        assert self._proc is not None and self._proc.stdout is not None
        fd = self._proc.stdout.fileno()
        while b"\n" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0:
                return ""
            ready, _, _ = select.select([fd], [], [], left)
            if not ready:
                return ""
            chunk = os.read(fd, 65536)
            if not chunk:
                return None
            self._buf += chunk
        line, self._buf = self._buf.split(b"\n", 1)
        text = line.decode(errors="replace")
        if self.log_path is not None and self._err is not None:
            self._err.write(line + b"\n")
            self._err.flush()
        return text

    def _stderr_text(self) -> str:
        if self._err is None:
            return ""
        self._err.flush()
        self._err.seek(self._err_from)
        lines = self._err.read().decode(errors="replace").splitlines()
        self._err.seek(0, os.SEEK_END)
        return "; ".join(x.replace("linkemu: error: ", "") for x in lines if x.startswith("linkemu:"))

    def _wait_ready(self) -> None:
        assert self._proc is not None
        deadline = time.monotonic() + self.ready_timeout_s
        while True:
            line = self._readline(deadline)
            if line == "ready":
                return
            if line is None:  # stdout closed: it exited
                raise self._start_error(self._proc.wait(timeout=5))
            if line == "" and time.monotonic() >= deadline:
                raise QoelabError(
                    f"the userspace link emulator did not become ready within {self.ready_timeout_s:g} s"
                )

    def _start_error(self, code: int) -> QoelabError:
        detail = self._stderr_text() or f"exit code {code}"
        if code == EXIT_PERM:
            return PrivilegeError(NEEDS_NET_ADMIN)
        if code == EXIT_NONS:
            return QoelabError(f"a network namespace for the userspace link does not exist ({detail})")
        if code == EXIT_NOTUN:
            return QoelabError(f"TUN devices are not usable on this host ({detail})")
        if code == EXIT_USAGE:
            return QoelabError(f"the userspace link emulator rejected its arguments ({detail})")
        return QoelabError(f"the userspace link emulator failed to start ({detail})")

    def _next_json(self, event: str, timeout: float) -> dict[str, Any] | None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            line = self._readline(deadline)
            if line is None:
                return None
            if line.startswith("{"):
                data = json.loads(line)
                if data.get("event") in (event, "final"):
                    return data
        return None

    def stats(self, timeout: float = 2.0) -> dict[str, Any]:
        """Current counters per direction, without stopping."""
        if self._proc is None or self._proc.poll() is not None:
            raise QoelabError("the userspace link emulator is not running")
        self._proc.send_signal(signal.SIGUSR1)
        data = self._next_json("stats", timeout)
        if data is None:
            raise QoelabError("the userspace link emulator did not report its counters")
        return {"up": data["up"], "down": data["down"]}

    def set_profile(self, profile: Profile, timeout: float = 2.0) -> dict[str, Any]:
        """Change both directions while running (not the MTU or a direction's queue kind); returns
        ``{"t_ns", "up", "down"}`` with the change's time on the records' monotonic clock."""
        specs = {"up": direction_spec(profile.up, "up"), "down": direction_spec(profile.down, "down")}
        if self._proc is None or self._proc.poll() is not None or self._proc.stdin is None:
            raise QoelabError("the userspace link emulator is not running")
        acks = []
        for name, spec in specs.items():
            self._proc.stdin.write(f"set {name} {spec}\n".encode())
            ack = self._next_json("set", timeout)
            if ack is None or ack.get("event") != "set":
                raise QoelabError("the userspace link emulator did not confirm the change of its profile")
            if not ack.get("ok"):
                raise ParameterError(f"{name}", str(ack.get("error", "refused")))
            acks.append(int(ack["t_ns"]))
        self.profile = profile
        return {"t_ns": acks[0], **specs}

    def stop(self, timeout: float = 5.0) -> dict[str, Any]:
        """End linkemu (its TUN devices go with it) and return the final counters; idempotent."""
        if self._proc is None:
            return self._final or {}
        proc = self._proc
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
        data = self._next_json("final", timeout)
        end_process(proc, after_s=timeout)
        self._close()
        self._final = {"up": data["up"], "down": data["down"]} if data else {}
        self._final["exit_code"] = proc.returncode
        return self._final

    def _kill(self) -> None:
        if self._proc is not None:
            end_process(self._proc)
        self._close()

    def _close(self) -> None:
        proc = self._proc
        if proc is not None:
            for stream in (proc.stdin, proc.stdout):
                with contextlib.suppress(OSError):
                    if stream is not None:
                        stream.close()
        if self._err is not None:
            self._err.close()
            self._err = None
        self._proc = None

    def __enter__(self) -> UserspaceLink:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
