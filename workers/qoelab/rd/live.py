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

X2Go has no browser client for the classic protocol, so its live mode is a *local view*: the
native X2Go client (pyhoca-cli + nxproxy, the benchmark's client with the thesis settings) runs
in the client namespace on its own Xvfb and talks to the X2Go server across the emulated link;
x11vnc shares that client display on the worker's loopback and noVNC shows it::

    browser --ws--> websockify (root namespace) --TCP 127.0.0.1--> x11vnc (client's Xvfb)
    X2Go client (client namespace) --SSH/NX over the emulated link--> x2goserver (server namespace)

The view path never crosses the link; only the X2Go client-server traffic is impaired, and the
session says so (``local_view``) so the page and the trial's results can tell the evaluator.

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
from qoelab.procs import Proc, ProcSet, SetupError, require_tool, wait_for
from qoelab.rd.desktop import ServerSide, start_server_side
from qoelab.rd.workload import generate

LIVE_PROTOCOLS = ("vnc", "spice", "x2go")
# x2go-view: noVNC showing the native X2Go client's display (a local view, see above).
CLIENT_KIND = {"vnc": "novnc", "spice": "spice-html5", "x2go": "x2go-view"}
# A page request of the kiosk browser in http.server's log: "GET /page-3.html HTTP/1.1" 200/304.
PAGE_GET = re.compile(r'"GET /([\w.-]+\.html)[^"]*" (200|304)')
LOCAL_VIEW_NOTE = (
    "You are seeing the X2Go client's screen through a local view; the network conditions apply "
    "between that client and the server."
)
PROXY_NOTE = (
    "The WebSocket proxy runs on the client side of the emulated link; the link "
    "(rate, delay, loss) lies between the proxy and the remote-desktop server."
)
# pyhoca-cli logs in over SSH and starts the session across the (possibly slow) link.
X2GO_SETUP_S = 90.0


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
    view_display: int | None = None
    _page_log: Proc | None = None

    def start(self) -> dict[str, Any]:
        """Start everything; returns the session info for the backend (URL, client kind, note)."""
        if self.protocol not in LIVE_PROTOCOLS:
            raise ParameterError(
                "protocol", f"must be one of {', '.join(LIVE_PROTOCOLS)}, got {self.protocol!r}"
            )
        socat = require_tool("socat", "socat") if self.protocol != "x2go" else ""
        proxy = websockify_argv()
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.procs = ProcSet(self.prefix, self.workdir / "logs")
        manifest = generate(self.workdir / "pages", pages=max(self.pages, 2), seed=self.seed)
        self.server = start_server_side(
            self.procs, self.protocol, self.server_ns, self.server_ip, self.workdir / "pages",
            manifest.page(1).file, self.workdir, self.settings, self.prefix,
        )  # fmt: skip
        self._page_log = next(p for p in self.procs.procs if p.name == "http")
        if self.protocol == "x2go":
            target = self._start_x2go_view()
            path = f"local view: x11vnc on the X2Go client's display :{self.view_display}"
        else:
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
            target = ""
            path = f"relay in {self.client_ns} -> {self.server_ip}:{self.server.port}"
        self.port = free_port(self.bind)
        listen = f"{self.bind}:{self.port}"
        argv = [*proxy, listen, target] if target else [*proxy, f"--unix-target={self.sock_path}", listen]
        ws = self.procs.spawn("websockify", argv)
        probe = "127.0.0.1" if self.bind in ("0.0.0.0", "") else self.bind
        wait_for(f"websockify on port {self.port}", lambda: _listening(probe, self.port), 15, proc=ws)
        host = advertised_host()
        self.log.info(
            "%s: live %s session at ws://%s:%d/ (%s)", self.prefix, self.protocol, host, self.port, path
        )
        info: dict[str, Any] = {
            "websocket_url": f"ws://{host}:{self.port}/",
            "client": CLIENT_KIND[self.protocol],
            "password": "",
            "protocol": self.protocol,
            "note": PROXY_NOTE,
            "local_view": self.protocol == "x2go",
        }
        if self.protocol == "x2go":
            info["note"] = LOCAL_VIEW_NOTE
        return info

    def _start_x2go_view(self) -> str:
        """The native X2Go client on a client-namespace Xvfb, shared by x11vnc on the loopback.

        Returns websockify's target. x11vnc runs in the root namespace (the Xvfb's path socket in
        /tmp/.X11-unix is reachable from there) and listens on 127.0.0.1 only: the view is local.
        """
        from qoelab.rd.clients import start_viewer
        from qoelab.rd.display import start_xvfb
        from qoelab.rd.workload import find_link

        assert self.procs is not None and self.server is not None
        x11vnc = require_tool("x11vnc", "x11vnc")
        m = re.fullmatch(r"(\d{3,4})x(\d{3,4})", str(self.settings["geometry"]).lower())
        if m is None:
            raise ParameterError(
                "settings.geometry", f"must be WIDTHxHEIGHT (100-9999 px), got {self.settings['geometry']!r}"
            )
        w, h = int(m.group(1)), int(m.group(2))
        # The client screen is the session's size, so the evaluator sees the X2Go window 1:1, no borders.
        client = start_xvfb(self.procs, w, h, ns=self.client_ns, name="client-xvfb")
        self.view_display = client.number
        # Without a window manager the X2Go client opens a window of 3/4 of the requested size, which
        # crops the desktop; fullscreen on a screen of exactly the session's size gives it 1:1.
        viewer_settings = {**self.settings, "geometry": "fullscreen"}
        viewer = start_viewer(
            self.procs, "x2go", self.client_ns, client, self.server, viewer_settings, self.workdir
        )
        wait_for(
            f"X2Go client showing the first page on {client.name}",
            lambda: find_link(client.grab()),
            X2GO_SETUP_S,
            proc=viewer,
            poll=0.3,
        )
        vport = free_port("127.0.0.1")
        argv = [
            x11vnc, "-display", client.name, "-rfbport", str(vport), "-localhost", "-nopw", "-forever",
            "-shared", "-noipv6", "-nolookup", "-nowf", "-nowcr", "-nosel", "-noclipboard", "-nobell",
            "-nossl", "-norc", "-cursor", "arrow",
        ]  # fmt: skip
        view = self.procs.spawn("view-x11vnc", argv)
        wait_for(f"local view x11vnc on port {vport}", lambda: f"PORT={vport}" in view.log_tail(40), 20,
                 proc=view)  # fmt: skip
        return f"127.0.0.1:{vport}"

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
