"""The storage benchmark's targets, one context manager per kind, and their cleanup by prefix.

``nfs_target`` (nfs-ganesha, ``nfs.py``), ``swift_target`` (Swift all-in-one, ``swift.py``) and
``iscsi_target`` (tgt with a file-backed LUN: the APT job's target with the thesis' parameters)
each yield an object with ``endpoint``, ``config`` (versions, config text, export/target settings:
the result's provenance), ``log_tail()`` and ``stop()``. All are started through a caller-given
``popen``/``run`` (the server namespace) and carry the link's prefix marker.

The thesis' iSCSI target (notes §1.5) had 1024-byte logical blocks, MaxRecvDataSegmentLength
65536 and First/MaxBurstLength 64 MiB. iSCSI allows at most 2**24 - 1 for both burst lengths
(RFC 7143, 13.13–13.14), so they are 16777215 here; ``config["thesis_differences"]`` says so.
"""

from __future__ import annotations

import contextlib
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil

from qoelab.apt import targets as apt_targets
from qoelab.apt.targets import ISCSI_MAX_BURST, TargetError
from qoelab.emulation.system import ENV_MARK, find_tool, kill_processes
from qoelab.errors import ParameterError
from qoelab.storage import diskrate
from qoelab.storage.base import KINDS, Popen, Run, StorageTarget, instance_dir, our_mounts, run_here, unmount
from qoelab.storage.nfs import NfsTarget, nfs_target
from qoelab.storage.swift import SwiftTarget, swift_target

ISCSI_PORT = 3260
THESIS_ISCSI = {
    "block_size": 1024,
    "MaxRecvDataSegmentLength": 65536,
    "FirstBurstLength": 64 << 20,
    "MaxBurstLength": 64 << 20,
}
SERVER_NAMES = ("ganesha.nfsd", "tgtd", "memcached", "fuse2fs")


class IscsiTarget(StorageTarget):
    kind = "iscsi"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.tgt: apt_targets.IscsiTarget | None = None
        self.iqn = ""

    def stop(self) -> None:
        if self.tgt is not None:
            self.tgt.stop()
        super().stop()


@contextlib.contextmanager
def iscsi_target(
    popen: Popen,
    run: Run | None,
    ip: str,
    workdir: Path | None,
    prefix: str,
    *,
    port: int = ISCSI_PORT,
    size_bytes: int = 256 << 20,
    block_size: int = THESIS_ISCSI["block_size"],
    max_recv_data_segment_length: int = THESIS_ISCSI["MaxRecvDataSegmentLength"],
    first_burst_length: int = THESIS_ISCSI["FirstBurstLength"],
    max_burst_length: int = THESIS_ISCSI["MaxBurstLength"],
    control_port: int | None = None,
    keep_files: bool = False,
    ready_timeout_s: float = 15.0,
) -> Iterator[IscsiTarget]:
    """tgtd with LUN 1 on a fresh (sparse) file of ``size_bytes``, on ``iscsi://ip:port/<iqn>/1``.

    Burst lengths above the protocol's 16777215 are served as 16777215 (and recorded as such).
    """
    if block_size not in (512, 1024, 2048, 4096):
        raise ParameterError("block_size", f"must be 512, 1024, 2048 or 4096, got {block_size!r}")
    if not isinstance(size_bytes, int) or size_bytes < 1 << 20 or size_bytes % block_size:
        raise ParameterError(
            "size_bytes", f"must be at least 1 MiB and a multiple of {block_size}, got {size_bytes!r}"
        )
    if not 512 <= max_recv_data_segment_length <= ISCSI_MAX_BURST:
        raise ParameterError("max_recv_data_segment_length", f"must be 512 to {ISCSI_MAX_BURST}")
    asked = {"FirstBurstLength": first_burst_length, "MaxBurstLength": max_burst_length}
    served = {name: min(value, ISCSI_MAX_BURST) for name, value in asked.items()}
    if served["FirstBurstLength"] > served["MaxBurstLength"]:
        raise ParameterError("first_burst_length", "must not exceed max_burst_length")
    params: dict[str, int | str] = {"MaxRecvDataSegmentLength": max_recv_data_segment_length, **served}
    target = IscsiTarget(prefix, instance_dir(prefix, "iscsi", workdir), keep_files)
    try:
        lun = target.directory / "lun.img"
        with open(lun, "wb") as f:
            f.truncate(size_bytes)
        log = target.directory / "tgtd.log"
        target.logs["tgtd"] = log
        control = control_port or apt_targets.free_control_port()
        target.tgt = apt_targets.iscsi_target(
            popen,
            run,
            ip,
            port,
            None,
            prefix,
            control,
            log_path=log,
            ready_timeout_s=ready_timeout_s,
            backing_file=lun,
            block_size=block_size,
            target_params=params,
        )
    except TargetError as err:
        detail = target.log_tail()
        target.stop()
        raise TargetError(str(err) if not detail or detail in str(err) else f"{err}: {detail}") from None
    except BaseException:
        target.stop()
        raise
    target.iqn = target.tgt.iqn
    target.endpoint = target.tgt.uri
    differences = {
        n: f"{asked[n]} asked, {served[n]} served (iSCSI maximum)" for n in asked if asked[n] != served[n]
    }
    version = run_here([find_tool("tgtadm", "tgt"), "-V"]).stdout.strip()
    shown = (run or run_here)(
        [
            find_tool("tgtadm", "tgt"),
            "-C",
            str(control),
            "--lld",
            "iscsi",
            "--op",
            "show",
            "--mode",
            "target",
        ],
        timeout=10,
    )
    target.config.update(
        server="tgtd",
        version=version,
        address=ip,
        port=port,
        iqn=target.iqn,
        backing_store="rdwr",
        backing_file=str(lun),
        size_bytes=size_bytes,
        block_size=block_size,
        target_params=params,
        thesis_differences=differences,
        target_show=shown.stdout,
    )
    try:
        yield target
    finally:
        target.stop()


