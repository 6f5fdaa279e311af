"""The macrobenchmarks of one storage run (thesis 001, Ch. 6; notes §4): PostMark and FileBench's
``varmail`` and ``fileserver`` personalities, run in the client guest on the mounted target.

- ``postmark`` (notes §4.1, Table 6.1): Debian's PostMark 1.53 (``/usr/bin/postmark`` in the guest
  image; package 1.53-2, whose banner still says "v1.51 : 8/14/01") in the thesis' configuration:
  500 files of 5 KiB to 512 KiB, 25,000 transactions (``postmark_transactions``), unbuffered I/O
  (``set buffering false``), everything else PostMark's default (seed 42, 512 B blocks, biases 5),
  its location a directory on the mount. The result is PostMark's own report: ``seconds`` = its
  "seconds total" (the thesis' Time column) and ``tps`` = its transactions per second (transactions
  / whole seconds of the transaction phase; the thesis' IOPS column).
- ``varmail``, ``fileserver`` (notes §4.2, Tables 6.2, 6.3): the benchmark tool's emulation of the
  two FileBench 1.4.9.1 personalities (FileBench is not packaged in Debian). As the thesis patched
  FileBench to do, the file set is preallocated with the emulator out of the way (the link switched
  to unimpaired) and the link switched back before the run phase, which lasts ``macro_seconds``
  (the thesis: 120 s); IOPS in total and per flowop.

Each result carries the link's packets and bytes and the CPU (``measure.CpuProbe``) over the
measured phase (PostMark: the whole program; FileBench: the run phase only).
"""

from __future__ import annotations

import re
import shlex
from typing import TYPE_CHECKING, Any

from qoelab.emulation.topology import EmulatedLink
from qoelab.errors import QoelabError
from qoelab.storage import iobench, mounts
from qoelab.storage.guest import StorageGuest
from qoelab.storage.measure import CpuProbe, counters, maybe_phase

if TYPE_CHECKING:
    from qoelab.storage.trial import StorageRun

POSTMARK = "/usr/bin/postmark"
# Notes §4.1: 500 files, 5 KiB..512 KiB, 25000 transactions, unbuffered; the rest PostMark's defaults.
POSTMARK_FILES = 500
POSTMARK_SIZES = (5 * 1024, 512 * 1024)
MACRO = ("postmark", "varmail", "fileserver")


class PostmarkError(QoelabError):
    """PostMark failed or its report could not be read; the message has its output tail."""


def postmark_commands(location: str, transactions: int, files: int = POSTMARK_FILES) -> str:
    """The PostMark session of the thesis' configuration, ending with run and quit."""
    lo, hi = POSTMARK_SIZES
    return "\n".join([
        f"set location {location}",
        f"set number {files}",
        f"set size {lo} {hi}",
        f"set transactions {transactions}",
        "set buffering false",
        "set report verbose",
        "show",
        "run",
        "quit",
        "",
    ])  # fmt: skip


_INT = r"(\d+)"
_NUM = r"([\d.]+)"
_PATTERNS: dict[str, str] = {
    "seconds": rf"{_INT} seconds total",
    "transaction_seconds": rf"{_INT} seconds of transactions",
    "tps": rf"seconds of transactions \({_INT} per second\)",
    "created": rf"{_INT} created",
    "created_alone": rf"Creation alone: {_INT} files",
    "created_mixed": rf"Mixed with transactions: {_INT} files(?=[^\n]*\n\s*{_INT} read)",
    "read": rf"{_INT} read \(",
    "appended": rf"{_INT} appended",
    "deleted": rf"{_INT} deleted",
    "deleted_alone": rf"Deletion alone: {_INT} files",
    "read_mb": rf"{_NUM} (?:kilobytes|megabytes|gigabytes|bytes) read",
    "written_mb": rf"{_NUM} (?:kilobytes|megabytes|gigabytes|bytes) written",
}
_UNITS = {"bytes": 1 / 2**20, "kilobytes": 1 / 1024, "megabytes": 1.0, "gigabytes": 1024.0}  # PostMark: 2^10


def parse_postmark(text: str) -> dict[str, Any]:
    """PostMark's verbose report: seconds total, transaction seconds, transactions per second, the
    file counts and the data read and written (megabytes as PostMark counts them: 2^20 bytes).

    PostMark prints no rate when the transaction phase took under a second; ``tps`` is then None."""
    out: dict[str, Any] = {}
    for key, pattern in _PATTERNS.items():
        m = re.search(pattern, text)
        if key.endswith("_mb"):
            m = re.search(pattern.replace("(?:kilobytes|megabytes|gigabytes|bytes)", r"(\w+)"), text)
            out[key] = float(m.group(1)) * _UNITS.get(m.group(2), 1.0) if m else None
        else:
            out[key] = int(m.group(1)) if m else None
    if out["seconds"] is None:
        tail = " | ".join(text.strip().splitlines()[-5:])
        raise PostmarkError(f"PostMark's report has no 'seconds total' line: {tail}")
    return out


