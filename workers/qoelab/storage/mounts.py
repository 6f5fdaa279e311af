"""Mounting a target in the client guest, and taking it down again; what was mounted is recorded.

One mount point, ``/mnt/qoelab``. NFS is the guest kernel's NFSv4 client (``vers`` a parameter;
Linux negotiates 4.2 by default, the thesis only says "version 4"). iSCSI is open-iscsi logging in
with the thesis' segment and burst lengths (notes §1.5; bursts at the largest the initiator
negotiates, 16,776,192 B), ext4 made with its inode tables written at once (lazy init would write
them in the background over iSCSI during the first rounds) and the chosen block scheduler (CFQ is
gone: ``bfq`` stands in for it, ``mq-deadline`` for deadline). Swift is ``rclone mount`` (FUSE),
the closest packaged relative of the thesis' CloudFuse: ``transfers`` is its number of concurrent
connections, and ``vfs_cache_mode`` ``off`` streams every open file to or from the proxy, so a
close waits for the upload as CloudFuse's did (``writes``/``full`` upload in the background after
close and need the local cache, which PostMark's seeks do). The options the kernel took are read
back (``findmnt``, ``iscsiadm -m session -P3``, the scheduler file) for the result's provenance.
"""

from __future__ import annotations

import shlex
import time
from typing import Any

from qoelab.errors import ParameterError
from qoelab.storage.nfs import PSEUDO, NfsTarget
from qoelab.storage.swift import SwiftTarget
from qoelab.storage.targets import IscsiTarget
from qoelab.vm.shell import GuestCommandError, Shell

MOUNT_POINT = "/mnt/qoelab"
NFS_VERSIONS = ("4.0", "4.1", "4.2")
SCHEDULERS = ("mq-deadline", "bfq", "none")  # bfq stands in for CFQ, mq-deadline for deadline
ISCSI_SEGMENT = 65536  # MaxRecvDataSegmentLength (thesis: 64 KB)
ISCSI_BURST = 16776192  # thesis: 64 MB; open-iscsi negotiates at most this (and silently less if asked more)


def mounted(shell: Shell) -> dict[str, str]:
    """What is mounted at the mount point: source, fstype, options (empty when nothing is)."""
    res = shell.run(f"findmnt -n -o SOURCE,FSTYPE,OPTIONS {MOUNT_POINT}", timeout=30, check=False)
    parts = res.stdout.split()
    return dict(zip(("source", "fstype", "options"), parts, strict=False)) if res.returncode == 0 else {}


def mount_nfs(shell: Shell, target: NfsTarget, server_ip: str, version: str = "4.2") -> dict[str, Any]:
    """The export at the mount point over NFSv4 ``version`` (TCP, the target's port)."""
    if version not in NFS_VERSIONS:
        raise ParameterError("nfs_version", f"must be one of {', '.join(NFS_VERSIONS)}, got {version!r}")
    options = f"vers={version},proto=tcp,port={target.port}"
    shell.run("modprobe nfsv4", timeout=60)
    shell.run(f"mkdir -p {MOUNT_POINT} && mount -t nfs4 -o {options} {server_ip}:{PSEUDO} {MOUNT_POINT}",
              timeout=90)  # fmt: skip
    return {"target": "nfs", "asked": options, **mounted(shell)}


def mount_iscsi(shell: Shell, target: IscsiTarget, server_ip: str, scheduler: str = "mq-deadline",
                port: int = 3260) -> dict[str, Any]:  # fmt: skip
    """Log in to the target's LUN, make ext4 on it and mount it with ``scheduler`` on the disk."""
    if scheduler not in SCHEDULERS:
        raise ParameterError("scheduler", f"must be one of {', '.join(SCHEDULERS)}, got {scheduler!r}")
    portal, iqn = f"{server_ip}:{port}", shlex.quote(target.iqn)
    shell.run("modprobe -a iscsi_tcp bfq", timeout=60)
    shell.run(f"iscsiadm -m discovery -t sendtargets -p {portal} -o new", timeout=60)
    node = f"iscsiadm -m node -T {iqn} -p {portal} -o update"
    for name, value in (("node.conn[0].iscsi.MaxRecvDataSegmentLength", ISCSI_SEGMENT),
                        ("node.session.iscsi.FirstBurstLength", ISCSI_BURST),
                        ("node.session.iscsi.MaxBurstLength", ISCSI_BURST)):  # fmt: skip
        shell.run(f"{node} -n {name} -v {value}", timeout=30)
    shell.run(f"iscsiadm -m node -T {iqn} -p {portal} --login && udevadm settle", timeout=120)
    session = shell.run("iscsiadm -m session -P3", timeout=30).stdout
    disks = [line.split()[3] for line in session.splitlines() if "Attached scsi disk" in line]
    if not disks:
        raise GuestCommandError(f"logged in to {target.iqn} but no disk appeared: {session[-300:]}")
    dev = disks[0]
    shell.run(f"echo {scheduler} > /sys/block/{dev}/queue/scheduler", timeout=30)
    shell.run(f"mkfs.ext4 -q -F -E lazy_itable_init=0,lazy_journal_init=0 /dev/{dev} && "
              f"mkdir -p {MOUNT_POINT} && mount /dev/{dev} {MOUNT_POINT}", timeout=600)  # fmt: skip
    chosen = shell.run(f"cat /sys/block/{dev}/queue/scheduler", timeout=30).stdout.strip()
    negotiated = {k: int(v) for k, v in (
        (line.split(":")[0].strip(), line.split(":")[1].strip()) for line in session.splitlines()
        if line.strip().split(":")[0] in ("MaxRecvDataSegmentLength", "FirstBurstLength", "MaxBurstLength")
    ) if v.isdigit()}  # fmt: skip
    return {"target": "iscsi", "device": dev, "scheduler": chosen, "negotiated": negotiated,
            "filesystem": "ext4 (mkfs defaults, inode tables written at once)", **mounted(shell)}  # fmt: skip


