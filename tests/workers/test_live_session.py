"""The live_session job: a real VNC session behind websockify on the client side of an emulated link.

The control channel here is the test itself (the worker's is the backend): on the session report it
connects like noVNC does (WebSocket handshake with the ``binary`` subprotocol, then the RFB version
exchange in binary frames), records what it saw, and releases the session. Teardown must leave no
process, socket or namespace of the prefix.
"""

from __future__ import annotations

import base64
import os
import re
import secrets
import shutil
import socket
import struct
import subprocess
import time
from pathlib import Path
from urllib.parse import urlsplit

import psutil
import pytest

from qoelab.jobs.live_session import LiveSessionParams, serve
from qoelab.jobtype import TrialContext
from qoelab.params import ParamsInvalid, validate_params


def _why_not() -> str | None:
    if os.geteuid() != 0:
        return "needs root to create network namespaces and start X servers"
    for tool, pkg in (("Xvfb", "xvfb"), ("chromium", "chromium"), ("x11vnc", "x11vnc"), ("socat", "socat")):
        if shutil.which(tool) is None:
            return f"{tool} is not installed (Debian package {pkg})"
    return None


def _frame(payload: bytes) -> bytes:
    """A masked binary frame (clients must mask), payload < 126 bytes."""
    mask = secrets.token_bytes(4)
    return bytes([0x82, 0x80 | len(payload)]) + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(payload))


def _read_frame(sock: socket.socket) -> bytes:
    def exactly(n: int) -> bytes:
        buf = b""
        while len(buf) < n:
            chunk = sock.recv(n - len(buf))
            if not chunk:
                raise ConnectionError("websocket closed")
            buf += chunk
        return buf

    b0, b1 = exactly(2)
    n = b1 & 0x7F
    if n == 126:
        n = struct.unpack(">H", exactly(2))[0]
    elif n == 127:
        n = struct.unpack(">Q", exactly(8))[0]
    assert b0 & 0x0F == 0x2, f"expected a binary frame, got opcode {b0 & 0x0F}"
    return exactly(n)


def ws_connect(url: str) -> socket.socket:
    """A WebSocket client connection with the ``binary`` subprotocol (what noVNC and spice-html5 ask)."""
    u = urlsplit(url)
    sock = socket.create_connection((u.hostname, u.port), timeout=15)
    key = base64.b64encode(secrets.token_bytes(16)).decode()
    sock.sendall(
        (
            f"GET {u.path or '/'} HTTP/1.1\r\nHost: {u.hostname}:{u.port}\r\nUpgrade: websocket\r\n"
            f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n"
            "Sec-WebSocket-Protocol: binary\r\nOrigin: http://127.0.0.1\r\n\r\n"
        ).encode()
    )
    head = b""
    while b"\r\n\r\n" not in head:
        chunk = sock.recv(1)
        if not chunk:
            raise ConnectionError(f"no websocket handshake answer: {head!r}")
        head += chunk
    assert head.startswith(b"HTTP/1.1 101"), head
    return sock


def assert_torn_down(prefix: str) -> None:
    """No namespace, process or socket of the prefix is left."""
    assert not [n for n in os.listdir("/run/netns") if n.startswith(prefix)]
    marked = []
    for proc in psutil.process_iter(["pid"]):
        try:
            if proc.environ().get("QOELAB_RD_PREFIX") == prefix:
                marked.append(proc.pid)
        except (psutil.Error, OSError):
            continue
    assert not marked, f"processes of {prefix} left: {marked}"
    assert not Path(f"/tmp/{prefix}-live.sock").exists()


def serve_live(protocol: str, tag: str, tmp_path: Path, on_session) -> tuple[str, dict, object]:
    """Serve one live session of ``protocol`` over a 10 Mbit/s, 100 ms link; returns (prefix, seen, result).

    ``on_session(session, prefix, seen)`` runs once while the session is up (the evaluator's
    moment); the session is then released, and ``seen`` holds the session and the reports.
    """
    prefix = tag + secrets.token_hex(3)
    params = validate_params(
        LiveSessionParams, {"protocol": protocol, "rate": "10mbit", "delay": "100ms", "verify_duration": 0}
    )
    ctx = TrialContext(trial_id="t1", workdir=tmp_path, prefix=prefix, deadline=time.monotonic() + 300)
    seen: dict = {}

    def channel(body: dict) -> dict:
        if "session" in body:
            seen["session"] = body["session"]
            on_session(body["session"], prefix, seen)
            return {"release": False}
        seen.setdefault("reports", []).append(body)
        return {"release": True, "reason": "test done"}

    return prefix, seen, serve(params, ctx, channel)


