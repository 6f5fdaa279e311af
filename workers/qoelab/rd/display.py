"""X displays for the trial: Xvfb (client side, or Xvnc as the server display), screenshots, input.

Display numbers are picked free with the X lock-file convention (``/tmp/.X<n>-lock`` holding the
server's pid, ``/tmp/.X11-unix/X<n>``); a stale lock of a dead server is removed. Namespaces do
not hide these files, so a display started in a namespace is reachable from the host (the
abstract socket is per namespace, the socket file is not): screenshots and xdotool run from here.
"""

from __future__ import annotations

import contextlib
import os
import random
import re
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from qoelab.procs import Proc, ProcSet, SetupError, require_tool, run, wait_for

DISPLAY_RANGE = (300, 600)  # away from :0.. (desktops) and the low numbers other tools pick
X11_DIR = Path("/tmp/.X11-unix")


def _lock(n: int) -> Path:
    return Path(f"/tmp/.X{n}-lock")


def _lock_pid(n: int) -> int | None:
    try:
        return int(_lock(n).read_text().strip())
    except (OSError, ValueError):
        return None


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a zombie holds no display
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def display_free(n: int) -> bool:
    """True when display ``:n`` is unused; removes the lock and socket of a dead server."""
    pid = _lock_pid(n)
    if pid is not None and _pid_alive(pid):
        return False
    if _lock(n).exists() and pid is None:
        # Unreadable lock: the server may be writing it right now.
        return False
    with contextlib.suppress(OSError):
        _lock(n).unlink()
    with contextlib.suppress(OSError):
        (X11_DIR / f"X{n}").unlink()
    return True


def find_free_display(rng: random.Random | None = None) -> int:
    lo, hi = DISPLAY_RANGE
    start = (rng or random.Random()).randrange(lo, hi)
    for k in range(hi - lo):
        n = lo + (start - lo + k) % (hi - lo)
        if display_free(n):
            return n
    raise SetupError(f"no free X display number between :{lo} and :{hi}")


@dataclass
class Display:
    """A running X display ``:number``; ``proc`` is its server (None when someone else owns it)."""

    number: int
    width: int
    height: int
    proc: Proc | None = None
    xauthority: str | None = None

    @property
    def name(self) -> str:
        return f":{self.number}"

    def env(self) -> dict[str, str]:
        env = {"DISPLAY": self.name}
        if self.xauthority:
            env["XAUTHORITY"] = self.xauthority
        return env

    def grab(self) -> np.ndarray:
        """The whole screen as an H x W x 3 uint8 array."""
        from PIL import ImageGrab

        if self.xauthority:
            os.environ["XAUTHORITY"] = self.xauthority  # read by libxcb in-process
        for attempt in range(3):
            try:
                img = ImageGrab.grab(xdisplay=self.name)
                return np.asarray(img.convert("RGB"))
            except OSError:
                # A busy server may refuse one connection; a dead one fails all three.
                if attempt == 2:
                    raise
                time.sleep(0.05)
        raise AssertionError("unreachable")

    def xdotool(self, *args: str, timeout: float = 10) -> str:
        try:
            res = run([require_tool("xdotool", "xdotool"), *args], env=self.env(), timeout=timeout)
        except subprocess.TimeoutExpired:
            # An X server busy drawing (X2Go's agent at 10 % loss) may not answer: a setup failure
            # the callers handle, not a crash of the trial.
            raise SetupError(
                f"xdotool {' '.join(args)} on {self.name} did not answer within {timeout:g} s"
            ) from None
        if res.returncode != 0:
            raise SetupError(f"xdotool {' '.join(args)} on {self.name} failed: {res.stderr.strip()}")
        return res.stdout

    def ready(self) -> bool:
        if not (X11_DIR / f"X{self.number}").exists():
            return False
        res = run([require_tool("xdpyinfo", "x11-utils")], env=self.env(), timeout=5)
        return res.returncode == 0

    def pointer(self) -> tuple[int, int]:
        out = self.xdotool("getmouselocation", "--shell")
        vals = dict(line.split("=", 1) for line in out.split() if "=" in line)
        return int(vals["X"]), int(vals["Y"])

    def windows(self) -> list[tuple[int, int, int, int, int]]:
        """Visible windows as (id, x, y, w, h), largest first."""
        res = run(
            [require_tool("xdotool", "xdotool"), "search", "--onlyvisible", "--name", ""],
            env=self.env(),
            timeout=5,
        )
        root = run([require_tool("xwininfo", "x11-utils"), "-root"], env=self.env(), timeout=5).stdout
        m = re.search(r"Window id: (0x[0-9a-f]+)", root)
        root_id = int(m.group(1), 16) if m else -1
        found = []
        for wid in res.stdout.split():
            if int(wid) == root_id:
                continue
            geo = run(
                [require_tool("xdotool", "xdotool"), "getwindowgeometry", "--shell", wid],
                env=self.env(),
                timeout=5,
            )
            vals = dict(line.split("=", 1) for line in geo.stdout.split() if "=" in line)
            with contextlib.suppress(KeyError, ValueError):
                found.append(
                    (int(wid), int(vals["X"]), int(vals["Y"]), int(vals["WIDTH"]), int(vals["HEIGHT"]))
                )
        return sorted(found, key=lambda w: -w[3] * w[4])


