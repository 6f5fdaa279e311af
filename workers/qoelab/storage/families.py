"""The microbenchmark and metadata families of one storage run (thesis 001, notes §3, Ch. 4-5).

Each takes the run's parameters, the client guest and the link, runs the benchmark tool in the guest
(``iobench``) and returns its rows. ``probe`` (a ``measure.CpuProbe``) adds the client's CPU busy
fraction and the server processes' CPU seconds per round (``cpu_client``, ``cpu_server``).

- ``metadata`` (notes §3.6, Ch. 5): for each n, a fresh directory, then n × mkdir, n × touch, one ls,
  n × unlink, n × rmdir, a ``sync`` closing each kind and the client's cache dropped between kinds;
  per kind the completion time and the packets and bytes the link carried in both directions, read
  from the emulator's counters at the tool's phase markers (the thesis read them from a capture).
- ``batch`` (notes §3.3-§3.5, §4.5-4.6): a file set of ``set_bytes`` in files of ``file_size``
  (access unit = file size), one round per thread count, each with the client's cache dropped and a
  ``limit_s`` time limit. Reads use a read set made beforehand; before each read round the server's
  cache is reheated by reading the set with 32 threads over the unimpaired link (the thesis switched
  its emulator off for that). Writes delete the previous round's files first (NFS, iSCSI) or
  overwrite them (Swift). Amplification = bytes on the link in both directions during the round /
  bytes the application moved (for a batch the thesis divides line rate by throughput: the same
  ratio). The reheat's throughput is the guest's ceiling for the set with nothing emulated in the
  way; a read round above ``GUEST_BOUND_FRACTION`` of it is marked ``guest_bound`` (writes: None).
- ``single`` (§3.3 single-file access, §4.4, Fig. 4.3): one file of ``file_size``, access unit =
  file size, one thread, one round; reads read a file made beforehand over the unimpaired link
  with the server reheated as in a batch. On iSCSI, where the client's own ext4 is measured, the
  file lies among ``NEIGHBOURS`` empty files (ext4 reads its inode table ahead only over used
  inodes, and the thesis' LUN held its sets), and the LUN is unmounted and mounted again over the
  unimpaired link before the round (``remounted``), so the client's metadata is cold as the thesis'
  long-prepared sets had it: a cache drop leaves the metadata of a file used seconds before partly
  cached, even after a journal checkpoint (docs/storage-bench.md, "What a cache drop leaves of
  ext4's metadata").
  Amplification = link bytes in both directions during the round and the cache-clean ``sync`` after
  it / file size (the thesis' single-file definition, §3.5; Fig. 4.9).
  Every round records that clean step's bytes (``link_bytes_clean``, the thesis' ``bytes_clean``).
- ``unit`` (§3.3 access-unit sweep, §4.3, Fig. 4.2): one file of ``file_size`` (the thesis: 16 MiB)
  read or written in units of each of ``units``, one round each, one thread; the whole file is
  written once before (over the unimpaired link), and before each read round read once (the
  reheat), the client's cache dropped before each round.

The warm-up of a new target (100 × 1 MiB written, read with O_SYNC, deleted; notes §3.1) runs over the
unimpaired link before the first microbenchmark round.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from qoelab.emulation.topology import EmulatedLink
from qoelab.storage import iobench, mounts
from qoelab.storage.measure import CpuProbe, counters, maybe_phase

if TYPE_CHECKING:
    # Client: the guest, or (Swift's micro families) rclone on the host
    from qoelab.storage.trial import Client, StorageRun

OnRow = Callable[[dict[str, Any]], None] | None
REHEAT_THREADS = 32  # [repo] the author's reheat read the set with 32 threads
# A round within this fraction of what the guest reads with no emulator in the way (the reheat) may
# be measuring the TCG guest, not the storage system (the "guest-bound" mark).
GUEST_BOUND_FRACTION = 0.8
# Empty files beside a single file on iSCSI: two inode-table readahead windows (32 blocks of 16 inodes)
# of used inodes, and a directory indexed over several blocks, as in the thesis' populated sets.
NEIGHBOURS = 1024


def metadata(run: StorageRun, client: Client, link: EmulatedLink, on_row: OnRow = None,
             probe: CpuProbe | None = None) -> list[dict[str, Any]]:  # fmt: skip
    """The metadata family for each n; a row per kind with its time, packets and bytes."""
    rows: list[dict[str, Any]] = []
    for n in run.meta_n:
        where = f"{mounts.MOUNT_POINT}/meta-{n}"
        client.mkdir(where)
        marks: dict[str, tuple[int, int]] = {}
        times: dict[str, float] = {}  # wall clock, as a capture stamps packets (storage.capture)

        def on_line(ev: dict[str, Any], marks: dict[str, tuple[int, int]] = marks,
                    times: dict[str, float] = times) -> None:  # fmt: skip
            if ev.get("event") == "phase":
                marks[f"{ev['kind']} {ev['edge']}"] = counters(link)
                times[f"{ev['kind']} {ev['edge']}"] = time.time()

        spec = iobench.MetaSpec(dir=where, n=n, drop_caches=True, markers=True)
        result = iobench.meta(spec, prefix=client.shell.prefix_argv(), tool=client.tool, on_line=on_line,
                              timeout=600 + 10 * n)  # fmt: skip
        for op in result.ops:
            start, end = marks.get(f"{op.op} start"), marks.get(f"{op.op} end")
            row = {"op": op.op, "n": n, "done": op.done, "failed": op.failed, "seconds": op.seconds,
                   "ops_seconds": op.ops_seconds, "sync_seconds": op.sync_seconds,
                   "per_op_ms": op.seconds / max(op.n, 1) * 1e3,
                   "packets": None if not (start and end) else end[0] - start[0],
                   "bytes": None if not (start and end) else end[1] - start[1],
                   "t_start": times.get(f"{op.op} start"), "t_end": times.get(f"{op.op} end")}  # fmt: skip
            rows.append(row)
            if on_row:
                on_row(row)
        client.shell.run(f"rmdir {where}", timeout=120, check=False)
    return rows


def _micro(client: Client, spec: iobench.MicroSpec, on_line: Any = None) -> iobench.MicroResult:
    return iobench.micro(spec, prefix=client.shell.prefix_argv(), tool=client.tool, on_line=on_line,
                         timeout=spec.limit_s + 900)  # fmt: skip


def _prepare(client: Client, spec: iobench.PrepareSpec) -> None:
    iobench.prepare(spec, prefix=client.shell.prefix_argv(), tool=client.tool, timeout=3600)


def _file_set(run: StorageRun, client: Client, where: str, files: int, threads: int = 32) -> None:
    """A read round's set, written now; a write round gets only the directory it writes into."""
    if run.op == "read":
        _prepare(client, iobench.PrepareSpec(dir=where, size=run.file_size, files=files, threads=threads))
    else:
        client.mkdir(where)


