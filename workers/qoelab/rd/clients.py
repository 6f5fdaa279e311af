"""The client side: native viewers in the client namespace on their own Xvfb display.

Defaults are the thesis settings (ch. 4): TightVNC compression level 9 and JPEG quality 5;
SPICE image compression auto_glz (server side, see ``desktop.py``); X2Go link ADSL, pack
16m-jpeg-9, geometry 800x600. Every setting can be overridden per trial through ``settings``.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

from qoelab.errors import ParameterError
from qoelab.procs import Proc, ProcSet, require_tool, wait_for
from qoelab.rd.desktop import SCREEN_H, SCREEN_W, SERVER_DEFAULTS, VNC_SERVERS, ServerSide, check_irlimit
from qoelab.rd.display import Display

CLIENT_DEFAULTS: dict[str, dict[str, Any]] = {
    "vnc": {"compresslevel": 9, "quality": 5, "encodings": None, "viewer_args": []},
    "spice": {"preferred_compression": None, "viewer_args": []},
    "x2go": {
        "link": "adsl",
        "pack": "16m-jpeg-9",
        "geometry": "800x600",
        "session_type": "desktop",
        "viewer_args": [],
    },
}
X2GO_LINKS = ("modem", "isdn", "adsl", "wan", "lan")
SPICE_PREFERRED = ("auto-glz", "auto-lz", "quic", "glz", "lz", "lz4", "off")


def resolve_settings(protocol: str, settings: dict[str, Any] | None) -> dict[str, Any]:
    """Defaults (server and client) overlaid with the trial's settings; unknown keys are errors."""
    if protocol not in CLIENT_DEFAULTS:
        raise ParameterError("protocol", f"must be one of vnc, spice, x2go, got {protocol!r}")
    merged = {**SERVER_DEFAULTS[protocol], **CLIENT_DEFAULTS[protocol]}
    for key, value in (settings or {}).items():
        if key not in merged:
            raise ParameterError(
                f"settings.{key}", f"unknown for {protocol}; known: {', '.join(sorted(merged))}"
            )
        merged[key] = value
    if protocol == "vnc":
        if merged["server"] not in VNC_SERVERS:
            raise ParameterError(
                "settings.server", f"must be one of {', '.join(VNC_SERVERS)}, got {merged['server']!r}"
            )
        for key, hi in (("compresslevel", 9), ("quality", 9)):
            v = merged[key]
            if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v <= hi:
                raise ParameterError(f"settings.{key}", f"must be an integer 0-{hi}, got {v!r}")
    if protocol == "spice" and merged["preferred_compression"] not in (None, *SPICE_PREFERRED):
        raise ParameterError(
            "settings.preferred_compression",
            f"must be one of {', '.join(SPICE_PREFERRED)}, got {merged['preferred_compression']!r}",
        )
    if protocol == "x2go":
        if merged["link"] not in X2GO_LINKS:
            raise ParameterError(
                "settings.link", f"must be one of {', '.join(X2GO_LINKS)}, got {merged['link']!r}"
            )
        check_irlimit(merged["irlimit"])
        if merged["session_type"] not in ("desktop", "application"):
            raise ParameterError(
                "settings.session_type", f"must be desktop or application, got {merged['session_type']!r}"
            )
    if not isinstance(merged["viewer_args"], list) or not all(
        isinstance(a, str) for a in merged["viewer_args"]
    ):
        raise ParameterError("settings.viewer_args", "must be a list of strings")
    return merged


