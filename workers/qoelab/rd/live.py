"""A live remote-desktop session for an evaluator's browser, with the proxy on the client side of the link.

The server namespace runs the same desktop as the benchmark (workload pages in a Chromium kiosk,
x11vnc or Xorg+spiceqxl). The browser clients (noVNC, spice-html5) speak WebSocket, so a proxy is
needed; it must sit on the CLIENT side of the emulated link, or the evaluator would see the link's
rate/delay/loss applied only to the proxy's own hop. So::

    browser --ws--> websockify (root namespace, host port) --unix socket--> socat (client namespace)
            --TCP over the emulated link--> VNC/SPICE server (server namespace)

``socat`` runs inside the client namespace and listens on a path-named unix socket (path sockets
live in the file system, which namespaces do not split), so websockify can reach it from the root
namespace with ``--unix-target``. Every process carries the trial prefix (``ProcSet``), so the
runner's cleanup finds whatever a killed session left.

Screens are counted on the server: each page the kiosk browser loads after the first is one
screen the evaluator went through (the page server's request log), not clicks on the canvas, which
a click beside the link would inflate.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import shutil
import socket
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from qoelab.errors import ParameterError
from qoelab.rd.desktop import ServerSide, start_server_side
from qoelab.rd.procs import Proc, ProcSet, SetupError, require_tool, wait_for
from qoelab.rd.workload import generate

LIVE_PROTOCOLS = ("vnc", "spice")
CLIENT_KIND = {"vnc": "novnc", "spice": "spice-html5"}
# A page request of the kiosk browser in http.server's log: "GET /page-3.html HTTP/1.1" 200/304.
PAGE_GET = re.compile(r'"GET /([\w.-]+\.html)[^"]*" (200|304)')
X2GO_UNAVAILABLE = (
    "X2Go is not available in live mode yet: classic X2Go has no browser client, and the planned "
    "unimpaired local view of a native x2goclient is not built. Use recorded mode for X2Go."
)


def websockify_argv() -> list[str]:
    """websockify from the worker's own environment (PyPI websockify 0.13.0), else from PATH."""
    own = Path(sys.executable).with_name("websockify")
    if own.exists():
        return [str(own)]
    return [require_tool("websockify", "websockify")]


def advertised_host() -> str:
    """The address the evaluator's browser should use to reach this worker.

    ``QOELAB_LIVE_HOST`` when set; otherwise the local address this host uses toward the backend
    (the route the browser's request came through is unknown here, the backend's is the best guess).
    """
    if host := os.environ.get("QOELAB_LIVE_HOST", "").strip():
        return host
    backend = (
        urlsplit(os.environ.get("QOELAB_BACKEND_URL", "") or "http://127.0.0.1/").hostname or "127.0.0.1"
    )
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect((socket.gethostbyname(backend), 9))
            return str(s.getsockname()[0])
    except OSError:
        return "127.0.0.1"


def free_port(bind: str) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((bind, 0))
        return int(s.getsockname()[1])


def _listening(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=0.5):
            return True
    except OSError:
        return False


