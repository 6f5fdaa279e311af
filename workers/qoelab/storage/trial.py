"""One storage benchmark run: the link, a target in the server namespace, the client guest, a family.

Thesis 001's method (notes §3): the client in the guest reaches the target across the emulated
link (``guest``); the target is started per run and torn down with it (``targets``); the family
runs the benchmark tool in the guest (``iobench``). The ``metadata`` family (notes §3.6, Ch. 5):
for each n, a fresh directory, then n × mkdir, n × touch, one ls, n × unlink, n × rmdir, with a
``sync`` closing each kind and the client's cache dropped between kinds; per kind the completion
time and the packets and bytes the link carried in both directions, read from the emulator's
counters at the tool's phase markers (as the thesis read them from a capture at the link).

The ``batch`` family (notes §3.3-§3.5, Ch. 4): a file set of ``set_bytes`` in files of ``file_size``
(access unit = file size), one round per thread count, each with the client's cache dropped and a
``limit_s`` time limit. Reads use a read set made beforehand; before each read round the server's
cache is reheated by reading the set with 32 threads over the unimpaired link (the thesis switched
its emulator off for that). Writes delete the previous round's files first (NFS, iSCSI) or
overwrite them (Swift). The warm-up of a new target (100 × 1 MiB written, read, deleted) also runs
unimpaired. Amplification = bytes on the link in both directions during the round / bytes the
application moved (for a batch the thesis divides line rate by throughput: the same ratio). The
reheat's own throughput is the guest's ceiling for that set with nothing emulated in the way; a read
round above ``GUEST_BOUND_FRACTION`` of it is marked ``guest_bound`` (writes have no such pass yet:
their mark is None).
"""

from __future__ import annotations

import contextlib
import functools
import logging
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from qoelab.emulation.profile import LinkProfile
from qoelab.emulation.topology import EmulatedLink, emulated_link
from qoelab.errors import ParameterError
from qoelab.storage import iobench, mounts
from qoelab.storage.guest import StorageGuest, client_guest
from qoelab.storage.nfs import nfs_target
from qoelab.storage.swift import swift_target
from qoelab.storage.targets import cleanup_leftovers, iscsi_target

log = logging.getLogger("qoelab.storage")

Target = Literal["nfs", "iscsi", "swift"]
TARGETS: tuple[str, ...] = ("nfs", "iscsi", "swift")
FAMILIES: tuple[str, ...] = ("metadata", "batch")
FORMS: tuple[str, ...] = ("direct", "sync", "default")
REHEAT_THREADS = 32  # [repo] the author's reheat read the set with 32 threads
# A round within this fraction of what the guest reads with no emulator in the way (the reheat) may
# be measuring the TCG guest, not the storage system (the "guest-bound" mark).
GUEST_BOUND_FRACTION = 0.8
GUEST_TOOL = "/usr/local/bin/storage-iobench"
META_N = (1, 10, 100, 1000)  # notes §3.6


@dataclass(frozen=True)
class StorageRun:
    """What one run does; the link's TCP (``profile.tcp``) is set in both namespaces and the guest."""

    target: Target
    family: str
    profile: LinkProfile
    meta_n: tuple[int, ...] = (1, 10, 100)
    scheduler: str = "mq-deadline"  # iSCSI: the guest's block scheduler (bfq stands in for CFQ)
    nfs_version: str = "4.2"
    swift_transfers: int = 4  # rclone's concurrent connections (CloudFuse's were several)
    lun_bytes: int = 1 << 30
    op: str = "read"  # batch
    form: str = "direct"  # batch: direct or sync for NFS/iSCSI; Swift only has default (notes §3.2)
    file_size: int = 1 << 20
    set_bytes: int = 64 << 20  # the thesis: 2 GiB (notes §3.4); smaller here so a sweep fits this host
    threads: tuple[int, ...] = (1, 4, 16)
    limit_s: float = 90.0
    warmup: bool = True
    accel: str = "auto"
    memory_mb: int = 1536

    def __post_init__(self) -> None:
        if self.target not in TARGETS:
            raise ParameterError("target", f"must be one of {', '.join(TARGETS)}, got {self.target!r}")
        if self.family not in FAMILIES:
            raise ParameterError("family", f"must be one of {', '.join(FAMILIES)} (the others are not "
                                 f"built yet), got {self.family!r}")  # fmt: skip
        if not self.meta_n or any(not 1 <= n <= 10_000 for n in self.meta_n):
            raise ParameterError("meta_n", f"each n must be 1..10000, got {list(self.meta_n)}")
        if self.op not in ("read", "write"):
            raise ParameterError("op", f"must be read or write, got {self.op!r}")
        if self.form not in FORMS:
            raise ParameterError("form", f"must be one of {', '.join(FORMS)}, got {self.form!r}")
        if self.target == "swift" and self.form != "default":
            raise ParameterError("form", "Swift through a FUSE client has only the default form (notes §3.2)")
        if not 512 <= self.file_size <= 1 << 30 or (self.form == "direct" and self.file_size % 512):
            raise ParameterError(
                "file_size", f"must be 512 B..1 GiB (a multiple of 512 for direct), got {self.file_size}"
            )
        if not self.file_size <= self.set_bytes <= 16 << 30:
            raise ParameterError("set_bytes", f"must be file_size..16 GiB, got {self.set_bytes}")
        if not self.threads or any(not 1 <= t <= 64 for t in self.threads):
            raise ParameterError("threads", f"each count must be 1..64, got {list(self.threads)}")


