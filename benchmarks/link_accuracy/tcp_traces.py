"""TCP over trace links (issue 37): one bulk download per trace pair, congestion control and queue.

For each pair of the lab's trace library (the ``.down`` trace down, the ``.up`` trace up, 20 ms each
way), each TCP congestion control (CUBIC, BBR) and each queue (drop-tail ``fifo`` of 1000 packets,
``codel``, ``pie``), one bulk download runs for ``--seconds``: a socket in the server namespace
sends as fast as TCP lets it, one in the client namespace reads. (Not iperf3: its end-of-test
exchange waits behind seconds of queue on these links, and only the sending time is measured.)
linkemu's packet records of the down direction give, over the run after a 5 s warm-up:

- **utilisation**: the IP bytes that left the rate stage / the bytes the trace offered then, up to
  the sender's last packet (a queue still draining after it is left out);
- **queueing delay**: per data packet, from its arrival at the bottleneck to leaving its rate
  stage (waiting + serialisation), its median and 95th percentile.

Mahimahi's link shell is the method (Netravali et al., USENIX ATC 2015); the traces come from
Winstein et al., NSDI 2013, whose measurements over them describe what a loss-based TCP does on a
cellular link with a deep drop-tail buffer: it keeps the link busy and builds a standing queue of
seconds. The doc (docs/emulation.md, "TCP over the library's traces") sets the measured rows beside
that qualitative description; no number of either paper is in the lab's notes, so nothing here is
compared numerically.

    sudo .venv/bin/python benchmarks/link_accuracy/tcp_traces.py --seconds 60 \
        --out benchmarks/link_accuracy/results/tcp_traces.json
    .venv/bin/python benchmarks/link_accuracy/tcp_traces.py \
        --report benchmarks/link_accuracy/results/tcp_traces.json

Needs root (namespaces, TUN) and a built linkemu. Run it on a quiet host.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import socket
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

from qoelab.emulation import records, traces
from qoelab.emulation.profile import LinkProfile
from qoelab.emulation.system import in_netns
from qoelab.emulation.tcp import TcpSettings
from qoelab.emulation.topology import EmulatedLink, emulated_link
from qoelab.hostfacts import run_facts

CCS = ("cubic", "bbr")
QUEUES = ("fifo", "codel", "pie")
DELAY = "20ms"
LIMIT = "1000pkt"
WARMUP_S = 5.0
PORT = 5301


def pairs() -> list[str]:
    names = {p.stem for p in traces.LIBRARY.iterdir() if p.suffix in (".down", ".up")}
    return sorted(n for n in names if all((traces.LIBRARY / f"{n}{s}").is_file() for s in (".down", ".up")))


def measure(recs: np.ndarray, trace: traces.Trace, t0_ns: int, delay_s: float) -> dict[str, Any]:
    """Utilisation and queueing delay of the download's data packets from the down records."""
    data = recs[(recs["sport"] == PORT) & (recs["payload_len"] > 0)]
    fwd = data[data["fate"] == records.FORWARDED]
    if len(fwd) == 0:
        raise RuntimeError("no data packet of the download was forwarded")
    out_ns = fwd["depart_ns"] - int(round(delay_s * 1e9))  # when each left the rate stage
    lo = int(fwd["arrival_ns"].min() + WARMUP_S * 1e9)
    hi = int(data["arrival_ns"].max())  # the sender's last packet: a queue draining after is left out
    window = (out_ns >= lo) & (out_ns < hi)
    offered = trace.opportunities_ms((lo - t0_ns) / 1e6, (hi - t0_ns) / 1e6).size * traces.PACKET_BYTES
    delivered = int(fwd["ip_len"][window].astype(np.int64).sum())
    queueing_ms = (out_ns[window] - fwd["arrival_ns"][window]) / 1e6
    drops = int(np.isin(data["fate"], records.QUEUE_FATES).sum())
    return {
        "window_s": round((hi - lo) / 1e9, 2),
        "offered_bps": offered * 8 / ((hi - lo) / 1e9),
        "delivered_bps": delivered * 8 / ((hi - lo) / 1e9),
        "utilisation": delivered / offered if offered else None,
        "queueing_p50_ms": round(float(np.percentile(queueing_ms, 50)), 2),
        "queueing_p95_ms": round(float(np.percentile(queueing_ms, 95)), 2),
        "queue_drops": drops,
        "data_packets": int(len(data)),
    }


