"""Ground-truth accuracy of the slow-motion analysis (``qoelab.rd.analysis``) on real captures.

Two network namespaces joined by a veth pair (names ``qlra<tag>c`` / ``qlra<tag>s``, deleted on exit)
play remote-desktop client and server. The server answers each 16-byte "input" after a set delay with
a set number of bytes, in several writes, optionally over two TCP connections (like SPICE's
channels); the client records when its input left and when the last byte arrived. dumpcap captures
on the client's side of the link. The analysis must give T within 1 ms of the client's timing and
X equal to the bytes sent.

    sudo .venv/bin/python benchmarks/rd_analysis/run.py                 # all cases, 10 updates each
    sudo .venv/bin/python benchmarks/rd_analysis/run.py --write-docs    # also update docs/rd-analysis.md

Needs root (namespaces), dumpcap (Debian package ``tshark``) and the tbf qdisc for the shaped cases.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import selectors
import shutil
import signal
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PORT = 5900
INPUT = struct.Struct("!4sIQ")  # magic, update index, padding: 16 bytes like a pointer event + click
MAGIC = b"QLRA"
T_TOLERANCE_S = 1e-3


@dataclass(frozen=True)
class Case:
    name: str
    delay_s: float  # server think time between input and first byte
    nbytes: int
    writes: int = 4
    write_gap_s: float = 0.002  # pause between writes: the response arrives in bursts
    conns: int = 1  # >1: writes go round-robin over the connections, input on the first
    rate: str | None = None  # tbf on the server→client direction, e.g. "10mbit"
    queue_ms: int = 500  # tbf latency: a short queue drops packets, so TCP retransmits
    quiet_s: float = 0.2  # the analysis' quiet period; must exceed pauses inside an update (RTO)
    ipv6: bool = False
    iface_any: bool = False  # capture on "any" (cooked link type) instead of the veth
    pcap_format: str = "pcapng"
    keepalive_conn: bool = False  # an extra idle connection sending TCP keep-alive probes


CASES = [
    Case("1 conn, 20 kB, 20 ms", 0.020, 20_000, writes=4),
    Case("1 conn, 1 MB, 50 ms", 0.050, 1_000_000, writes=16),
    Case("2 conns, 300 kB, 30 ms", 0.030, 300_000, writes=6, conns=2),
    Case("4 conns, 64 kB, 5 ms, keep-alives", 0.005, 64_000, writes=8, conns=4, keepalive_conn=True),
    Case("10 Mbit/s tbf, 250 kB, 10 ms", 0.010, 250_000, writes=5, rate="10mbit"),
    Case("2 Mbit/s tbf, 60 kB, 2 conns", 0.040, 60_000, writes=3, conns=2, rate="2mbit"),
    Case("2 Mbit/s tbf, 60 ms queue (drops), 100 kB", 0.010, 100_000, writes=4, rate="2mbit", queue_ms=60,
         quiet_s=1.0),
    Case("IPv6, capture on any (SLL2), pcap", 0.015, 100_000, writes=4, ipv6=True, iface_any=True,
         pcap_format="pcap"),
]  # fmt: skip


# --------------------------------------------------------------------------------------------------
# The two roles, run inside the namespaces as ``run.py _server`` / ``run.py _client``


def _server(args: argparse.Namespace) -> int:
    case = Case(**json.loads(args.case))
    family = socket.AF_INET6 if case.ipv6 else socket.AF_INET
    lsock = socket.socket(family, socket.SOCK_STREAM)
    lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    lsock.bind(("::" if case.ipv6 else "0.0.0.0", PORT))
    lsock.listen(8)
    print("ready", flush=True)
    conns = [lsock.accept()[0] for _ in range(case.conns)]
    for c in conns:
        c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    if case.keepalive_conn:
        lsock.accept()  # held open; the client's probes need no answer from us
    inputs = conns[0]
    chunk = [
        case.nbytes // case.writes + (1 if i < case.nbytes % case.writes else 0) for i in range(case.writes)
    ]
    while True:
        msg = b""
        while len(msg) < INPUT.size:
            part = inputs.recv(INPUT.size - len(msg))
            if not part:
                return 0
            msg += part
        magic, _index, _ = INPUT.unpack(msg)
        if magic != MAGIC:
            print(f"bad input {msg!r}", file=sys.stderr)
            return 1
        time.sleep(case.delay_s)
        for i, n in enumerate(chunk):
            if i:
                time.sleep(case.write_gap_s)
            conns[i % case.conns].sendall(b"\x5a" * n)


SO_TIMESTAMPNS, SO_TIMESTAMPING = 35, 37  # linux/asm-generic/socket.h
# Software TX timestamps when the segment reaches the device, reported as a timestamp only.
_TX_FLAGS = (1 << 1) | (1 << 4) | (1 << 11)  # TX_SOFTWARE | SOFTWARE | OPT_TSONLY


def _cmsg_time(ancdata: list) -> float | None:
    for level, kind, data in ancdata:
        if level == socket.SOL_SOCKET and kind in (SO_TIMESTAMPNS, SO_TIMESTAMPING) and len(data) >= 16:
            sec, nsec = struct.unpack_from("qq", data)
            if sec:
                return sec + nsec * 1e-9
    return None


def _tx_time(sock: socket.socket, after: float) -> float | None:
    """The kernel's transmit timestamp of the last send, from the socket's error queue."""
    found, deadline = None, time.monotonic() + 0.2
    while time.monotonic() < deadline:
        try:
            _, anc, _, _ = sock.recvmsg(1, 1024, socket.MSG_ERRQUEUE | socket.MSG_DONTWAIT)
        except BlockingIOError:
            if found is not None:
                return found
            time.sleep(0.0005)
            continue
        t = _cmsg_time(anc)
        if t is not None and t >= after - 1:
            found = t if found is None else max(found, t)
    return found


def _client(args: argparse.Namespace) -> int:
    """Make the updates; record two references for each: the application's clock (input sent,
    last byte read) and the kernel's socket timestamps (input handed to the device, last segment
    received), which leave out the client's scheduling latency."""
    case = Case(**json.loads(args.case))
    family = socket.AF_INET6 if case.ipv6 else socket.AF_INET
    # Real-time priority: the client's clock is the reference, so it must not wait for a CPU
    # behind other work when the last byte arrives (this host has 2 busy cores).
    try:
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(10))
    except (PermissionError, OSError) as err:
        print(f"warning: no real-time priority ({err}); the reference may be late", file=sys.stderr)
    conns = []
    for _ in range(case.conns):
        s = socket.socket(family, socket.SOCK_STREAM)
        s.connect((args.server, PORT))
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        s.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
        conns.append(s)
    conns[0].setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPING, _TX_FLAGS)
    if case.keepalive_conn:
        ka = socket.socket(family, socket.SOCK_STREAM)
        ka.connect((args.server, PORT))
        ka.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
        ka.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPIDLE, 1)
        ka.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPINTVL, 1)
    sel = selectors.DefaultSelector()
    for s in conns:
        s.setblocking(False)
        sel.register(s, selectors.EVENT_READ)
    clicks, truth = [], []
    time.sleep(args.pause)
    for k in range(args.updates):
        t_click = time.time()
        conns[0].setblocking(True)
        conns[0].sendall(INPUT.pack(MAGIC, k, 0))
        t_sent = time.time()
        conns[0].setblocking(False)
        # Read the transmit timestamp now: a full error queue would make the socket look readable.
        k_sent = _tx_time(conns[0], t_click)
        got, t_last, k_last = 0, None, None
        while got < case.nbytes:
            for key, _ in sel.select(timeout=30):
                try:
                    data, anc, _, _ = key.fileobj.recvmsg(1 << 20, 1024)
                except BlockingIOError:
                    continue
                if not data:
                    raise SystemExit("server closed the connection")
                got += len(data)
                t_last = time.time()
                kt = _cmsg_time(anc)
                k_last = kt if k_last is None or (kt is not None and kt > k_last) else k_last
            if t_last is None or time.time() - t_sent > 30:
                raise SystemExit(f"update {k}: no complete response within 30 s ({got} bytes)")
        clicks.append({"index": k, "t": t_click, "page": k % 5, "ratio": 0.5})
        truth.append({"index": k, "t_sent": t_sent, "t_last": t_last, "k_sent": k_sent, "k_last": k_last,
                      "bytes": got})  # fmt: skip
        time.sleep(args.pause)  # server silent for longer than the quiet period: updates stay apart
    Path(args.out).write_text(json.dumps({"clicks": clicks, "truth": truth}))
    return 0