@dataclass
class StorageOutput:
    ops: list[dict[str, Any]] = field(default_factory=list)  # metadata: one row per (n, kind)
    rounds: list[dict[str, Any]] = field(default_factory=list)  # batch: one row per thread count
    mount: dict[str, Any] = field(default_factory=dict)
    target: dict[str, Any] = field(default_factory=dict)
    guest: dict[str, Any] = field(default_factory=dict)
    link: dict[str, Any] = field(default_factory=dict)


@contextlib.contextmanager
def _target(run: StorageRun, link: EmulatedLink, workdir: Path, prefix: str) -> Iterator[Any]:
    popen, runner = functools.partial(link.popen_in, "s"), functools.partial(link.run_in, "s")
    if run.target == "nfs":
        with nfs_target(popen, runner, link.server_ip, workdir, prefix, size_bytes=run.lun_bytes) as t:
            yield t
    elif run.target == "iscsi":
        with iscsi_target(popen, runner, link.server_ip, workdir, prefix, size_bytes=run.lun_bytes) as t:
            yield t
    else:
        with swift_target(popen, runner, link.server_ip, workdir, prefix) as t:
            yield t


def _mount(run: StorageRun, client: StorageGuest, target: Any, link: EmulatedLink) -> dict[str, Any]:
    if run.target == "nfs":
        return mounts.mount_nfs(client.shell, target, link.server_ip, run.nfs_version)
    if run.target == "iscsi":
        return mounts.mount_iscsi(client.shell, target, link.server_ip, run.scheduler)
    return mounts.mount_swift(client.shell, target, transfers=run.swift_transfers)


def _counters(link: EmulatedLink) -> tuple[int, int]:
    """Packets and bytes the emulator has taken in, both directions (what a capture at the link sees)."""
    stats = link.emulator.stats()
    return (
        sum(stats[d]["rx_packets"] for d in ("up", "down")),
        sum(stats[d]["rx_bytes"] for d in ("up", "down")),
    )


def metadata(run: StorageRun, client: StorageGuest, link: EmulatedLink,
             on_row: Callable[[dict[str, Any]], None] | None = None) -> list[dict[str, Any]]:  # fmt: skip
    """The metadata family for each n; a row per kind with its time, packets and bytes."""
    rows: list[dict[str, Any]] = []
    for n in run.meta_n:
        where = f"{mounts.MOUNT_POINT}/meta-{n}"
        client.shell.run(f"mkdir -p {where}", timeout=120)
        marks: dict[str, tuple[int, int]] = {}

        def on_line(ev: dict[str, Any], marks: dict[str, tuple[int, int]] = marks) -> None:
            if ev.get("event") == "phase":
                marks[f"{ev['kind']} {ev['edge']}"] = _counters(link)

        spec = iobench.MetaSpec(dir=where, n=n, drop_caches=True, markers=True)
        result = iobench.meta(spec, prefix=client.shell.prefix_argv(), tool=GUEST_TOOL, on_line=on_line,
                              timeout=600 + 10 * n)  # fmt: skip
        for op in result.ops:
            start, end = marks.get(f"{op.op} start"), marks.get(f"{op.op} end")
            row = {"op": op.op, "n": n, "done": op.done, "failed": op.failed, "seconds": op.seconds,
                   "ops_seconds": op.ops_seconds, "sync_seconds": op.sync_seconds,
                   "per_op_ms": op.seconds / max(op.n, 1) * 1e3,
                   "packets": None if not (start and end) else end[0] - start[0],
                   "bytes": None if not (start and end) else end[1] - start[1]}  # fmt: skip
            rows.append(row)
            if on_row:
                on_row(row)
        client.shell.run(f"rmdir {where}", timeout=120, check=False)
    return rows