def start_x_server(
    procs: ProcSet,
    name: str,
    argv_for: Callable[[int], Sequence[str]],
    width: int,
    height: int,
    ns: str | None,
    timeout: float = 15,
    env: dict[str, str] | None = None,
    attempts: int = 3,
) -> Display:
    """Start an X server built by ``argv_for(number)`` on a free display; retry on a lost race."""
    last: Exception | None = None
    for _ in range(attempts):
        number = find_free_display()
        proc = procs.spawn(f"{name}-{number}", argv_for(number), ns=ns, env=env)
        display = Display(number, width, height, proc)
        try:
            wait_for(f"X server {name} on :{number}", display.ready, timeout, proc=proc, poll=0.2)
            return display
        except SetupError as err:
            last = err
            proc.stop()
            if "already active" not in proc.log_tail(20) and "Server is already" not in proc.log_tail(20):
                raise
    raise SetupError(str(last))


def start_xvfb(procs: ProcSet, width: int, height: int, ns: str | None = None, name: str = "xvfb") -> Display:
    xvfb = require_tool("Xvfb", "xvfb")

    def argv(n: int) -> Sequence[str]:
        return [xvfb, f":{n}", "-screen", "0", f"{width}x{height}x24", "-nolisten", "tcp", "-noreset"]

    return start_x_server(procs, name, argv, width, height, ns)


@dataclass
class ScreenWatch:
    """Screenshots of a display in a thread; remembers when the picture last changed.

    ``changed_since(t)`` / ``last_change`` give the pixel timing: the time of the first screenshot
    that differed from the one before (sampling every ``period_s``).
    """

    display: Display
    period_s: float = 0.05
    last_change: float = 0.0
    frames: int = 0
    errors: int = 0
    _prev: np.ndarray | None = None
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> ScreenWatch:
        self.last_change = time.time()
        self._thread = threading.Thread(
            target=self._loop, name=f"screenwatch{self.display.name}", daemon=True
        )
        self._thread.start()
        return self

    def _loop(self) -> None:
        while not self._stop.is_set():
            t = time.time()
            try:
                img = self.display.grab()
            except Exception:  # noqa: BLE001 - a failed grab must not stop the watch
                self.errors += 1
                self._stop.wait(self.period_s)
                continue
            # Compare a strided sample: cheap on 2 cores, still sees any real screen update.
            small = img[::2, ::2]
            if self._prev is None or not np.array_equal(small, self._prev):
                self.last_change = t
            self._prev = small
            self.frames += 1
            self._stop.wait(max(0.0, self.period_s - (time.time() - t)))

    def stable_for(self, seconds: float) -> bool:
        return time.time() - self.last_change >= seconds

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2)


def wait_stable(display: Display, stable_s: float, timeout_s: float, period_s: float = 0.05) -> float | None:
    """Block until the screen did not change for ``stable_s``; return the last change time or None."""
    watch = ScreenWatch(display, period_s).start()
    try:
        deadline = time.time() + timeout_s
        while time.time() < deadline:
            if watch.frames > 1 and watch.stable_for(stable_s):
                return watch.last_change
            time.sleep(period_s)
        return None
    finally:
        watch.stop()
