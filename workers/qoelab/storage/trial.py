"""One storage benchmark run: the link, a target in the server namespace, the client guest, a family.

Thesis 001's method (notes §3): the client in the guest reaches the target across the emulated
link (``guest``); the target is started per run and torn down with it (``targets``); the family
runs in the guest, or for Swift with ``swift_client = host`` in the link's client namespace on the
host (``hostclient``: rclone without the guest's CPU ceiling). The families live in ``families``
(``metadata``, ``batch``, ``single``, ``unit``: the thesis' microbenchmark and metadata benchmark,
notes §3, Ch. 4-5) and ``macro`` (``postmark``, ``varmail``, ``fileserver``: Ch. 6, notes §4).
Every family also records the client's CPU busy fraction and the server processes' CPU seconds
(``measure.CpuProbe``): per round for the microbenchmark families (``cpu_client``, ``cpu_server``),
in ``StorageOutput.cpu`` for the others.
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

from qoelab.emulation import linklog
from qoelab.emulation.profile import LinkProfile
from qoelab.emulation.reuse import verify_condition
from qoelab.emulation.topology import EmulatedLink, emulated_link
from qoelab.errors import ParameterError
from qoelab.storage import capture, diskrate, iobench, mounts
from qoelab.storage.families import GUEST_BOUND_FRACTION, MICRO, REHEAT_THREADS, batch, metadata
from qoelab.storage.guest import StorageGuest, client_guest
from qoelab.storage.hostclient import HostClient, host_client
from qoelab.storage.macro import MACRO, run_macro
from qoelab.storage.measure import GUEST_TOOL, CpuProbe, disk_baseline
from qoelab.storage.nfs import nfs_target
from qoelab.storage.swift import swift_target
from qoelab.storage.targets import cleanup_leftovers, find_servers, iscsi_target

log = logging.getLogger("qoelab.storage")
# The families moved to ``families`` and ``macro``; their names stay importable from here.
__all__ = ["FAMILIES", "GUEST_BOUND_FRACTION", "GUEST_TOOL", "REHEAT_THREADS", "StorageOutput", "StorageRun",
           "batch", "metadata", "run_storage"]  # fmt: skip

Target = Literal["nfs", "iscsi", "swift"]
Client = StorageGuest | HostClient
TARGETS: tuple[str, ...] = ("nfs", "iscsi", "swift")
FAMILIES: tuple[str, ...] = ("metadata", "batch", "single", "unit", "postmark", "varmail", "fileserver")
FORMS: tuple[str, ...] = ("direct", "sync", "default")
# unit: every other step of the author's 4K, 16K, ..., 16M sweep (notes §3.3)
UNITS = (4096, 65536, 1 << 20, 16 << 20)
META_N = (1, 10, 100, 1000)  # notes §3.6
SWIFT_CLIENTS = ("guest", "host")
HOST_FAMILIES = ("batch", "single", "unit")  # the micro families: the benchmark tool runs on the host too


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
    swift_client: str = "guest"  # Swift: rclone in the guest, or on the host (``hostclient``)
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
    guest_start: str = "snapshot"  # the client guest: restored from the host's saved state, or "cold"
    units: tuple[int, ...] = UNITS  # unit: access units swept over one file of file_size (thesis: 16 MiB)
    postmark_transactions: int = 25000  # postmark: the thesis' 25000 (notes §4.1)
    postmark_files: int = 500  # postmark: the thesis' 500 (notes §4.1)
    macro_seconds: float = 120.0  # varmail, fileserver: run phase (the thesis read IOPS after 120 s)
    swift_cache_mode: str | None = None  # rclone --vfs-cache-mode; None: off, writes for the macro families
    macro_files: int | None = None  # varmail, fileserver: files (None: the personality's 1000 / 10000)
    verify_s: float | None = None  # verify the emulated link first (qoelab.emulation.reuse), this long
    verified_links: Path | None = None  # where full verifications are kept for later runs of the condition
    disk_rate: diskrate.DiskRate | None = None  # the servers' disk I/O throttled (the thesis' HDD: 110/100)
    capture_path: Path | None = None  # a pcap of the link's server side (headers), for the whole run

    def __post_init__(self) -> None:
        if self.target not in TARGETS:
            raise ParameterError("target", f"must be one of {', '.join(TARGETS)}, got {self.target!r}")
        if self.family not in FAMILIES:
            raise ParameterError("family", f"must be one of {', '.join(FAMILIES)}, got {self.family!r}")
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
        if not self.units or any(not 512 <= u <= 1 << 30 for u in self.units):
            raise ParameterError("units", f"each unit must be 512 B..1 GiB, got {list(self.units)}")
        if self.form == "direct" and any(u % 512 for u in self.units):
            raise ParameterError("units", f"each a multiple of 512 for direct, got {list(self.units)}")
        if self.family == "unit" and max(self.units) > self.file_size:
            raise ParameterError(
                "units", f"each unit must be at most file_size ({self.file_size}), got {list(self.units)}"
            )
        if not 1 <= self.postmark_transactions <= 10_000_000:
            raise ParameterError(
                "postmark_transactions", f"must be 1..10000000, got {self.postmark_transactions}"
            )
        if not 1 <= self.postmark_files <= 1_000_000:
            raise ParameterError("postmark_files", f"must be 1..1000000, got {self.postmark_files}")
        if not 1 <= self.macro_seconds <= 86400:
            raise ParameterError("macro_seconds", f"must be 1..86400 s, got {self.macro_seconds:g}")
        if self.macro_files is not None and not 10 <= self.macro_files <= 1_000_000:
            raise ParameterError("macro_files", f"must be 10..1000000, got {self.macro_files}")
        if self.swift_cache_mode is not None and self.swift_cache_mode not in mounts.VFS_CACHE_MODES:
            raise ParameterError("swift_cache_mode", f"must be one of {', '.join(mounts.VFS_CACHE_MODES)}, "
                                 f"got {self.swift_cache_mode!r}")  # fmt: skip
        if self.swift_client not in SWIFT_CLIENTS:
            raise ParameterError("swift_client", f"must be one of {', '.join(SWIFT_CLIENTS)}, "
                                 f"got {self.swift_client!r}")  # fmt: skip
        if self.swift_client == "host" and (self.target != "swift" or self.family not in HOST_FAMILIES):
            raise ParameterError("swift_client", "host runs only Swift's client (this kernel has no NFS "
                                 f"client or iSCSI initiator) and only {', '.join(HOST_FAMILIES)} (the "
                                 "others' tools are the guest's), got target "
                                 f"{self.target}, family {self.family}")  # fmt: skip
        postmark_on_swift = self.family == "postmark" and self.target == "swift"
        if postmark_on_swift and self.rclone_cache_mode in ("off", "minimal"):
            raise ParameterError("swift_cache_mode", "PostMark appends to and rewrites files: rclone needs "
                                 f"writes or full, got {self.swift_cache_mode!r}")  # fmt: skip

    @property
    def rclone_cache_mode(self) -> str:
        """rclone's --vfs-cache-mode: off streams like CloudFuse; the macrobenchmarks append and seek."""
        if self.swift_cache_mode is not None:
            return self.swift_cache_mode
        return "writes" if self.family in MACRO else "off"