# --------------------------------------------------------------------------------------------------
# The harness


class NamespaceVanished(RuntimeError):
    """Another process removed our namespaces or killed our processes mid-run (a qoelab worker
    starting up cleans every ``ql*`` leftover); the case is run again."""


class HostNotCapable(RuntimeError):
    """The host cannot run the benchmark (not root, no dumpcap, no namespaces)."""


def check_host() -> None:
    if os.geteuid() != 0:
        raise HostNotCapable("needs root to create network namespaces")
    if shutil.which("dumpcap") is None:
        raise HostNotCapable("dumpcap is not installed; install the Debian package 'tshark'")
    if shutil.which("ip") is None:
        raise HostNotCapable("ip (iproute2) is not installed")


@dataclass
class Topology:
    tag: str
    ipv6: bool
    rate: str | None
    queue_ms: int = 500
    made: list[str] = field(default_factory=list)
    vanished: bool = False

    @property
    def ns_c(self) -> str:
        return f"qlra{self.tag}c"

    @property
    def ns_s(self) -> str:
        return f"qlra{self.tag}s"

    @property
    def server_addr(self) -> str:
        return "fd00:71a::2" if self.ipv6 else "10.71.0.2"

    def __enter__(self) -> Topology:
        from pyroute2 import IPRoute, NetNS, netns

        try:
            for ns in (self.ns_c, self.ns_s):
                netns.create(ns)
                self.made.append(ns)
            with IPRoute() as ipr:
                ipr.link(
                    "add", ifname=self.ns_c, kind="veth", peer={"ifname": self.ns_s, "net_ns_fd": self.ns_s}
                )
                ipr.link("set", index=ipr.link_lookup(ifname=self.ns_c)[0], net_ns_fd=self.ns_c)
            for ns, host in ((self.ns_c, 1), (self.ns_s, 2)):
                with NetNS(ns) as n:
                    i = n.link_lookup(ifname=ns)[0]
                    if self.ipv6:  # no duplicate address detection: the address works at once
                        n.addr("add", index=i, address=f"fd00:71a::{host}", prefixlen=64, flags=0x02)
                    else:
                        n.addr("add", index=i, address=f"10.71.0.{host}", prefixlen=24)
                    n.link("set", index=i, state="up")
                    n.link("set", index=n.link_lookup(ifname="lo")[0], state="up")
                    if self.rate and ns == self.ns_s:
                        n.tc(
                            "add",
                            "tbf",
                            index=i,
                            handle="1:",
                            rate=self.rate,
                            burst=16000,
                            latency=f"{self.queue_ms}ms",
                        )
        except Exception:
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        from pyroute2 import netns

        for ns in reversed(self.made):  # removing a namespace removes its veth end, and so the pair
            if ns not in netns.listnetns():
                self.vanished = True
                continue
            try:
                netns.remove(ns)
            except OSError as err:
                print(f"warning: could not remove namespace {ns}: {err}", file=sys.stderr)
        self.made.clear()


