"""The live_session job: a real VNC session behind websockify on the client side of an emulated link.

The control channel here is the test itself (the worker's is the backend): on the session report it
connects like noVNC does (WebSocket handshake with the ``binary`` subprotocol, then the RFB version
exchange in binary frames), records what it saw, and releases the session. Teardown must leave no
process, socket or namespace of the prefix.
"""

from __future__ import annotations

import base64
import os
import secrets
import shutil
import socket
import struct
import time
from pathlib import Path
from urllib.parse import urlsplit

import psutil
import pytest

from qoelab.jobs.base import TrialContext
from qoelab.jobs.live_session import LiveSessionParams, serve
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


def rfb_over_websocket(url: str) -> tuple[bytes, bytes, float]:
    """Handshake like noVNC, read the server's RFB version, answer it, read the security types."""
    u = urlsplit(url)
    t0 = time.monotonic()
    sock = socket.create_connection((u.hostname, u.port), timeout=15)
    try:
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
        version = _read_frame(sock)
        rtt = time.monotonic() - t0
        sock.sendall(_frame(b"RFB 003.008\n"))
        security = _read_frame(sock)
        return version, security, rtt
    finally:
        sock.close()


def test_it_refuses_x2go_and_names_the_field() -> None:
    with pytest.raises(ParamsInvalid) as err:
        validate_params(LiveSessionParams, {"protocol": "x2go", "rate": "10mbit"})
    assert "protocol" in str(err.value)


def test_a_novnc_style_client_reaches_the_vnc_server_across_the_emulated_link(tmp_path: Path) -> None:
    reason = _why_not()
    if reason:
        pytest.skip(reason)
    prefix = "lvt" + secrets.token_hex(3)
    params = validate_params(
        LiveSessionParams, {"protocol": "vnc", "rate": "10mbit", "delay": "100ms", "verify_duration": 0}
    )
    ctx = TrialContext(trial_id="t1", workdir=tmp_path, prefix=prefix, deadline=time.monotonic() + 300)
    seen: dict = {}

    def channel(body: dict) -> dict:
        if "session" in body:
            seen["session"] = body["session"]
            seen["rfb"] = rfb_over_websocket(body["session"]["websocket_url"])
            seen["during"] = sorted(n for n in os.listdir("/run/netns") if n.startswith(prefix))
            return {"release": False}
        seen.setdefault("reports", []).append(body)
        return {"release": True, "reason": "test done"}

    result = serve(params, ctx, channel)

    session = seen["session"]
    assert session["client"] == "novnc"
    assert session["websocket_url"].startswith("ws://")
    version, security, rtt = seen["rfb"]
    assert version.startswith(b"RFB 003."), version
    assert security[0] >= 1 and 1 in security[1:], f"x11vnc -nopw offers security type None: {security!r}"
    # 100 ms one-way delay: TCP connect over the link plus the server's first bytes need >= 1 RTT (200 ms).
    assert rtt >= 0.2, f"the link is not between proxy and server: version arrived after {rtt * 1e3:.0f} ms"
    assert len(seen["during"]) == 2
    assert seen["reports"][0]["alive"] is True
    assert result.provenance["end_reason"] == "test done"
    assert result.summary["screens"] == 0
    # Teardown: no namespace, no process, no socket of the prefix.
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
