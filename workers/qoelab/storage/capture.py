"""A capture at the link for the storage families, as thesis 001 took one with tcpdump for its
metadata and amplification analyses (notes §3.6, §5.7): dumpcap on the server side of the emulated
link for the whole run, headers only (``SNAPLEN`` bytes of each packet), kept as the trial's pcap;
and the protocol's requests per metadata kind decoded from it with tshark: NFSv4 operations, SCSI
commands inside iSCSI, HTTP methods to Swift's proxy. The kinds' windows are the wall-clock times
of the benchmark tool's phase markers, the clock dumpcap stamps packets with."""

from __future__ import annotations

import contextlib
import re
import subprocess
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from qoelab.emulation.topology import EmulatedLink
from qoelab.packets.capture import Capture
from qoelab.procs import ProcSet, require_tool
from qoelab.storage.nfs import NFS_PORT
from qoelab.storage.swift import PROXY_PORT
from qoelab.storage.targets import ISCSI_PORT

SNAPLEN = 1024  # whole NFSv4 compounds (a CREATE with its attributes), iSCSI and HTTP headers
# A client's request, per target (tshark display filters) and the Info column's shape of one.
REQUESTS = {
    "nfs": "rpc.msgtyp == 0",
    "iscsi": "iscsi.opcode == 0x01",  # SCSI Command PDUs
    "swift": "http.request",
}
# Each server's port decoded as its protocol, whatever the client's port. tshark tries the lower
# port's dissector first, and the kernel's NFS client takes a random reserved port: one that tshark
# knows (853, DNS over TLS) hid every NFS request of a run as TLS. The proxy's port is not HTTP to
# tshark everywhere either.
DECODE_AS = {
    "nfs": f"tcp.port=={NFS_PORT},rpc",
    "iscsi": f"tcp.port=={ISCSI_PORT},iscsi",
    "swift": f"tcp.port=={PROXY_PORT},http",
}
_NFS_CALL = re.compile(r"^V\d Call(?: \(Reply In \d+\))?\s*")
_SCSI = re.compile(r"SCSI: (\S+)")


@contextlib.contextmanager
def link_capture(link: EmulatedLink, pcap: Path, prefix: str) -> Iterator[Path]:
    """dumpcap on the server's end of the link while the block runs; the pcap's path."""
    procs = ProcSet(prefix, pcap.parent / "capture-logs")
    capture = Capture(procs, link.server_ns, link.server_if, pcap, snaplen=SNAPLEN)
    capture.start()
    try:
        yield pcap
    finally:
        capture.stop()
        procs.stop_all()


def request_name(target: str, info: str) -> str:
    """The operation a request's Info column names: ``CREATE`` (NFS, several joined by '+'),
    ``Read(10)`` (SCSI), ``PUT`` (HTTP)."""
    info = info.replace("[Packet size limited during capture]", "").strip()
    if target == "nfs":
        if info.startswith(("V3 NULL", "V4 NULL")):
            return "NULL"
        rest = _NFS_CALL.sub("", info)
        if not rest:
            return "(cut short)"
        ops = [
            m.group(0) for part in re.split(r"\s*[|;]\s*", rest) if (m := re.match(r"[A-Z][A-Z_0-9]+", part))
        ]
        return "+".join(ops) or rest.split(" ")[0]
    if target == "iscsi":
        m = _SCSI.search(info)
        return m.group(1) if m else info.split(" ")[0]
    return info.strip().split(" ")[0]


def requests(pcap: Path, target: str) -> list[tuple[float, str]]:
    """(epoch seconds, request name) of every client request in the capture."""
    tshark = require_tool("tshark", "tshark")
    argv = [tshark, "-n", "-r", str(pcap), "-d", DECODE_AS[target], "-Y", REQUESTS[target], "-T", "fields",
            "-e", "frame.time_epoch", "-e", "_ws.col.Info", "-E", "separator=/t"]  # fmt: skip
    res = subprocess.run(argv, capture_output=True, text=True, timeout=300, check=False)
    if res.returncode != 0:
        raise RuntimeError(f"tshark could not read {pcap}: {res.stderr.strip()[-300:]}")
    out = []
    for line in res.stdout.splitlines():
        t, _, info = line.partition("\t")
        with contextlib.suppress(ValueError):
            out.append((float(t), request_name(target, info)))
    return out


def per_kind(rows: list[dict[str, Any]], seen: list[tuple[float, str]]) -> None:
    """Each metadata row gets ``requests`` (how many in its window) and ``request_ops`` (which,
    most frequent first: ``CREATE x100; GETATTR x3``)."""
    for row in rows:
        start, end = row.get("t_start"), row.get("t_end")
        if start is None or end is None:
            continue
        names = Counter(name for t, name in seen if start <= t <= end)
        row["requests"] = sum(names.values())
        row["request_ops"] = "; ".join(f"{name} x{count}" for name, count in names.most_common())