def _in_ns(ns: str, *cmd: str) -> list[str]:
    return ["ip", "netns", "exec", ns, *cmd]


def _stop(proc: subprocess.Popen, sig: int = signal.SIGTERM, wait_s: float = 5) -> None:
    if proc.poll() is None:
        proc.send_signal(sig)
        try:
            proc.wait(wait_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _wait_for_line(proc: subprocess.Popen, stream, needle: str, timeout_s: float) -> None:
    sel = selectors.DefaultSelector()
    sel.register(stream, selectors.EVENT_READ)
    deadline, seen = time.monotonic() + timeout_s, ""
    while time.monotonic() < deadline:
        if sel.select(timeout=0.1):
            line = stream.readline()
            if not line:
                break
            seen += line
            if needle in line:
                return
    raise RuntimeError(
        f"{proc.args[-1] if proc.args else 'process'} did not report {needle!r}: {seen[-500:]}"
    )


def capture_case(case: Case, updates: int, workdir: Path) -> tuple[Path, dict]:
    """Run one case in fresh namespaces; return the capture and the client's record."""
    pause_s = case.quiet_s + 0.1
    check_host()
    ext = "pcap" if case.pcap_format == "pcap" else "pcapng"
    pcap = workdir / f"capture.{ext}"
    record = workdir / "record.json"
    topo = Topology(secrets.token_hex(2), case.ipv6, case.rate, case.queue_ms)
    try:
        _run_in(topo, case, updates, pcap, record, pause_s)
    except Exception:
        if topo.vanished:
            raise NamespaceVanished(
                f"namespaces {topo.ns_c}/{topo.ns_s} were removed by another process"
            ) from None
        raise
    if topo.vanished:
        raise NamespaceVanished(f"namespaces {topo.ns_c}/{topo.ns_s} were removed by another process")
    return pcap, json.loads(record.read_text())


def _run_in(topo: Topology, case: Case, updates: int, pcap: Path, record: Path, pause_s: float) -> None:
    spec = json.dumps(asdict(case))
    me = [sys.executable, str(Path(__file__).resolve())]
    procs: list[subprocess.Popen] = []
    with topo:
        try:
            iface = "any" if case.iface_any else topo.ns_c
            fmt = ["-P"] if case.pcap_format == "pcap" else []
            if case.iface_any:
                fmt += ["-y", "LINUX_SLL2"]
            # dumpcap writes the file as root into a directory it may not own: give it a fresh file.
            pcap.touch()
            dumpcap = subprocess.Popen(
                _in_ns(topo.ns_c, "dumpcap", "-i", iface, "-w", str(pcap), "-B", "32", *fmt),
                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
            )  # fmt: skip
            procs.append(dumpcap)
            _wait_for_line(dumpcap, dumpcap.stderr, "Capturing on", 15)
            server = subprocess.Popen(
                _in_ns(topo.ns_s, *me, "_server", "--case", spec),
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            )  # fmt: skip
            procs.append(server)
            _wait_for_line(server, server.stdout, "ready", 15)
            client = subprocess.run(
                _in_ns(topo.ns_c, *me, "_client", "--case", spec, "--server", topo.server_addr,
                       "--updates", str(updates), "--pause", str(pause_s), "--out", str(record)),
                capture_output=True, text=True, timeout=60 + updates * (pause_s + 30),
            )  # fmt: skip
            if client.returncode < 0:  # we never signal the client: another process's cleanup did
                raise NamespaceVanished(f"the benchmark client was killed by signal {-client.returncode}")
            if client.returncode != 0:
                raise RuntimeError(
                    f"benchmark client failed (exit {client.returncode}): {client.stderr.strip()[-800:]}"
                )
            time.sleep(0.2)  # let the last ACKs reach the capture before stopping it
            _stop(dumpcap, signal.SIGINT)
        finally:
            for p in reversed(procs):
                _stop(p)


@dataclass
class CaseResult:
    case: str
    updates: int
    mode: str
    t_true_ms_median: float
    t_err_ms_median: float  # against the client application's clock: the reference
    t_err_ms_max: float
    kernel_err_ms_median: float  # against the kernel's socket timestamps (see docs: not under loss)
    kernel_err_ms_max: float
    unique_bytes_err_max: int  # X without retransmissions vs the bytes the server wrote
    wire_extra_bytes: int  # retransmitted bytes on the wire (in X, not in the application's count)
    timed_out: int
    connections: int
    retransmissions: int

    @property
    def ok(self) -> bool:
        return (
            self.t_err_ms_max <= T_TOLERANCE_S * 1e3
            and self.unique_bytes_err_max == 0
            and self.timed_out == 0
        )


def _median_max(values: list[float]) -> tuple[float, float]:
    return (statistics.median(values), max(values)) if values else (float("nan"), float("nan"))


def compare(pcap: Path, record: dict, case: Case, mode: str) -> CaseResult:
    sys.path.insert(0, str(ROOT / "workers"))
    from qoelab.rd.analysis import Endpoint, analyze
    from qoelab.rd.clicks import clicks_from_json

    clicks = clicks_from_json({"version": 1, "clicks": record["clicks"]}) if mode == "clicks" else None
    server = Endpoint("fd00:71a::2" if case.ipv6 else "10.71.0.2", PORT)
    res = analyze(pcap, clicks, server=server, quiet_s=case.quiet_s)
    truth = record["truth"]
    if len(res.updates) != len(truth):
        raise AssertionError(f"{case.name} ({mode}): {len(res.updates)} updates found, {len(truth)} made")
    k_err, a_err, xu_err, extra = [], [], [], 0
    for u, tr in zip(res.updates, truth, strict=True):
        if u.T_s is not None:
            a_err.append(abs(u.T_s - (tr["t_last"] - tr["t_sent"])) * 1e3)
            if tr["k_sent"] is None or tr["k_last"] is None:
                raise AssertionError("the kernel gave no socket timestamps; cannot compare")
            k_err.append(abs(u.T_s - (tr["k_last"] - tr["k_sent"])) * 1e3)
        xu_err.append(abs(u.bytes_down_unique - tr["bytes"]))
        extra += u.bytes_down - u.bytes_down_unique
    return CaseResult(
        case.name,
        len(truth),
        mode,
        statistics.median((t["t_last"] - t["t_sent"]) * 1e3 for t in truth),
        *_median_max(a_err),
        *_median_max(k_err),
        unique_bytes_err_max=max(xu_err),
        wire_extra_bytes=extra,
        timed_out=res.summary.n_timed_out,
        connections=max(u.connections for u in res.updates),
        retransmissions=sum(u.retransmissions_down for u in res.updates),
    )


def run_case(case: Case, updates: int, keep: Path | None = None) -> list[CaseResult]:
    with tempfile.TemporaryDirectory(prefix="qlra-") as tmp:
        workdir = Path(tmp)
        for attempt in range(3):
            try:
                pcap, record = capture_case(case, updates, workdir)
                break
            except NamespaceVanished as err:
                print(f"  {err}; running the case again", file=sys.stderr)
                if attempt == 2:
                    raise
        if keep is not None:
            keep.mkdir(parents=True, exist_ok=True)
            slug = "".join(ch if ch.isalnum() else "-" for ch in case.name).strip("-")
            shutil.copy(pcap, keep / f"{slug}{pcap.suffix}")
            (keep / f"{slug}.json").write_text(json.dumps(record, indent=1))
        return [compare(pcap, record, case, mode) for mode in ("clicks", "quiet")]


def markdown(results: list[CaseResult], command: str) -> str:
    lines = [
        f"Command: `{command}` ({time.strftime('%Y-%m-%d')}, kernel {os.uname().release}, "
        f"{os.cpu_count()} cores, {results[0].updates if results else 0} updates per case).",
        "",
        "| case | mode | true T median ms | T err median / max ms | T err vs socket timestamps ms "
        "| X err bytes | retx bytes in X | conns | retx segments | timed out | ok |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        lines.append(
            f"| {r.case} | {r.mode} | {r.t_true_ms_median:.1f} "
            f"| {r.t_err_ms_median:.3f} / {r.t_err_ms_max:.3f} "
            f"| {r.kernel_err_ms_median:.3f} / {r.kernel_err_ms_max:.3f} | {r.unique_bytes_err_max} "
            f"| {r.wire_extra_bytes} | {r.connections} | {r.retransmissions} | {r.timed_out} "
            f"| {'yes' if r.ok else '**no**'} |"
        )
    return "\n".join(lines)


def write_docs(table: str) -> None:
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from docblock import write_block

    write_block(ROOT / "docs" / "rd-analysis.md", "<!-- bench:begin -->", "<!-- bench:end -->", table)


def _on_sigterm(main_pid: int):
    """SIGTERM unwinds the harness so namespaces are removed. pyroute2 forks helpers that inherit
    the handler and are ended with SIGTERM: those must just exit, not run the harness' cleanup."""

    def handler(signum: int, frame: object) -> None:
        if os.getpid() != main_pid:
            os._exit(128 + signum)
        raise KeyboardInterrupt

    return handler


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="cmd")
    for role in ("_server", "_client"):
        p = sub.add_parser(role)
        p.add_argument("--case", required=True)
        if role == "_client":
            p.add_argument("--server", required=True)
            p.add_argument("--updates", type=int, required=True)
            p.add_argument("--pause", type=float, required=True)
            p.add_argument("--out", required=True)
    parser.add_argument("--updates", type=int, default=10, help="updates per case (default 10)")
    parser.add_argument("--only", action="append", help="run only cases whose name contains this")
    parser.add_argument("--keep", type=Path, help="copy captures and client records to this directory")
    parser.add_argument("--write-docs", action="store_true", help="put the table into docs/rd-analysis.md")
    args = parser.parse_args(argv)
    if args.cmd == "_server":
        return _server(args)
    if args.cmd == "_client":
        return _client(args)
    if args.updates < 1:
        parser.error("--updates: must be at least 1")
    try:
        check_host()
    except HostNotCapable as err:
        print(f"rd_analysis benchmark cannot run on this host: {err}", file=sys.stderr)
        return 2
    signal.signal(signal.SIGTERM, _on_sigterm(os.getpid()))
    cases = [c for c in CASES if not args.only or any(s in c.name for s in args.only)]
    results: list[CaseResult] = []
    for case in cases:
        print(f"case: {case.name} ...", flush=True)
        results.extend(run_case(case, args.updates, args.keep))
    command = "sudo .venv/bin/python benchmarks/rd_analysis/run.py" + (
        f" --updates {args.updates}" if args.updates != 10 else ""
    )
    table = markdown(results, command + (" --write-docs" if args.write_docs else ""))
    print(table)
    if args.write_docs:
        write_docs(table)
    return 0 if all(r.ok for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