@dataclass
class StorageOutput:
    ops: list[dict[str, Any]] = field(default_factory=list)  # metadata: one row per (n, kind)
    rounds: list[dict[str, Any]] = field(default_factory=list)  # batch, single, unit: one row per round
    mount: dict[str, Any] = field(default_factory=dict)
    target: dict[str, Any] = field(default_factory=dict)
    guest: dict[str, Any] = field(default_factory=dict)
    link: dict[str, Any] = field(default_factory=dict)
    macro: dict[str, Any] = field(default_factory=dict)  # postmark, varmail, fileserver: their result
    cpu: dict[str, Any] = field(default_factory=dict)  # metadata and macro: client busy, server CPU seconds


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


def _mount(run: StorageRun, client: Client, target: Any, link: EmulatedLink) -> dict[str, Any]:
    if run.target == "nfs":
        return mounts.mount_nfs(client.shell, target, link.server_ip, run.nfs_version)
    if run.target == "iscsi":
        return mounts.mount_iscsi(client.shell, target, link.server_ip, run.scheduler)
    return mounts.mount_swift(client.shell, target, transfers=run.swift_transfers,
                              vfs_cache_mode=run.rclone_cache_mode, home=client.home)  # fmt: skip


def run_storage(run: StorageRun, prefix: str, workdir: Path,
                on_row: Callable[[dict[str, Any]], None] | None = None) -> StorageOutput:  # fmt: skip
    """Build everything, run the family, tear everything down (also when it fails)."""
    out = StorageOutput()
    started = time.monotonic()
    workdir.mkdir(parents=True, exist_ok=True)
    try:
        linkemu_log = workdir / "linkemu.log"
        with emulated_link(run.profile, prefix=prefix, backend="userspace", log_path=linkemu_log,
                           link_log=workdir / linklog.ARTIFACT) as link:  # fmt: skip
            verification = None
            if run.verify_s:
                verification = verify_condition(link, run.verify_s, run.verified_links)
            (workdir / "server").mkdir(exist_ok=True)
            with contextlib.ExitStack() as stack:
                throttle = None
                if run.disk_rate is not None:
                    throttle = stack.enter_context(
                        diskrate.throttled(prefix, workdir / "server", run.disk_rate)
                    )
                baseline = disk_baseline(workdir / "server", wrap=throttle.wrap if throttle else None)
                target = stack.enter_context(_target(run, link, workdir / "server", prefix))
                if throttle is not None:  # the target's servers, started just now; their children follow
                    throttle.add(p.pid for p in find_servers(prefix))
                if run.capture_path is not None:
                    stack.enter_context(capture.link_capture(link, run.capture_path, prefix))
                client = stack.enter_context(_client(run, link, prefix, workdir))
                _run_family(run, out, link, target, client, prefix, on_row)
                if throttle is not None:
                    out.target["disk_rate"] = throttle.describe()
            out.target["disk_baseline"] = baseline
            if run.capture_path is not None and out.ops:  # the capture is closed: decode its requests
                capture.per_kind(out.ops, capture.requests(run.capture_path, run.target))
            if verification is not None:
                out.link["verification"] = verification
    finally:
        cleanup_leftovers(prefix)
    out.link["elapsed_s"] = round(time.monotonic() - started, 2)
    return out