VFS_CACHE_MODES = ("off", "minimal", "writes", "full")


def mount_swift(shell: Shell, target: SwiftTarget, container: str = "qoelab", transfers: int = 4,
                vfs_cache_mode: str = "off", timeout_s: float = 60.0,
                home: str = "/root") -> dict[str, Any]:  # fmt: skip
    """The container at the mount point through ``rclone mount`` (created if missing); rclone's
    configuration and log in ``home`` (the guest's root, or a host client's work directory)."""
    if vfs_cache_mode not in VFS_CACHE_MODES:
        raise ParameterError(
            "vfs_cache_mode", f"must be one of {', '.join(VFS_CACHE_MODES)}, got {vfs_cache_mode!r}"
        )
    if not 1 <= transfers <= 64:
        raise ParameterError("transfers", f"must be 1..64 connections, got {transfers}")
    conf, log_file = shlex.quote(f"{home}/rclone.conf"), shlex.quote(f"{home}/rclone.log")
    rclone = f"rclone --config {conf}"
    text = (f"[swift]\ntype = swift\nuser = {target.user}\nkey = {target.key}\n"
            f"auth = {target.auth_url}\n")  # fmt: skip
    shell.run(f"mkdir -p {shlex.quote(home)} {MOUNT_POINT} && cat > {conf}", stdin=text.encode())
    shell.run(f"{rclone} mkdir swift:{shlex.quote(container)}", timeout=60)
    flags = (f"--vfs-cache-mode {vfs_cache_mode} --transfers {transfers} --checkers {transfers} "
             f"--log-file {log_file} --log-level INFO")  # fmt: skip
    # setsid and no inherited descriptors: the daemon would otherwise hold the ssh session open.
    shell.run(f"setsid {rclone} mount swift:{shlex.quote(container)} {MOUNT_POINT} --daemon {flags} "
              "</dev/null >/dev/null 2>&1", timeout=60)  # fmt: skip
    deadline = time.monotonic() + timeout_s
    while not mounted(shell):
        if time.monotonic() > deadline:
            log = shell.run(f"tail -5 {log_file}", timeout=30, check=False).stdout.strip()
            raise GuestCommandError(
                f"rclone mount of {target.endpoint} did not appear within {timeout_s:g} s: {log}"
            )
        time.sleep(0.5)
    version = shell.run("rclone version | head -1", timeout=30).stdout.strip()
    return {"target": "swift", "client": version, "container": container, "transfers": transfers,
            "vfs_cache_mode": vfs_cache_mode, **mounted(shell)}  # fmt: skip


def remount_cold(shell: Shell) -> bool:
    """Unmount and mount again a block-device file system, so the client keeps none of its metadata.

    A cache drop leaves ext4's metadata of a file used seconds before partly cached; only a remount
    made it cold every time (docs/storage-bench.md, "What a cache drop leaves of ext4's metadata").
    NFS and rclone hold no file system of their own in the guest: False, nothing done.
    """
    now = mounted(shell)
    if now.get("fstype") != "ext4":
        return False
    q = shlex.quote(MOUNT_POINT)
    # flushbufs: the device's own cache of the metadata blocks outlives the unmount while anything
    # else holds the device open. The sync commits what mounting journals (the superblock's mount
    # time and count) now, not in the caller's next measured step.
    dev = shlex.quote(now["source"])
    shell.run(f"umount {q} && blockdev --flushbufs {dev} && mount -o {shlex.quote(now['options'])} {dev} {q} "
              "&& sync", timeout=120)  # fmt: skip
    return True


def unmount(shell: Shell) -> None:
    """Unmount whatever is at the mount point (lazily if it is busy) and log out of iSCSI sessions."""
    if mounted(shell):
        q = shlex.quote(MOUNT_POINT)
        shell.run(f"umount {q} || umount -l {q}", timeout=90)
    shell.run("iscsiadm -m session >/dev/null 2>&1 && iscsiadm -m node --logoutall=all || true", timeout=60)