def rfb_over_websocket(url: str) -> tuple[bytes, bytes, float, float]:
    """Handshake like noVNC, read the server's RFB version, answer it, read the security types."""
    t0 = time.monotonic()
    sock = ws_connect(url)
    try:
        version = _read_frame(sock)
        rtt = time.monotonic() - t0
        t1 = time.monotonic()
        sock.sendall(_frame(b"RFB 003.008\n"))
        security = _read_frame(sock)
        # One request/answer on the open connection: the path's round trip, no connection setup.
        return version, security, rtt, time.monotonic() - t1
    finally:
        sock.close()


def test_it_refuses_an_unknown_protocol_and_names_the_field() -> None:
    with pytest.raises(ParamsInvalid) as err:
        validate_params(LiveSessionParams, {"protocol": "rdp", "rate": "10mbit"})
    assert "protocol" in str(err.value)


def test_it_takes_x2go_with_the_thesis_client_settings() -> None:
    params = validate_params(LiveSessionParams, {"protocol": "x2go", "rate": "10mbit"})
    assert params.settings() == {"link": "adsl", "pack": "16m-jpeg-9"}
    with pytest.raises(ParamsInvalid) as err:
        validate_params(LiveSessionParams, {"protocol": "x2go", "rate": "10mbit", "x2go_link": "fast"})
    assert "x2go_link" in str(err.value)


def test_a_novnc_style_client_reaches_the_vnc_server_across_the_emulated_link(tmp_path: Path) -> None:
    reason = _why_not()
    if reason:
        pytest.skip(reason)

    def on_session(session: dict, prefix: str, seen: dict) -> None:
        seen["rfb"] = rfb_over_websocket(session["websocket_url"])
        seen["during"] = sorted(n for n in os.listdir("/run/netns") if n.startswith(prefix))

    prefix, seen, result = serve_live("vnc", "lvt", tmp_path, on_session)

    session = seen["session"]
    assert session["client"] == "novnc"
    assert session["websocket_url"].startswith("ws://")
    version, security, rtt, _ = seen["rfb"]
    assert version.startswith(b"RFB 003."), version
    assert security[0] >= 1 and 1 in security[1:], f"x11vnc -nopw offers security type None: {security!r}"
    # 100 ms one-way delay: TCP connect over the link plus the server's first bytes need >= 1 RTT (200 ms).
    assert rtt >= 0.2, f"the link is not between proxy and server: version arrived after {rtt * 1e3:.0f} ms"
    assert len(seen["during"]) == 2
    assert seen["reports"][0]["alive"] is True
    assert result.provenance["end_reason"] == "test done"
    assert result.summary["screens"] == 0
    assert_torn_down(prefix)


def _prefixed(name: str, prefix: str) -> list[psutil.Process]:
    found = []
    for proc in psutil.process_iter(["name"]):
        try:
            if proc.info["name"] == name and proc.environ().get("QOELAB_RD_PREFIX") == prefix:
                found.append(proc)
        except (psutil.Error, OSError):
            continue
    return found


def _window(wid: str, env: dict) -> tuple[str, str]:
    """(name, WxH) of an X window."""

    def xdotool(*args: str) -> str:
        return subprocess.run(["xdotool", *args], env=env, capture_output=True, text=True).stdout

    geometry = xdotool("getwindowgeometry", wid)
    return xdotool("getwindowname", wid).strip(), geometry.split("Geometry:")[-1].strip()


