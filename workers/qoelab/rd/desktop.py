"""The server side, "namespace desktop": pages over HTTP, a kiosk browser and the RD servers.

Everything runs in the server namespace:

* the workload pages, served by ``python3 -m http.server`` bound to the server address;
* VNC: TigerVNC ``Xvnc`` *is* the 800 x 600 display, Chromium runs on it;
* SPICE: Xorg with the ``spiceqxl`` driver (the X server that ``Xspice`` wraps) is the display; the
  Xspice wrapper's own default config crashes on this host (surface0 size 0, then no mode), so we
  write an explicit config (buffer sizes, an 800x600 mode, the Spice options) and start Xorg
  directly: same server, same driver, controllable as one process;
* X2Go: ``sshd`` with its own config (password login for the dedicated local user ``qoelab-rd``)
  plus x2goserver; the X2Go session command starts the kiosk browser inside the X2Go agent.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import re
import secrets
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from qoelab.errors import ParameterError
from qoelab.procs import Proc, ProcSet, SetupError, require_tool, wait_for
from qoelab.rd.display import Display, start_x_server, start_xvfb

PROTOCOLS = ("vnc", "spice", "x2go")
SCREEN_W, SCREEN_H = 800, 600
RD_USER = "qoelab-rd"
SECRET_DIR = Path("/var/lib/qoelab-rd")

# Server-side settings per protocol (the thesis defaults where the thesis names one).
SERVER_DEFAULTS: dict[str, dict[str, Any]] = {
    # x11vnc (libvncserver) on Xvfb by default: see docs/rd-benchmark.md, "Which VNC server".
    "vnc": {"port": 5900, "server": "x11vnc"},
    "spice": {
        "port": 5930,
        "image_compression": "auto_glz",
        "jpeg_wan_compression": "auto",
        "zlib_glz_wan_compression": "auto",
        "streaming_video": "filter",
    },
    # nxagent's -irlimit in kB/s: see x2go_agent_options and docs/rd-benchmark.md ("X2Go's silent gap").
    "x2go": {"ssh_port": 22, "irlimit": 1_000_000},
}
VNC_SERVERS = ("x11vnc", "tigervnc")
SPICE_IMAGE_COMPRESSION = ("off", "auto_glz", "auto_lz", "quic", "glz", "lz")
SPICE_WAN = ("auto", "never", "always")
SPICE_STREAMING = ("off", "all", "filter")

OMNIBOX_WEBUI_FEATURES = "WebUIOmniboxPopup,WebUIOmniboxAimPopup,WebUIOmniboxFullPopup"
IPC_CONNECTION_TIMEOUT_S = 600  # Chromium's default is 15 s; keep in step with vm-images/build.sh
CHROMIUM_FLAGS = [
    "--no-sandbox",
    "--test-type",  # no "unsupported flag" info bar over the page
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    # Chromium 156 renders the omnibox popup as a WebUI page in its own renderer, prewarmed at
    # start even in kiosk mode; under TCG that renderer held the first paint for over 10 min
    # (docs/vm.md). A kiosk window has no omnibox, so nothing is lost by turning it off.
    "--disable-features=Translate,MediaRouter,OptimizationHints," + OMNIBOX_WEBUI_FEATURES,
    "--disable-session-crashed-bubble",
    # A child process (network, storage, renderer) that has not heard from the browser 15 s after
    # its start ends itself; a browser that slow (a TCG guest booting, a busy host) then never
    # commits its first page (docs/vm.md, "Why the guest's browser stalled"). Nothing here is
    # that slow on purpose, so a child waits as long as a trial's setup may take.
    f"--ipc-connection-timeout={IPC_CONNECTION_TIMEOUT_S}",
    "--disable-smooth-scrolling",
    "--noerrdialogs",
    "--no-first-run",
    "--no-default-browser-check",
    "--password-store=basic",
    "--kiosk",
    f"--window-size={SCREEN_W},{SCREEN_H}",
    "--window-position=0,0",
]


def _choice(field_name: str, value: Any, allowed: tuple[str, ...]) -> str:
    if value not in allowed:
        raise ParameterError(field_name, f"must be one of {', '.join(allowed)}, got {value!r}")
    return str(value)


def _port(field_name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 65535:
        raise ParameterError(field_name, f"must be a TCP port 1-65535, got {value!r}")
    return value


def chromium_argv(url: str, user_data_dir: str) -> list[str]:
    return [require_tool("chromium", "chromium"), *CHROMIUM_FLAGS, f"--user-data-dir={user_data_dir}", url]


@dataclass
class ServerSide:
    """What the server namespace runs for one trial; ``display`` is the desktop seen by the servers."""

    protocol: str
    ns: str
    ip: str
    port: int
    url: str
    display: Display | None = None
    browser: Proc | None = None
    user: str | None = None
    password: str | None = None
    session_script: str | None = None
    info: dict[str, Any] = field(default_factory=dict)


def serve_pages(
    procs: ProcSet, ns: str, ip: str, pages_dir: Path, timeout: float = 10, port: int = 0
) -> tuple[Proc, int]:
    """``python3 -m http.server`` on ``ip`` (port 0: the kernel picks one); returns the port."""
    python = require_tool("python3", "python3")
    argv = [python, "-u", "-m", "http.server", str(port), "--bind", ip, "--directory", str(pages_dir)]
    proc = procs.spawn("http", argv, ns=ns)

    def port() -> int | None:
        m = re.search(r"port (\d+)", proc.log_tail(5))
        return int(m.group(1)) if m else None

    return proc, int(wait_for("page server", port, timeout, proc=proc))  # type: ignore[arg-type]


def _wait_for_page(display: Display, timeout: float, proc: Proc | None, shot: Path) -> None:
    from qoelab.rd.workload import find_link

    try:
        wait_for(
            f"browser showing the first page on {display.name}",
            lambda: find_link(display.grab()),
            timeout,
            proc,
        )
    except SetupError:
        save_screenshot(display, shot)
        raise


def save_screenshot(display: Display, path: Path) -> None:
    """Best effort: what the screen showed when something did not come up (for the logs)."""
    from PIL import Image

    with contextlib.suppress(Exception):
        path.parent.mkdir(parents=True, exist_ok=True)
        Image.fromarray(display.grab()).save(path)


def start_vnc_server(procs: ProcSet, ns: str, ip: str, settings: dict[str, Any]) -> tuple[Display, int]:
    port = _port("settings.port", settings["port"])
    kind = _choice("settings.server", settings.get("server", "x11vnc"), VNC_SERVERS)
    if kind == "x11vnc":
        return start_x11vnc(procs, ns, ip, port), port
    xvnc = require_tool("Xvnc", "tigervnc-standalone-server")

    def argv(n: int) -> list[str]:
        return [
            xvnc, f":{n}", "-geometry", f"{SCREEN_W}x{SCREEN_H}", "-depth", "24",
            "-rfbport", str(port), "-interface", ip, "-SecurityTypes", "None",
            "-AlwaysShared", "-AcceptSetDesktopSize=0", "-nolisten", "tcp", "-noreset",
        ]  # fmt: skip

    return start_x_server(procs, "xvnc", argv, SCREEN_W, SCREEN_H, ns), port


def start_x11vnc(procs: ProcSet, ns: str, ip: str, port: int) -> Display:
    """Xvfb 800x600 as the desktop and x11vnc (libvncserver) serving it.

    Like QEMU's built-in VNC server (the thesis' server) x11vnc compares the framebuffer and sends
    each change once, at the JPEG quality the client asked for; TigerVNC's Xvnc re-sends lossy
    areas losslessly in paced chunks for seconds afterwards, which hides the end of an update.
    """
    x11vnc = require_tool("x11vnc", "x11vnc")
    display = start_xvfb(procs, SCREEN_W, SCREEN_H, ns=ns, name="vnc-xvfb")
    argv = [
        x11vnc, "-display", display.name, "-rfbport", str(port), "-listen", ip, "-nopw", "-forever",
        "-shared", "-noipv6", "-nolookup", "-noxrecord", "-nowf", "-nowcr", "-nosel", "-noclipboard",
        "-nobell", "-nossl", "-norc", "-noxfixes", "-cursor", "arrow",
    ]  # fmt: skip
    proc = procs.spawn("x11vnc", argv, ns=ns)
    wait_for(f"x11vnc on port {port}", lambda: f"PORT={port}" in proc.log_tail(40), 20, proc=proc)
    return display


def spice_xorg_conf(settings: dict[str, Any], ip: str) -> str:
    port = _port("settings.port", settings["port"])
    comp = _choice("settings.image_compression", settings["image_compression"], SPICE_IMAGE_COMPRESSION)
    jpeg = _choice("settings.jpeg_wan_compression", settings["jpeg_wan_compression"], SPICE_WAN)
    zlib = _choice("settings.zlib_glz_wan_compression", settings["zlib_glz_wan_compression"], SPICE_WAN)
    stream = _choice("settings.streaming_video", settings["streaming_video"], SPICE_STREAMING)
    return f"""# Written by qoelab: Xorg + spiceqxl (what Xspice runs) at 800x600.
