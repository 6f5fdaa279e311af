"""Which RFB encodings carry a VNC trial's bytes: decode the server's rectangles per click.

For a trial kept with ``qoelab rd bench --protocol vnc --keep DIR`` this reassembles the server ->
client TCP stream of ``DIR/rd/capture.pcap``, walks the RFB FramebufferUpdate messages (Tight
subencodings: JPEG, zlib "copy"/"gradient"/palette, fill; raw, CopyRect and the cursor/desktop
pseudo-encodings) and sums bytes and pixels per kind for the update each click started.

The capture starts after the RFB handshake, on a quiet link, so the stream starts between
messages; the pixel format is the viewer's 32 bits per pixel (Tight sends 3-byte pixels).

    .venv/bin/python benchmarks/rd_bench/vnc_encodings.py /tmp/vncvm /tmp/vncns

Written for docs/vm.md, "Why QEMU's VNC sends more".
"""

from __future__ import annotations

import argparse
import json
import struct
import sys
from bisect import bisect_right
from collections import Counter, defaultdict
from pathlib import Path

import dpkt

from qoelab.packets.pcapfile import iter_ip

TIGHT, RAW, COPYRECT = 7, 0, 1
CURSOR, XCURSOR, LAST_RECT, EXT_DESKTOP, LED = -239, -240, -224, -307, -261
NO_DATA_PSEUDO = {-223, -232, -257, -258, -259}  # desktop size, pointer pos, QEMU extensions
BYTES_PER_PIXEL, TIGHT_PIXEL = 4, 3


def server_stream(pcap: Path, port: int) -> tuple[bytes, list[int], list[float]]:
    """The server -> client payload in sequence order, with the capture time of each segment's start."""
    segments: dict[int, tuple[float, bytes]] = {}
    for ts, ip in iter_ip(pcap):
        tcp = ip.data
        if isinstance(tcp, dpkt.tcp.TCP) and tcp.sport == port and tcp.data:
            segments.setdefault(tcp.seq, (ts, bytes(tcp.data)))  # a retransmission repeats a seq
    data, offsets, times = bytearray(), [], []
    for seq in sorted(segments):
        ts, payload = segments[seq]
        offsets.append(len(data))
        times.append(ts)
        data += payload
    return bytes(data), offsets, times


class Reader:
    def __init__(self, data: bytes) -> None:
        self.data, self.pos = data, 0

    def take(self, n: int) -> bytes:
        if self.pos + n > len(self.data):
            raise EOFError
        chunk = self.data[self.pos : self.pos + n]
        self.pos += n
        return chunk

    def unpack(self, fmt: str) -> tuple:
        return struct.unpack(fmt, self.take(struct.calcsize(fmt)))

    def compact_length(self) -> int:
        """Tight's 1-3 byte length: 7 bits per byte, high bit = more follows."""
        value = 0
        for shift in (0, 7, 14):
            byte = self.take(1)[0]
            value |= (byte & (0x7F if shift < 14 else 0xFF)) << shift
            if not byte & 0x80:
                break
        return value


def tight_rect(r: Reader, w: int, h: int) -> str:
    """Skip one Tight rectangle; return its kind."""
    control = r.take(1)[0]
    method = control >> 4
    if method == 0x8:
        r.take(TIGHT_PIXEL)
        return "fill"
    if method == 0x9:
        r.take(r.compact_length())
        return "jpeg"
    filter_id = r.take(1)[0] if method & 0x4 else 0
    if filter_id == 1:
        colours = r.take(1)[0] + 1
        r.take(colours * TIGHT_PIXEL)
        size = ((w + 7) // 8 if colours == 2 else w) * h
        kind = "palette"
    else:
        size = w * h * TIGHT_PIXEL
        kind = "gradient" if filter_id == 2 else "zlib"
    r.take(size if size < 12 else r.compact_length())  # under 12 bytes Tight sends them raw
    return kind


def rect_kind(r: Reader, w: int, h: int, encoding: int) -> str | None:
    """Skip one rectangle's data; return its kind, None for LastRect (the update ends there)."""
    if encoding == TIGHT:
        return tight_rect(r, w, h)
    if encoding == RAW:
        r.take(w * h * BYTES_PER_PIXEL)
        return "raw"
    if encoding == COPYRECT:
        r.take(4)
        return "copyrect"
    if encoding == CURSOR:
        r.take(w * h * BYTES_PER_PIXEL + (w + 7) // 8 * h)
        return "cursor"
    if encoding == XCURSOR:
        r.take(6 + 2 * ((w + 7) // 8) * h if w * h else 0)
        return "cursor"
    if encoding == EXT_DESKTOP:
        screens = r.take(1)[0]
        r.take(3 + 16 * screens)
        return "desktop"
    if encoding == LED:
        r.take(1)
        return "pseudo"
    if encoding == LAST_RECT:
        return None
    if encoding in NO_DATA_PSEUDO:
        return "pseudo"
    raise ValueError(f"encoding {encoding} is not decoded by this script")


def per_click(trial_dir: Path, port: int = 5900) -> list[dict]:
    data, offsets, times = server_stream(trial_dir / "rd" / "capture.pcap", port)
    clicks = json.loads((trial_dir / "rd" / "clicks.json").read_text())["clicks"]
    updates = json.loads((trial_dir / "rd" / "result.json").read_text())["updates"]
    starts = [c["t"] for c in clicks]
    size: dict[int, Counter] = defaultdict(Counter)
    area: dict[int, Counter] = defaultdict(Counter)
    r = Reader(data)

    def click_of(pos: int) -> int:
        t = times[max(0, bisect_right(offsets, pos) - 1)]
        return bisect_right(starts, t) - 1  # -1: before the first click

    try:
        while True:
            kind = r.take(1)[0]
            if kind == 0:  # FramebufferUpdate
                _, count = r.unpack(">BH")
                for _ in range(count):
                    x, y, w, h, encoding = r.unpack(">HHHHi")
                    start = r.pos
                    name = rect_kind(r, w, h, encoding)
                    if name is None:
                        break
                    i = click_of(start)
                    size[i][name] += r.pos - start + 12
                    area[i][name] += w * h
            elif kind == 1:  # SetColourMapEntries
                _, _, n = r.unpack(">BHH")
                r.take(6 * n)
            elif kind == 2:  # Bell
                pass
            elif kind == 3:  # ServerCutText
                r.take(3)
                r.take(r.unpack(">I")[0])
            else:
                raise ValueError(f"unknown server message {kind} at byte {r.pos - 1}")
    except EOFError:
        pass
    return [
        {"page": c["page"], "ratio": c["ratio"], "X": u["bytes_down"], "bytes": dict(size[i]),
         "pixels": dict(area[i])}
        for i, (c, u) in enumerate(zip(clicks, updates, strict=True))
    ]  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dirs", nargs="+", type=Path, help="trial directories kept with `qoelab rd bench --keep`")
    ap.add_argument("--port", type=int, default=5900)
    args = ap.parse_args(argv)
    kinds = ("jpeg", "gradient", "zlib", "palette", "fill", "raw", "copyrect", "cursor", "pseudo")
    for d in args.dirs:
        print(f"{d}:")
        print(f"  {'page':>4} {'ratio':>5} {'X B':>8}  " + " ".join(f"{k:>9}" for k in kinds[:5]))
        for row in per_click(d, args.port):
            cells = " ".join(f"{row['bytes'].get(k, 0):>9}" for k in kinds[:5])
            print(f"  {row['page']:>4} {row['ratio']:>5} {row['X']:>8}  {cells}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