def _is_ours(proc: psutil.Process, prefix: str) -> bool:
    try:
        if not (proc.environ().get(ENV_MARK) or "").startswith(prefix):
            return False
        line = " ".join(proc.cmdline())
        return proc.name() in SERVER_NAMES or ("swift-" in line and "-server" in line)
    except (psutil.Error, OSError):
        return False


def find_servers(prefix: str) -> list[psutil.Process]:
    """ganesha, tgtd, memcached, fuse2fs and Swift server processes marked with ``prefix``."""
    me = psutil.Process().pid
    return [p for p in psutil.process_iter() if p.pid != me and _is_ours(p, prefix)]


def cleanup_leftovers(prefix: str, roots: tuple[Path, ...] = ()) -> list[str]:
    """What a killed trial under ``prefix`` left: server processes, then mounts, then directories.

    Directories are looked for in the temp dir and ``roots`` (the trials' work dirs); mounts
    anywhere. tgtd's sockets and the APT-style work dirs go through the APT cleanup.
    """
    import logging
    import tempfile

    removed = kill_processes(find_servers(prefix), logging.getLogger(__name__))
    removed += diskrate.cleanup_leftovers(prefix)
    for point in our_mounts(prefix):
        if unmount(point):
            removed.append(f"mount {point}")
    removed += apt_targets.cleanup_leftovers(prefix)
    for path in Path(tempfile.gettempdir()).glob(f"qssh-{prefix}*"):  # the guest shell's ssh sockets
        if path.is_dir():
            shutil.rmtree(path, ignore_errors=True)
            removed.append(str(path))
    for root in {Path(tempfile.gettempdir()), *map(Path, roots)}:
        for kind in (*KINDS, "iscsi"):
            for path in root.glob(f"qoelab-{prefix}*-{kind}-*"):
                if path.is_dir() and not our_mounts(prefix):
                    subprocess.run(["rm", "-rf", "--one-file-system", str(path)], check=False)
                    removed.append(str(path))
    return removed


__all__ = [
    "IscsiTarget",
    "NfsTarget",
    "StorageTarget",
    "SwiftTarget",
    "TargetError",
    "cleanup_leftovers",
    "find_servers",
    "iscsi_target",
    "nfs_target",
    "swift_target",
]