Section "Device"
    Identifier "XSPICE"
    Driver "spiceqxl"
    # Without explicit sizes spiceqxl 0.1.5 computes a zero surface0 and aborts.
    Option "FrameBufferSize" "16"
    Option "SurfaceBufferSize" "128"
    Option "CommandBufferSize" "128"
    Option "NumHeads" "1"
    Option "SpicePort" "{port}"
    Option "SpiceAddr" "{ip}"
    Option "SpiceDisableTicketing" "True"
    Option "SpiceImageCompression" "{comp}"
    Option "SpiceJpegWanCompression" "{jpeg}"
    Option "SpiceZlibGlzWanCompression" "{zlib}"
    Option "SpiceStreamingVideo" "{stream}"
EndSection
Section "InputDevice"
    Identifier "XSPICE POINTER"
    Driver     "xspice pointer"
EndSection
Section "InputDevice"
    Identifier "XSPICE KEYBOARD"
    Driver     "xspice keyboard"
EndSection
Section "Monitor"
    Identifier "Configured Monitor"
    HorizSync 1-200
    VertRefresh 1-200
    Modeline "800x600" 40.00 800 840 968 1056 600 601 605 628 +hsync +vsync
EndSection
Section "Screen"
    Identifier "XSPICE Screen"
    Monitor    "Configured Monitor"
    Device     "XSPICE"
    DefaultDepth 24
    SubSection "Display"
        Depth 24
        Modes "800x600"
        Virtual 800 600
    EndSubSection