def _client(run: StorageRun, link: EmulatedLink, prefix: str, workdir: Path) -> Any:
    """The client's context: the guest, or for ``swift_client = host`` rclone in the client namespace."""
    if run.swift_client == "host":
        return host_client(link, prefix, workdir / "client")
    return client_guest(link, prefix, workdir / "guest", accel=run.accel, memory_mb=run.memory_mb,
                        tools=[iobench.binary()], start=run.guest_start)  # fmt: skip


def _run_family(run: StorageRun, out: StorageOutput, link: EmulatedLink, target: Any, client: Client,
                prefix: str, on_row: Callable[[dict[str, Any]], None] | None) -> None:  # fmt: skip
    """Mount, run the family into ``out``, unmount (also when it fails)."""
    out.target = dict(target.config)
    out.mount = _mount(run, client, target, link)
    if isinstance(client, HostClient):
        client.remount = lambda: (mounts.unmount(client.shell), _mount(run, client, target, link))
    out.guest = client.provenance()
    probe = CpuProbe(client.shell, prefix, target, client_source=client.cpu_source)
    try:
        if run.family == "metadata":
            with probe.phase() as cpu:
                out.ops = metadata(run, client, link, on_row)
            out.cpu = cpu
        elif run.family in MICRO:
            out.rounds = MICRO[run.family](run, client, link, on_row, probe)
        else:
            out.macro = run_macro(run, client, link, probe)
            out.cpu = out.macro.get("cpu", {})
    finally:
        mounts.unmount(client.shell)
    out.link = {**link.describe(), "profile": run.profile.summary()}
