"""The QMP client (RunningGuest.qmp): a real QEMU monitor, and a stale reply left by a given-up connection."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import threading
import time
from pathlib import Path

import pytest

from qoelab.vm import guest as vmguest


def guest_with_socket(sock: Path, tmp_path: Path) -> vmguest.RunningGuest:
    return vmguest.RunningGuest(
        name="qvt-0a1b2c3d", pid=1, accel="tcg", accel_reason="", overlay=tmp_path / "o.qcow2",
        console_log=tmp_path / "c.log", image=None, listen_ip="127.0.0.1", vnc_port=None, spice_port=None,
        ns=None, qmp_socket=sock,
    )  # type: ignore[arg-type]  # fmt: skip


def wait_for(path: Path, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        assert time.monotonic() < deadline, f"{path} did not appear within {timeout:.0f} s"
        time.sleep(0.05)


def test_a_real_qemu_monitor_answers_status_and_continue(tmp_path: Path) -> None:
    qemu = shutil.which("qemu-system-x86_64")
    if qemu is None:
        pytest.skip("qemu-system-x86_64 is not installed on this host")
    sock = tmp_path / "qmp.sock"
    proc = subprocess.Popen(
        [qemu, "-machine", "none", "-nodefaults", "-display", "none", "-S",
         "-qmp", f"unix:{sock},server=on,wait=off"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )  # fmt: skip
    try:
        wait_for(sock)
        guest = guest_with_socket(sock, tmp_path)
        assert guest.qmp("query-status")["status"] == "prelaunch"
        guest.qmp("cont")
        assert guest.qmp("query-status")["status"] == "running"
        with pytest.raises(vmguest.GuestError, match="QMP no-such-command failed"):
            guest.qmp("no-such-command")
    finally:
        proc.kill()
        proc.wait(timeout=10)


def test_a_stale_reply_left_by_an_earlier_connection_is_not_taken_for_the_answer(tmp_path: Path) -> None:
    """A scripted monitor stands in for QEMU: the race (QEMU busy loading a saved state past a client's
    timeout, then writing that client's reply to the next connection) cannot be provoked on demand."""
    sock = tmp_path / "qmp.sock"
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(sock))
    server.listen(1)

    def monitor() -> None:
        conn, _ = server.accept()
        with conn, conn.makefile("rwb") as f:

            def say(obj: dict) -> None:
                f.write(json.dumps(obj).encode() + b"\n")
                f.flush()

            say({"QMP": {"version": {}, "capabilities": []}})
            say({"return": {}})  # the earlier connection's qmp_capabilities reply, written late
            for line in f:
                request = json.loads(line)
                say({"event": "RESUME", "timestamp": {}})
                if request["execute"] == "qmp_capabilities":
                    say({"return": {}, "id": request["id"]})
                else:
                    say({"return": {"status": "paused", "running": False}, "id": request["id"]})
                    return

    thread = threading.Thread(target=monitor, daemon=True)
    thread.start()
    try:
        assert guest_with_socket(sock, tmp_path).qmp("query-status") == {"status": "paused", "running": False}
    finally:
        thread.join(timeout=10)
        server.close()