EndSection
Section "ServerLayout"
    Identifier  "XSPICE"
    Screen      "XSPICE Screen"
    InputDevice "XSPICE KEYBOARD"
    InputDevice "XSPICE POINTER"
EndSection
Section "ServerFlags"
    Option "AutoAddDevices" "False"
EndSection
"""


def start_spice_server(
    procs: ProcSet, ns: str, ip: str, settings: dict[str, Any], workdir: Path
) -> tuple[Display, int]:
    require_tool("Xspice", "xserver-xspice")
    if not Path("/usr/lib/xorg/modules/drivers/spiceqxl_drv.so").exists():
        raise SetupError("the spiceqxl Xorg driver is missing; install the Debian package 'xserver-xspice'")
    xorg = require_tool("Xorg", "xserver-xorg-core")
    conf = workdir / "spice-xorg.conf"
    conf.write_text(spice_xorg_conf(settings, ip))

    def argv(n: int) -> list[str]:
        return [xorg, "-config", str(conf), "-noreset", "-nolisten", "tcp",
                "-logfile", str(workdir / f"logs/xorg-spice-{n}.log"), f":{n}"]  # fmt: skip

    return start_x_server(procs, "xspice", argv, SCREEN_W, SCREEN_H, ns, timeout=20), settings["port"]


def ensure_rd_user() -> tuple[str, str]:
    """The dedicated local account X2Go logs in as; its password lives root-only on this host."""
    SECRET_DIR.mkdir(mode=0o700, parents=True, exist_ok=True)
    secret = SECRET_DIR / "password"
    try:
        pwd.getpwnam(RD_USER)
    except KeyError:
        useradd = require_tool("useradd", "passwd")
        argv = [useradd, "-m", "-s", "/bin/bash", "-c", "qoelab remote-desktop benchmark", RD_USER]
        res = subprocess.run(argv, capture_output=True, text=True, check=False)
        if res.returncode != 0:
            raise SetupError(f"cannot create user {RD_USER}: {res.stderr.strip()}") from None
        with contextlib.suppress(FileNotFoundError):
            secret.unlink()
    if not secret.exists():
        password = secrets.token_urlsafe(18)
        chpasswd = require_tool("chpasswd", "passwd")
        res = subprocess.run(
            [chpasswd], input=f"{RD_USER}:{password}\n", capture_output=True, text=True, check=False
        )
        if res.returncode != 0:
            raise SetupError(f"cannot set the password of {RD_USER}: {res.stderr.strip()}")
        fd = os.open(secret, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(password)
    return RD_USER, secret.read_text().strip()


def start_sshd(
    procs: ProcSet, ns: str, ip: str, port: int, workdir: Path, user: str, env: dict[str, str] | None = None
) -> Proc:
    """sshd for the X2Go login; ``env`` is set in the login's environment (sshd's ``SetEnv``)."""
    sshd = require_tool("sshd", "openssh-server")
    keygen = require_tool("ssh-keygen", "openssh-client")
    require_tool("x2goruncommand", "x2goserver")
    Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)  # privilege separation directory
    sdir = workdir / "sshd"
    sdir.mkdir(parents=True, exist_ok=True)
    key = sdir / "ssh_host_ed25519_key"
    if not key.exists():
        subprocess.run(
            [keygen, "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True, capture_output=True
        )
    conf = sdir / "sshd_config"
    conf.write_text(
        f"""# Written by qoelab for one RD trial; lives only in the server namespace.