def _warmup(client: Client) -> None:
    """Notes §3.1: a new target gets 100 × 1 MiB written, read (O_SYNC) and deleted (caller: unimpaired)."""
    warm = f"{mounts.MOUNT_POINT}/warmup"
    _prepare(client, iobench.PrepareSpec(dir=warm, size=1 << 20, files=100, threads=4))
    _micro(client, iobench.MicroSpec(dir=warm, op="read", size=1 << 20, files=100, form="sync"))
    client.shell.run(f"rm -rf {warm}", timeout=600)


def _write_mode(run: StorageRun) -> str:
    return "overwrite" if run.target == "swift" else "delete"  # notes §3.4


def _reheat(run: StorageRun, client: Client, link: EmulatedLink, where: str, files: int,
            threads: int, reason: str) -> float:  # fmt: skip
    """Read the set over the unimpaired link (the server's cache warm); its MiB/s: the guest's ceiling."""
    form = "default" if run.target == "swift" else "direct"
    heat = iobench.MicroSpec(dir=where, op="read", size=run.file_size, files=files, threads=threads,
                             form=form)  # fmt: skip
    with link.switched(link.profile.unimpaired(), reason):
        return _micro(client, heat).mib_s


def _round(run: StorageRun, client: Client, link: EmulatedLink, probe: CpuProbe | None,
           spec: iobench.MicroSpec, family: str, ceiling: float | None,
           from_launch: bool = False) -> dict[str, Any]:  # fmt: skip
    """One measured round: the tool's counts, the CPU, and the link's bytes from the tool's ``start``
    line on or, ``from_launch``, from its launch (its look-up of the directory and the file's
    deletion before a rewrite included)."""
    marks: dict[str, tuple[int, int]] = {}

    def on_line(ev: dict[str, Any]) -> None:
        if ev.get("event") == "start":
            marks["start"] = counters(link)

    client.cold()  # the host client's fresh mount; the guest's tool drops its cache itself
    launched = counters(link)  # the guest's ssh does not cross the link: what it counts is the mount's
    with maybe_phase(probe) as cpu:
        res = _micro(client, spec, on_line)
    end = counters(link)
    start = launched if from_launch else marks.get("start", end)
    link_bytes = end[1] - start[1]
    # Notes §6.2: the thesis also counted the cache-clean step after a round ([repo] bytes_clean):
    # what the client still owes the target, e.g. ext4 journaling the atime a read updated.
    client.shell.run("sync", timeout=900)
    clean = counters(link)
    return {"family": family, "op": spec.op, "form": spec.form, "file_size": spec.size, "files": spec.files,
            "threads": spec.threads, "mib_s": res.mib_s, "serviced": res.serviced, "failed": res.failed,
            "time_limit_hit": res.time_limit_hit, "seconds": res.internal_s, "bytes": res.bytes,
            "link_bytes": link_bytes, "link_packets": end[0] - start[0],
            "link_bytes_clean": clean[1] - end[1], "link_packets_clean": clean[0] - end[0],
            "cold_metadata": res.cold_metadata,
            "amplification": link_bytes / res.bytes if res.bytes else None,
            "first_error": res.first_error, "ceiling_mib_s": ceiling,
            "guest_bound": None if ceiling is None else res.mib_s >= GUEST_BOUND_FRACTION * ceiling,
            "cpu_client": cpu.get("cpu_client"), "cpu_server": cpu.get("cpu_server")}  # fmt: skip


