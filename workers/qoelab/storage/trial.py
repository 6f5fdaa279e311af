"""One storage benchmark run: the link, a target in the server namespace, the client guest, a family.

Thesis 001's method (notes §3): the client in the guest reaches the target across the emulated
link (``guest``); the target is started per run and torn down with it (``targets``); the family
runs the benchmark tool in the guest (``iobench``). The ``metadata`` family (notes §3.6, Ch. 5):
for each n, a fresh directory, then n × mkdir, n × touch, one ls, n × unlink, n × rmdir, with a
``sync`` closing each kind and the client's cache dropped between kinds; per kind the completion
time and the packets and bytes the link carried in both directions, read from the emulator's
counters at the tool's phase markers (as the thesis read them from a capture at the link).
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
FAMILIES: tuple[str, ...] = ("metadata",)
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


@dataclass
class StorageOutput:
    ops: list[dict[str, Any]] = field(default_factory=list)  # metadata: one row per (n, kind)
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
                out.ops = metadata(run, client, link, on_row)
            finally:
                mounts.unmount(client.shell)
            out.link = {**link.describe(), "profile": run.profile.summary()}
    finally:
        cleanup_leftovers(prefix)
    out.link["elapsed_s"] = round(time.monotonic() - started, 2)
    return out