Port {port}
ListenAddress {ip}
HostKey {key}
PidFile {sdir / "sshd.pid"}
PasswordAuthentication yes
KbdInteractiveAuthentication no
PubkeyAuthentication no
UsePAM yes
PermitRootLogin no
AllowUsers {user}
UseDNS no
X11Forwarding no
PrintMotd no
AcceptEnv LANG LC_*
Subsystem sftp /usr/lib/openssh/sftp-server
"""
        + "".join(f'SetEnv {k}="{v}"\n' for k, v in (env or {}).items())
    )
    proc = procs.spawn("sshd", [sshd, "-D", "-e", "-f", str(conf)], ns=ns)
    wait_for("sshd", lambda: "server listening on" in proc.log_tail(10).lower(), 10, proc=proc)
    return proc


SESSION_BIN_DIR = Path("/usr/local/bin")
X2GO_AGENT_OPTIONS_FILE = Path("/etc/x2go/x2goagent.options")
IRLIMIT_MAX = 10**9


def check_irlimit(irlimit: Any) -> int:
    if isinstance(irlimit, bool) or not isinstance(irlimit, int) or not 0 <= irlimit <= IRLIMIT_MAX:
        raise ParameterError(
            "settings.irlimit", f"must be an integer 0-{IRLIMIT_MAX} (kB/s), got {irlimit!r}"
        )
    return irlimit


def x2go_agent_options(irlimit: Any) -> str:
    """``X2GO_NXAGENT_OPTIONS`` for x2gostartagent: the host's defaults plus ``-irlimit``.

    With link ``adsl`` (defer level 2) nxagent keeps images put on windows in its framebuffer and
    sends them later. Its block handler schedules that at once only while its output-rate estimate
    is at most ``ImageRateLimit`` kB/s, and tests this even when no limit is set: with the default
    0 any recent traffic postpones the page until the next unrelated X request wakes the agent
    (~4 s on the kiosk desktop). A limit above any link rate makes the documented default
    ("no limit") effective; 0 keeps nxagent's stock behaviour. The variable replaces
    x2gostartagent's default options, hence those are kept.
    """
    irlimit = check_irlimit(irlimit)
    defaults = "-nolisten tcp"
    if X2GO_AGENT_OPTIONS_FILE.exists():
        script = (
            f'source {X2GO_AGENT_OPTIONS_FILE} >/dev/null 2>&1; printf %s "$X2GO_NXAGENT_DEFAULT_OPTIONS"'
        )
        res = subprocess.run(["bash", "-c", script], capture_output=True, text=True, check=False, timeout=10)
        if res.returncode == 0 and res.stdout.strip():
            defaults = res.stdout.strip()
    return f"{defaults} -irlimit {irlimit}" if irlimit else defaults


def x2go_session_command(url: str, prefix: str) -> str:
    """A per-trial program in the server's PATH that starts the kiosk browser; returns its name.

    python-x2go only runs a command whose program name ``which`` finds on the server, and it
    mangles commands containing '/' (it derives the session type from the basename), so the URL
    and the profile path cannot be arguments: they live in this script. Removed at cleanup.
    """
    name = f"qoelab-rd-{prefix}"
    argv = chromium_argv(url, f"/tmp/{prefix}-x2go-chromium")
    path = SESSION_BIN_DIR / name
    path.write_text(
        "#!/bin/sh\n# qoelab RD trial (X2Go session): kiosk browser\nexec " + " ".join(argv) + "\n"
    )
    path.chmod(0o755)
    return name


def start_server_side(
    procs: ProcSet,
    protocol: str,
    ns: str,
    ip: str,
    pages_dir: Path,
    first_page: str,
    workdir: Path,
    settings: dict[str, Any],
    prefix: str,
    browser_timeout: float = 45,
) -> ServerSide:
    _http, http_port = serve_pages(procs, ns, ip, pages_dir)
    url = f"http://{ip}:{http_port}/{first_page}"
    if protocol == "vnc":
        display, port = start_vnc_server(procs, ns, ip, settings)
    elif protocol == "spice":
        display, port = start_spice_server(procs, ns, ip, settings, workdir)
    elif protocol == "x2go":
        port = _port("settings.ssh_port", settings["ssh_port"])
        user, password = ensure_rd_user()
        agent_options = x2go_agent_options(settings.get("irlimit", SERVER_DEFAULTS["x2go"]["irlimit"]))
        start_sshd(procs, ns, ip, port, workdir, user, env={"X2GO_NXAGENT_OPTIONS": agent_options})
        side = ServerSide(protocol, ns, ip, port, url, user=user, password=password)
        side.session_script = x2go_session_command(url, prefix)
        return side
    else:
        raise ParameterError("protocol", f"must be one of {', '.join(PROTOCOLS)}, got {protocol!r}")
    profile = workdir / f"chromium-profile-{display.number}"
    shutil.rmtree(profile, ignore_errors=True)  # a fresh profile: no session restore, no lock
    browser = procs.spawn("chromium", chromium_argv(url, str(profile)), ns=ns, env={"DISPLAY": display.name})
    _wait_for_page(display, browser_timeout, browser, workdir / "logs" / "server-screen.png")
    return ServerSide(protocol, ns, ip, port, url, display=display, browser=browser)


def find_x2go_agent_display(ns_inode: int | None) -> Display | None:
    """The X2Go agent's display (``x2goagent ... :NN``) in the server namespace, with its cookie."""
    import psutil

    for proc in psutil.process_iter(["name", "cmdline", "username"]):
        if proc.info["name"] not in ("x2goagent", "nxagent"):
            continue
        try:
            if ns_inode is not None and os.stat(f"/proc/{proc.pid}/ns/net").st_ino != ns_inode:
                continue
        except OSError:
            continue
        for arg in proc.info["cmdline"] or []:
            if re.fullmatch(r":\d+", arg):
                home = pwd.getpwnam(proc.info["username"]).pw_dir
                return Display(int(arg[1:]), SCREEN_W, SCREEN_H, None, xauthority=f"{home}/.Xauthority")
    return None