def postmark(run: StorageRun, client: StorageGuest, link: EmulatedLink,
             probe: CpuProbe | None = None) -> dict[str, Any]:  # fmt: skip
    """PostMark in the guest on the mount point; its report, the link's counters and the CPU."""
    where = f"{mounts.MOUNT_POINT}/postmark"
    client.mkdir(where)
    session = postmark_commands(where, run.postmark_transactions, run.postmark_files)
    before = counters(link)
    with maybe_phase(probe) as cpu:
        res = client.shell.run(f"cd /tmp && {POSTMARK}", stdin=session.encode(),
                               timeout=900 + 4 * run.postmark_transactions, check=False)  # fmt: skip
    after = counters(link)
    if res.returncode != 0:
        raise PostmarkError(f"PostMark exited {res.returncode}: {(res.stderr or res.stdout).strip()[-400:]}")
    report = parse_postmark(res.stdout)
    version = client.shell.run("dpkg-query -W -f '${Version}' postmark", timeout=30, check=False).stdout
    client.shell.run(f"rm -rf {shlex.quote(where)}", timeout=600, check=False)
    return {"benchmark": "postmark", **report, "transactions": run.postmark_transactions,
            "files": run.postmark_files, "sizes": list(POSTMARK_SIZES), "buffering": False, "location": where,
            "version": version.strip() or None, "link_bytes": after[1] - before[1],
            "link_packets": after[0] - before[0], "cpu": cpu, "report": res.stdout[-3000:]}  # fmt: skip


def filebench(run: StorageRun, client: StorageGuest, link: EmulatedLink,
              probe: CpuProbe | None = None) -> dict[str, Any]:  # fmt: skip
    """The emulated FileBench personality ``run.family``: preallocated unimpaired, run emulated."""
    where = f"{mounts.MOUNT_POINT}/filebench"
    client.mkdir(where)
    spec = iobench.FilebenchSpec(personality=run.family, dir=where, seconds=run.macro_seconds,  # type: ignore[arg-type]
                                 files=run.macro_files, wait_before_run=True, drop_caches=True)  # fmt: skip
    emulated = link.profile
    state: dict[str, Any] = {"switched": False}
    cpu: dict[str, Any] = {}

    def before_run() -> None:
        # Notes §4.2: the emulator back on after the preallocation, before the run phase.
        link.set_profile(emulated, "end of filebench preallocation")
        state["switched"] = False
        state["counters"] = counters(link)
        if probe is not None:
            state["cpu_mark"] = probe.start()

    link.set_profile(emulated.unimpaired(), "filebench preallocation")
    state["switched"] = True
    try:
        res = iobench.filebench(spec, prefix=client.shell.prefix_argv(), tool=client.tool,
                                before_run=before_run, timeout=run.macro_seconds + 3600)  # fmt: skip
    finally:
        if state["switched"]:
            link.set_profile(emulated, "end of filebench preallocation (failed)")
    after = counters(link)
    if probe is not None and "cpu_mark" in state:
        cpu = probe.stop(state["cpu_mark"])
    start = state.get("counters", after)
    client.shell.run(f"rm -rf {shlex.quote(where)}", timeout=1800, check=False)
    flowops = [{"name": f.name, "op": f.op, "ops": f.ops, "ops_per_s": f.ops_per_s, "errors": f.errors,
                "bytes": f.bytes, "ms_per_op": f.ms_per_op} for f in res.flowops]  # fmt: skip
    return {"benchmark": run.family, "iops": res.iops, "ops": {f.name: f.ops for f in res.flowops},
            "seconds": res.seconds, "total_ops": res.ops, "errors": res.errors,
            "first_error": res.first_error, "threads": res.threads, "files": res.files, "mb_s": res.mb_s,
            "read_bytes": res.read_bytes, "write_bytes": res.write_bytes, "prealloc_s": res.prealloc_s,
            "emulation": res.emulation, "flowops": flowops, "link_bytes": after[1] - start[1],
            "link_packets": after[0] - start[0], "cpu": cpu}  # fmt: skip


def run_macro(run: StorageRun, client: StorageGuest, link: EmulatedLink,
              probe: CpuProbe | None = None) -> dict[str, Any]:  # fmt: skip
    if run.family == "postmark":
        return postmark(run, client, link, probe)
    return filebench(run, client, link, probe)