@dataclass
class LiveSession:
    """The desktop, its server, the client-side relay and the WebSocket proxy of one live session."""

    protocol: str
    server_ns: str
    client_ns: str
    server_ip: str
    workdir: Path
    prefix: str
    settings: dict[str, Any]
    pages: int = 5
    seed: int = 1
    bind: str = "0.0.0.0"
    log: logging.Logger = field(default_factory=lambda: logging.getLogger("qoelab.rd.live"))
    procs: ProcSet | None = None
    server: ServerSide | None = None
    port: int = 0
    sock_path: Path | None = None
    _page_log: Proc | None = None

    def start(self) -> dict[str, Any]:
        """Start everything; returns the session info for the backend (URL, client kind, note)."""
        if self.protocol == "x2go":
            raise ParameterError("protocol", X2GO_UNAVAILABLE)
        if self.protocol not in LIVE_PROTOCOLS:
            raise ParameterError(
                "protocol", f"must be one of {', '.join(LIVE_PROTOCOLS)}, got {self.protocol!r}"
            )
        socat = require_tool("socat", "socat")
        proxy = websockify_argv()
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.procs = ProcSet(self.prefix, self.workdir / "logs")
        manifest = generate(self.workdir / "pages", pages=max(self.pages, 2), seed=self.seed)
        self.server = start_server_side(
            self.procs, self.protocol, self.server_ns, self.server_ip, self.workdir / "pages",
            manifest.page(1).file, self.workdir, self.settings, self.prefix,
        )  # fmt: skip
        self._page_log = next(p for p in self.procs.procs if p.name == "http")
        # A unix socket path must fit sun_path (108 bytes): short, under /tmp, named by the prefix.
        self.sock_path = Path(f"/tmp/{self.prefix}-live.sock")
        with contextlib.suppress(FileNotFoundError):
            self.sock_path.unlink()
        relay = self.procs.spawn(
            "relay-socat",
            [socat, f"UNIX-LISTEN:{self.sock_path},fork,mode=600",
             f"TCP:{self.server_ip}:{self.server.port},nodelay"],
            ns=self.client_ns,
        )  # fmt: skip
        wait_for("client-side relay socket", self.sock_path.exists, 10, proc=relay)
        self.port = free_port(self.bind)
        ws = self.procs.spawn(
            "websockify", [*proxy, f"--unix-target={self.sock_path}", f"{self.bind}:{self.port}"]
        )
        probe = "127.0.0.1" if self.bind in ("0.0.0.0", "") else self.bind
        wait_for(f"websockify on port {self.port}", lambda: _listening(probe, self.port), 15, proc=ws)
        host = advertised_host()
        self.log.info(
            "%s: live %s session at ws://%s:%d/ (relay in %s -> %s:%d)",
            self.prefix, self.protocol, host, self.port, self.client_ns, self.server_ip, self.server.port,
        )  # fmt: skip
        return {
            "websocket_url": f"ws://{host}:{self.port}/",
            "client": CLIENT_KIND[self.protocol],
            "password": "",
            "protocol": self.protocol,
            "note": (
                "The WebSocket proxy runs on the client side of the emulated link; the link "
                "(rate, delay, loss) lies between the proxy and the remote-desktop server."
            ),
        }

    def pages_seen(self) -> int:
        """Pages the kiosk browser loaded after the first one: the screens the evaluator went through."""
        if self._page_log is None:
            return 0
        try:
            text = self._page_log.log_path.read_text(errors="replace")
        except OSError:
            return 0
        return max(len(PAGE_GET.findall(text)) - 1, 0)

    def alive(self) -> str | None:
        """None while every process runs, else which one stopped (the session is broken)."""
        for p in self.procs.procs if self.procs else []:
            if not p.alive():
                return f"{p.name} exited with {p.popen.returncode} ({p.log_tail(3)})"
        return None

    def stop(self) -> None:
        if self.procs is not None:
            self.procs.stop_all()
        if self.sock_path is not None:
            with contextlib.suppress(FileNotFoundError):
                self.sock_path.unlink()
        for profile in self.workdir.glob("chromium-profile-*"):
            shutil.rmtree(profile, ignore_errors=True)
        from qoelab.rd.cleanup import cleanup_leftovers

        left = cleanup_leftovers(self.prefix, namespaces=[self.server_ns, self.client_ns])
        if left:
            self.log.info("%s: cleanup removed %s", self.prefix, ", ".join(left))


def hold(
    session: LiveSession,
    report: Any,
    max_s: float,
    interval_s: float = 2.0,
    deadline: float | None = None,
) -> dict[str, Any]:
    """Keep the session up, reporting screens, until ``report`` says released or time runs out.

    ``report(update) -> {"release": bool, "reason": str}`` is the control channel (the backend in
    a worker; anything with the same contract elsewhere). Returns how the session ended.
    """
    t0 = time.monotonic()
    end = t0 + max_s if deadline is None else min(t0 + max_s, deadline)
    reason = "maximum session time reached"
    last_screens = -1
    while True:
        broken = session.alive()
        screens = session.pages_seen()
        answer = report({"pages_seen": screens, "alive": broken is None, "error": broken or ""}) or {}
        last_screens = screens
        if answer.get("release"):
            reason = str(answer.get("reason") or "released by the backend")
            break
        if broken:
            raise SetupError(f"the live session broke: {broken}")
        if time.monotonic() >= end:
            break
        time.sleep(min(interval_s, max(end - time.monotonic(), 0.05)))
    return {"reason": reason, "held_s": time.monotonic() - t0, "pages_seen": max(last_screens, 0)}