def bulk_download(link: EmulatedLink, seconds: float) -> int:
    """Send from the server namespace to the client namespace for ``seconds``; bytes received."""
    with in_netns(link.server_ns):
        server = socket.create_server((link.server_ip, PORT))
    with in_netns(link.client_ns):
        client = socket.create_connection((link.server_ip, PORT), timeout=30)
    received = 0

    def read() -> None:
        nonlocal received
        with contextlib.suppress(OSError):
            while chunk := client.recv(1 << 16):
                received += len(chunk)

    with server, client:
        conn, _ = server.accept()
        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        with conn:
            conn.settimeout(0.5)  # a send blocked through an outage must not outlast the run
            block, end = b"\0" * (1 << 16), time.monotonic() + seconds
            while time.monotonic() < end:
                with contextlib.suppress(TimeoutError):
                    conn.send(block)
        client.shutdown(socket.SHUT_RDWR)  # what is still queued is not measured
        reader.join(timeout=10)
    return received


def one(name: str, cc: str, queue: str, seconds: float, workdir: Path) -> dict[str, Any]:
    profile = LinkProfile.parse(trace=f"{name}.down", up_trace=f"{name}.up", delay=DELAY, limit=LIMIT,
                                queue=queue, tcp=TcpSettings(cc=cc))  # fmt: skip
    rec = workdir / f"{name}-{cc}-{queue}.rec"
    with emulated_link(profile, backend="userspace", packet_records=rec) as link:
        received = bulk_download(link, seconds)
    t0 = int(link.emulator_stats["down"]["trace_t0_ns"])
    row = measure(records.read(rec), traces.load_cached(profile.down.trace), t0, profile.down.delay_s)
    for path in rec.parent.glob(f"{rec.stem}*"):
        path.unlink()
    return {"pair": name, "cc": cc, "queue": queue, "received_bytes": received, **row}


def run(seconds: float) -> dict[str, Any]:
    rows = []
    with tempfile.TemporaryDirectory(prefix="qoelab-tcp-traces-") as tmp:
        for name, cc, queue in itertools.product(pairs(), CCS, QUEUES):
            row = one(name, cc, queue, seconds, Path(tmp))
            rows.append(row)
            print(f"{name} {cc} {queue}: utilisation {row['utilisation']:.3f}, queueing p50 "
                  f"{row['queueing_p50_ms']} ms p95 {row['queueing_p95_ms']} ms", flush=True)  # fmt: skip
    tcp_cc = Path("/proc/sys/net/ipv4/tcp_congestion_control").read_text().strip()
    return {"host": {**run_facts(), "tcp_congestion_control_host": tcp_cc,
                     "started": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())},
            "method": {"seconds": seconds, "warmup_s": WARMUP_S, "one_way_delay": DELAY, "limit": LIMIT},
            "rows": rows}  # fmt: skip


def report(doc: dict[str, Any]) -> str:
    h, m = doc["host"], doc["method"]
    lines = [
        f"{h['cpu']} (BogoMIPS {h['bogomips']}), {h['cores']} cores, kernel {h['kernel']}, "
        f"code {h['code_revision']}, started {h['started']}; {m['seconds']:g} s per run, "
        f"{m['one_way_delay']} each way, limit {m['limit']}, first {m['warmup_s']:g} s left out.",
        "",
        "| trace pair | TCP | queue | offered | delivered | utilisation | queueing p50 | queueing p95 "
        "| queue drops |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in doc["rows"]:
        lines.append(
            f"| {r['pair']} | {r['cc']} | {r['queue']} | {r['offered_bps'] / 1e6:.2f} Mbit/s "
            f"| {r['delivered_bps'] / 1e6:.2f} Mbit/s | {r['utilisation']:.3f} | {r['queueing_p50_ms']:g} ms "
            f"| {r['queueing_p95_ms']:g} ms | {r['queue_drops']} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seconds", type=float, default=30.0, help="each download's length (default 30)")
    ap.add_argument("--out", type=Path, help="write the result file here")
    ap.add_argument("--report", type=Path, help="print the table of a result file instead of running")
    args = ap.parse_args(argv)
    if args.report:
        print(report(json.loads(args.report.read_text())))
        return 0
    doc = run(args.seconds)
    if args.out:
        args.out.write_text(json.dumps(doc, indent=1) + "\n")
    print(report(doc))
    return 0


if __name__ == "__main__":
    sys.exit(main())