def start_viewer(
    procs: ProcSet,
    protocol: str,
    ns: str,
    display: Display,
    server: ServerSide,
    settings: dict[str, Any],
    workdir: Path,
) -> Proc:
    env = {"DISPLAY": display.name}
    if protocol == "vnc":
        viewer = require_tool("xtightvncviewer", "xtightvncviewer")
        argv = [
            viewer,
            "-compresslevel",
            str(settings["compresslevel"]),
            "-quality",
            str(settings["quality"]),
        ]
        if settings["encodings"]:
            argv += ["-encodings", str(settings["encodings"])]
        argv += [*settings["viewer_args"], f"{server.ip}::{server.port}"]
    elif protocol == "spice":
        viewer = require_tool("remote-viewer", "virt-viewer")
        argv = [viewer, "--kiosk", "--auto-resize=never", "--spice-disable-audio", "--spice-disable-usbredir"]
        if settings["preferred_compression"]:
            argv.append(f"--spice-preferred-compression={settings['preferred_compression']}")
        argv += [*settings["viewer_args"], f"spice://{server.ip}:{server.port}"]
        env["XDG_CONFIG_HOME"] = str(workdir / "client-config")
        env["XDG_CACHE_HOME"] = str(workdir / "client-cache")
    elif protocol == "x2go":
        viewer = require_tool("pyhoca-cli", "pyhoca-cli")
        require_tool("nxproxy", "nxproxy")
        home = workdir / "client-home"
        (home / ".ssh").mkdir(parents=True, exist_ok=True)
        env["HOME"] = str(home)  # its own ~/.x2go, ~/.ssh/known_hosts: nothing shared between trials
        argv = [
            viewer, "--server", server.ip, "--remote-ssh-port", str(server.port),
            # "--password=": a generated password may start with "-", which argparse takes for an option.
            "-u", str(server.user), f"--password={server.password}", "--force-password",
            "--add-to-known-hosts", "--terminate-on-ctrl-c",
            "--sound", "none", "--link", settings["link"], "--pack", settings["pack"],
            "--geometry", settings["geometry"], "--session-type", settings["session_type"],
            "--kbd-type", "pc105/us", "-c", str(server.session_script), *settings["viewer_args"],
        ]  # fmt: skip
    else:
        raise ParameterError("protocol", f"must be one of vnc, spice, x2go, got {protocol!r}")
    os.makedirs(workdir, exist_ok=True)
    proc = procs.spawn(f"viewer-{protocol}", argv, ns=ns, env=env)
    if protocol == "x2go":
        # With --terminate-on-ctrl-c, SIGINT ends the server-side session too, not just the client.
        proc.stop_signal = signal.SIGINT
    return proc


# remote-viewer draws client-side decorations (a 5 px shadow each side) and, even in kiosk mode,
# a 46 px bar above the display; with no window manager it sizes itself to the screen and then
# *scales* the guest. Sizing the window to exactly this keeps the guest at 1:1.
SPICE_WINDOW = (810, 656)


def fit_viewer_window(protocol: str, display: Display) -> dict[str, Any] | None:
    """Put the viewer's window where page coordinates map 1:1; returns its final geometry."""
    if protocol == "x2go":
        return fit_x2go_window(display)
    if protocol != "spice":
        return None
    windows = display.windows()
    if not windows:
        return None
    wid = str(windows[0][0])
    display.xdotool("windowmove", wid, "0", "0")
    display.xdotool("windowsize", wid, str(SPICE_WINDOW[0]), str(SPICE_WINDOW[1]))
    _wid, x, y, w, h = next((w for w in display.windows() if str(w[0]) == wid), windows[0])
    return {"x": x, "y": y, "w": w, "h": h}


def fit_x2go_window(display: Display, timeout: float = 30) -> dict[str, Any] | None:
    """Size nxagent's window to the session geometry and wait until the desktop fills it.

    With no window manager on the client display nxagent forces "fullscreen" and makes its screen
    3/4 of the client screen (768 x 576 here) instead of the requested 800 x 600; with X2Go's
    ``resize=1`` it resizes its screen to follow its window, so sizing the window is enough.
    Returns the window's final geometry, with ``resized_from`` when it had to be changed.
    """
    from qoelab.rd.geometry import desktop_extent, fills, x2go_windows

    wids = x2go_windows(display)
    if not wids:
        return None
    wid = wids[0]

    def geometry() -> dict[str, int]:
        _w, x, y, w, h = next((w for w in display.windows() if str(w[0]) == wid), (0, -1, -1, 0, 0))
        return {"x": x, "y": y, "w": w, "h": h}

    before = geometry()
    if (before["w"], before["h"]) == (SCREEN_W, SCREEN_H) and (before["x"], before["y"]) == (0, 0):
        return before
    display.xdotool("windowmove", wid, "0", "0")
    display.xdotool("windowsize", wid, str(SCREEN_W), str(SCREEN_H))
    # The agent resizes its screen over the link and the browser repaints the uncovered band.
    wait_for(
        f"X2Go desktop filling {SCREEN_W}x{SCREEN_H} on {display.name}",
        lambda: fills(desktop_extent(display.grab(), (0, 0), (SCREEN_W, SCREEN_H)), (SCREEN_W, SCREEN_H)),
        timeout,
        poll=0.3,
    )
    return {**geometry(), "resized_from": f"{before['w']}x{before['h']}"}