def _micro(client: StorageGuest, spec: iobench.MicroSpec, on_line: Any = None) -> iobench.MicroResult:
    return iobench.micro(spec, prefix=client.shell.prefix_argv(), tool=GUEST_TOOL, on_line=on_line,
                         timeout=spec.limit_s + 900)  # fmt: skip


def batch(run: StorageRun, client: StorageGuest, link: EmulatedLink,
          on_row: Callable[[dict[str, Any]], None] | None = None) -> list[dict[str, Any]]:  # fmt: skip
    """One round per thread count on a file set of ``set_bytes``; a row per round."""
    files = max(1, run.set_bytes // run.file_size)
    where = f"{mounts.MOUNT_POINT}/batch-{run.file_size}"
    write_mode = "overwrite" if run.target == "swift" else "delete"
    reheat_form = "default" if run.target == "swift" else "direct"
    calm = link.profile.unimpaired()
    with link.switched(calm, "warm-up and read set"):
        if run.warmup:
            warm = f"{mounts.MOUNT_POINT}/warmup"
            iobench.prepare(iobench.PrepareSpec(dir=warm, size=1 << 20, files=100, threads=4),
                            prefix=client.shell.prefix_argv(), tool=GUEST_TOOL, timeout=900)  # fmt: skip
            _micro(client, iobench.MicroSpec(dir=warm, op="read", size=1 << 20, files=100, form="sync"))
            client.shell.run(f"rm -rf {warm}", timeout=600)
        if run.op == "read":
            iobench.prepare(iobench.PrepareSpec(dir=where, size=run.file_size, files=files),
                            prefix=client.shell.prefix_argv(), tool=GUEST_TOOL, timeout=3600)  # fmt: skip
    rows: list[dict[str, Any]] = []
    for threads in run.threads:
        ceiling: float | None = None
        if run.op == "read":
            heat = iobench.MicroSpec(dir=where, op="read", size=run.file_size, files=files,
                                     threads=REHEAT_THREADS, form=reheat_form)  # fmt: skip
            with link.switched(calm, f"reheat before {threads} threads"):
                ceiling = _micro(client, heat).mib_s
        marks: dict[str, tuple[int, int]] = {}

        def on_line(ev: dict[str, Any], marks: dict[str, tuple[int, int]] = marks) -> None:
            if ev.get("event") == "start":
                marks["start"] = _counters(link)

        spec = iobench.MicroSpec(dir=where, op=run.op, size=run.file_size, files=files, threads=threads,
                                 form=run.form, limit_s=run.limit_s, write_mode=write_mode,
                                 drop_caches=True)  # fmt: skip
        res = _micro(client, spec, on_line)
        end = _counters(link)
        start = marks.get("start", end)
        link_bytes = end[1] - start[1]
        row = {"family": "batch", "op": run.op, "form": run.form, "file_size": run.file_size, "files": files,
               "threads": threads, "mib_s": res.mib_s, "serviced": res.serviced, "failed": res.failed,
               "time_limit_hit": res.time_limit_hit, "seconds": res.internal_s, "bytes": res.bytes,
               "link_bytes": link_bytes, "link_packets": end[0] - start[0],
               "amplification": link_bytes / res.bytes if res.bytes else None,
               "first_error": res.first_error, "ceiling_mib_s": ceiling,
               "guest_bound": None if ceiling is None else res.mib_s >= GUEST_BOUND_FRACTION * ceiling,
               }  # fmt: skip
        rows.append(row)
        if on_row:
            on_row(row)
    return rows


def run_storage(run: StorageRun, prefix: str, workdir: Path,
                on_row: Callable[[dict[str, Any]], None] | None = None) -> StorageOutput:  # fmt: skip
    """Build everything, run the family, tear everything down (also when it fails)."""
    out = StorageOutput()
    started = time.monotonic()
    workdir.mkdir(parents=True, exist_ok=True)
    try:
        linkemu_log = workdir / "linkemu.log"
        with emulated_link(run.profile, prefix=prefix, backend="userspace", log_path=linkemu_log) as link, \
                _target(run, link, workdir / "server", prefix) as target, \
                client_guest(link, prefix, workdir / "guest", accel=run.accel, memory_mb=run.memory_mb,
                             tools=[iobench.binary()]) as client:  # fmt: skip
            out.target = dict(target.config)
            out.mount = _mount(run, client, target, link)
            out.guest = client.provenance()
            try:
                if run.family == "metadata":
                    out.ops = metadata(run, client, link, on_row)
                else:
                    out.rounds = batch(run, client, link, on_row)
            finally:
                mounts.unmount(client.shell)
            out.link = {**link.describe(), "profile": run.profile.summary()}
    finally:
        cleanup_leftovers(prefix)
    out.link["elapsed_s"] = round(time.monotonic() - started, 2)
    return out
