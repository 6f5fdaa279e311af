"""Packet capture on the client side of the link, and a live watch of server -> client payload.

:class:`Capture` runs dumpcap in the client namespace on the client interface and only returns
from ``start()`` once dumpcap reports it is capturing. :class:`PayloadWatch` is the driver's live
"is the update still flowing?" signal: an AF_PACKET socket opened inside the client namespace
that counts TCP/UDP payload from the server (dpkt parses the frames).
"""

from __future__ import annotations

import contextlib
import signal
import socket
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from qoelab.procs import Proc, ProcSet, SetupError, require_tool, wait_for

ETH_P_ALL = 0x0003


class Capture:
    def __init__(
        self, procs: ProcSet, ns: str, iface: str, pcap_path: Path, snaplen: int | None = None
    ) -> None:
        self.procs, self.ns, self.iface, self.pcap_path = procs, ns, iface, Path(pcap_path)
        self.snaplen = snaplen  # bytes kept per packet (None: whole packets)
        self.proc: Proc | None = None

    def start(self, timeout: float = 15) -> None:
        dumpcap = require_tool("dumpcap", "tshark")
        self.pcap_path.parent.mkdir(parents=True, exist_ok=True)
        # -P: classic pcap (any analysis tool reads it); -B: 4 MiB kernel buffer for bursts.
        argv = [dumpcap, "-i", self.iface, "-P", "-B", "4", "-w", str(self.pcap_path)]
        if self.snaplen:
            argv[1:1] = ["-s", str(self.snaplen)]
        self.proc = self.procs.spawn("dumpcap", argv, ns=self.ns)
        proc = self.proc
        wait_for(
            f"capture on {self.iface} in {self.ns}",
            lambda: "Capturing on" in proc.log_tail(20) and self.pcap_path.exists(),
            timeout,
            proc=proc,
        )

    def stop(self) -> Path:
        if self.proc is not None:
            # SIGINT lets dumpcap flush and close the file; Proc.stop escalates if it hangs.
            self.proc.stop(timeout=5, sig=signal.SIGINT)
            self.procs.procs = [p for p in self.procs.procs if p is not self.proc]
            self.proc = None
        return self.pcap_path


def _open_packet_socket(ns: str, iface: str) -> socket.socket:
    from pyroute2 import netns

    # setns() switches only this thread; the socket stays bound to the namespace it was made in.
    netns.pushns(ns)
    try:
        sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
        sock.bind((iface, 0))
    finally:
        netns.popns()
    sock.settimeout(0.1)
    return sock


@dataclass
class PayloadWatch:
    """Counts payload-bearing packets on the client interface, by direction."""

    ns: str
    iface: str
    server_ip: str
    last_down: float = 0.0  # epoch of the last server -> client payload packet
    down_bytes: int = 0
    down_packets: int = 0
    last_up: float = 0.0
    up_packets: int = 0
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None
    _sock: socket.socket | None = None

    def start(self) -> PayloadWatch:
        try:
            self._sock = _open_packet_socket(self.ns, self.iface)
        except OSError as err:
            raise SetupError(f"cannot watch packets on {self.iface} in {self.ns}: {err}") from err
        self._thread = threading.Thread(target=self._loop, name=f"payloadwatch-{self.iface}", daemon=True)
        self._thread.start()
        return self

    def _loop(self) -> None:
        import dpkt

        server = socket.inet_aton(self.server_ip)
        assert self._sock is not None
        while not self._stop.is_set():
            try:
                frame, addr = self._sock.recvfrom(65535)
            except TimeoutError:
                continue
            except OSError:
                return
            now = time.time()
            try:
                # hatype 1 = Ethernet (veth, tap); otherwise a TUN device hands us bare IP.
                ip = dpkt.ethernet.Ethernet(frame).data if addr[3] == 1 else dpkt.ip.IP(frame)
                if not isinstance(ip, dpkt.ip.IP):
                    continue
                l4 = ip.data
                if isinstance(l4, dpkt.tcp.TCP):
                    payload = len(ip) - ip.hl * 4 - l4.off * 4
                elif isinstance(l4, dpkt.udp.UDP):
                    payload = len(ip) - ip.hl * 4 - 8
                else:
                    continue
            except (dpkt.UnpackError, ValueError):
                continue
            if payload <= 0:
                continue
            if ip.src == server:
                self.last_down = now
                self.down_bytes += payload
                self.down_packets += 1
            elif ip.dst == server:
                self.last_up = now
                self.up_packets += 1

    def quiet_for(self, seconds: float) -> bool:
        return time.time() - max(self.last_down, self.last_up) >= seconds

    def wait_quiet(self, seconds: float, timeout: float) -> bool:
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.quiet_for(seconds):
                return True
            time.sleep(0.02)
        return False

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2)
        if self._sock is not None:
            with contextlib.suppress(OSError):
                self._sock.close()