def test_x2go_is_shown_through_a_local_view_of_the_native_client_across_the_link(tmp_path: Path) -> None:
    reason = _why_not()
    for tool, pkg in (("pyhoca-cli", "pyhoca-cli"), ("nxproxy", "nxproxy"), ("sshd", "openssh-server"),
                      ("x2goruncommand", "x2goserver"), ("xdotool", "xdotool")):  # fmt: skip
        if reason is None and shutil.which(tool) is None:
            reason = f"{tool} is not installed (Debian package {pkg})"
    if reason:
        pytest.skip(reason)

    def on_session(session: dict, prefix: str, seen: dict) -> None:
        seen["rfb"] = rfb_over_websocket(session["websocket_url"])
        # The X2Go client's window on the client's Xvfb (the display x11vnc shares).
        xvfb = _prefixed("Xvfb", prefix)
        assert len(xvfb) == 1, xvfb
        display = next(a for a in xvfb[0].cmdline() if a.startswith(":"))
        env = {**os.environ, "DISPLAY": display}
        found = subprocess.run(["xdotool", "search", "--onlyvisible", "--name", "."],
                               env=env, capture_output=True, text=True).stdout.split()  # fmt: skip
        seen["windows"] = [_window(w, env) for w in found]
        # The X2Go client's SSH connection runs in the client namespace, i.e. across the link.
        client_ns = next(n for n in os.listdir("/run/netns") if n.startswith(prefix) and n.endswith("c"))
        ss = ["ip", "netns", "exec", client_ns, "ss", "-tnH", "state", "established"]
        seen["ssh"] = subprocess.run(ss, capture_output=True, text=True).stdout
        seen["viewer"] = [p.pid for p in _prefixed("pyhoca-cli", prefix) + _prefixed("nxproxy", prefix)]

    t0 = time.monotonic()
    prefix, seen, result = serve_live("x2go", "lvx", tmp_path, on_session)
    took = time.monotonic() - t0

    session = seen["session"]
    assert session["client"] == "x2go-view" and session["local_view"] is True
    assert "local view" in session["note"] and "between that client and the server" in session["note"]
    version, security, _, round_trip = seen["rfb"]
    assert version.startswith(b"RFB 003."), version
    assert 1 in security[1:], f"the local x11vnc offers security type None: {security!r}"
    # The view is local: the 100 ms link (200 ms RTT) is NOT on its path.
    assert round_trip < 0.15, f"the view crossed the emulated link: answer after {round_trip * 1e3:.0f} ms"
    assert re.search(r":22\s*$", seen["ssh"], re.M), f"no SSH connection across the link: {seen['ssh']!r}"
    assert seen["viewer"], "no X2Go client process (pyhoca-cli / nxproxy) of the session"
    x2go_windows = [size for name, size in seen["windows"] if name.startswith("X2GO-")]
    assert x2go_windows, f"no X2Go client window on the client display: {seen['windows']}"
    # The evaluator sees the whole 800x600 session, 1:1 (not a cropped or scaled window).
    assert "800x600" in x2go_windows, f"X2Go window sizes {seen['windows']}"
    print(
        f"x2go live: {took:.1f} s, local view round trip {round_trip * 1e3:.1f} ms, windows {seen['windows']}"
    )
    assert seen["reports"][0]["alive"] is True
    assert result.provenance["local_view"] is True
    assert result.provenance["view_note"] == session["note"]
    assert result.summary["local_view"] == 1.0
    assert result.provenance["settings"]["link"] == "adsl"
    assert result.provenance["settings"]["pack"] == "16m-jpeg-9"
    assert_torn_down(prefix)


def spice_link_over_websocket(url: str) -> tuple[bytes, float]:
    """Open a SPICE main channel like spice-html5 (link header "REDQ" 2.2 + SpiceLinkMess); read the reply."""
    sock = ws_connect(url)
    try:
        # SpiceLinkMess: connection_id 0, channel type 1 (main), channel id 0, no caps, caps at offset 18.
        mess = struct.pack("<IBBIII", 0, 1, 0, 0, 0, 18)
        t0 = time.monotonic()
        sock.sendall(_frame(b"REDQ" + struct.pack("<III", 2, 2, len(mess)) + mess))
        reply = b""
        while len(reply) < 16:
            reply += _read_frame(sock)
        return reply, time.monotonic() - t0
    finally:
        sock.close()


def test_a_spice_html5_style_client_reaches_the_spice_server_across_the_emulated_link(tmp_path: Path) -> None:
    reason = _why_not()
    if reason is None and not Path("/usr/lib/xorg/modules/drivers/spiceqxl_drv.so").exists():
        reason = "the spiceqxl Xorg driver is not installed (Debian package xserver-xspice)"
    if reason:
        pytest.skip(reason)

    def on_session(session: dict, prefix: str, seen: dict) -> None:
        seen["link"] = spice_link_over_websocket(session["websocket_url"])

    prefix, seen, result = serve_live("spice", "lvs", tmp_path, on_session)

    session = seen["session"]
    assert session["client"] == "spice-html5" and session["local_view"] is False
    reply, round_trip = seen["link"]
    magic, major, _minor, size = struct.unpack("<4sIII", reply[:16])
    assert magic == b"REDQ", f"not a SPICE link reply: {reply[:16]!r}"
    assert major == 2 and size > 0, reply[:16]
    # The link message crossed the 100 ms link both ways (the TCP connect was already done by then).
    assert round_trip >= 0.2, (
        f"the link is not between proxy and server: reply after {round_trip * 1e3:.0f} ms"
    )
    print(f"spice live: link reply after {round_trip * 1e3:.0f} ms")
    assert seen["reports"][0]["alive"] is True
    assert result.provenance["client"] == "spice-html5" and result.provenance["local_view"] is False
    assert_torn_down(prefix)