def batch(run: StorageRun, client: Client, link: EmulatedLink, on_row: OnRow = None,
          probe: CpuProbe | None = None) -> list[dict[str, Any]]:  # fmt: skip
    """One round per thread count on a file set of ``set_bytes``; a row per round."""
    files = max(1, run.set_bytes // run.file_size)
    where = f"{mounts.MOUNT_POINT}/batch-{run.file_size}"
    with link.switched(link.profile.unimpaired(), "warm-up and read set"):
        if run.warmup:
            _warmup(client)
        _file_set(run, client, where, files)
    rows: list[dict[str, Any]] = []
    for threads in run.threads:
        ceiling = None
        if run.op == "read":
            reason = f"reheat before {threads} threads"
            ceiling = _reheat(run, client, link, where, files, REHEAT_THREADS, reason)
        spec = iobench.MicroSpec(dir=where, op=run.op, size=run.file_size, files=files, threads=threads,
                                 form=run.form, limit_s=run.limit_s, write_mode=_write_mode(run),
                                 drop_caches=client.drops_caches)  # fmt: skip
        row = _round(run, client, link, probe, spec, "batch", ceiling)
        rows.append(row)
        if on_row:
            on_row(row)
    return rows


def single(run: StorageRun, client: Client, link: EmulatedLink, on_row: OnRow = None,
           probe: CpuProbe | None = None) -> list[dict[str, Any]]:  # fmt: skip
    """One file of ``file_size`` read or written whole by one thread; amplification per file size."""
    where = f"{mounts.MOUNT_POINT}/single-{run.file_size}"
    own_fs = run.target == "iscsi"  # the client's own ext4: its metadata crosses the link as blocks
    with link.switched(link.profile.unimpaired(), "warm-up and file"):
        if run.warmup:
            _warmup(client)
        _file_set(run, client, where, 1, threads=1)
        if own_fs:
            client.shell.run(f"seq -f {where}/n%04g {NEIGHBOURS} | xargs touch", timeout=600)
    ceiling = _reheat(run, client, link, where, 1, 1, "reheat") if run.op == "read" else None
    remounted = False
    if own_fs:
        with link.switched(link.profile.unimpaired(), "remount"):
            remounted = mounts.remount_cold(client.shell)
    spec = iobench.MicroSpec(dir=where, op=run.op, size=run.file_size, files=1, threads=1, form=run.form,
                             limit_s=run.limit_s, write_mode=_write_mode(run),
                             drop_caches=client.drops_caches)  # fmt: skip
    # From the tool's launch: its first look-up after the remount reads the directory's metadata.
    row = _round(run, client, link, probe, spec, "single", ceiling, from_launch=True)
    row["remounted"] = remounted
    # Notes §3.5, §5.7: single-file amplification = bytes in both directions / file size, the
    # write-back of the cache-clean step included (the thesis' reads wrote 16 KiB back).
    row["amplification"] = (row["link_bytes"] + row["link_bytes_clean"]) / run.file_size
    if on_row:
        on_row(row)
    return [row]


def unit(run: StorageRun, client: Client, link: EmulatedLink, on_row: OnRow = None,
         probe: CpuProbe | None = None) -> list[dict[str, Any]]:  # fmt: skip
    """One file of ``file_size`` accessed in units of each of ``run.units``; a row per unit."""
    where = f"{mounts.MOUNT_POINT}/unit-{run.file_size}"
    with link.switched(link.profile.unimpaired(), "warm-up and file"):
        if run.warmup:
            _warmup(client)
        # Notes §3.3: before the sweep the whole file is written once (reads: and read once per round).
        _prepare(client, iobench.PrepareSpec(dir=where, size=run.file_size, files=1, threads=1))
    rows: list[dict[str, Any]] = []
    for size in run.units:
        ceiling = None
        if run.op == "read":
            ceiling = _reheat(run, client, link, where, 1, 1, f"reheat before unit {size}")
        spec = iobench.MicroSpec(dir=where, op=run.op, size=run.file_size, files=1, threads=1, form=run.form,
                                 unit=size, limit_s=run.limit_s, write_mode=_write_mode(run),
                                 drop_caches=client.drops_caches)  # fmt: skip
        row = _round(run, client, link, probe, spec, "unit", ceiling)
        row["unit"] = size
        rows.append(row)
        if on_row:
            on_row(row)
    return rows


MICRO = {"batch": batch, "single": single, "unit": unit}
