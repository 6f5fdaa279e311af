"""The storage benchmark's capabilities (thesis 001): the client guest (a VM with root's key and
the benchmark tool), each target's servers, Swift's client on the host (rclone and FUSE), and the
guest disk's rate limit.

Without a guest the job type cannot run here; the VM probe (``qoelab.vm.capability``) runs first.
"""

from __future__ import annotations

from qoelab import helpers
from qoelab.jobtype import HostProbe
from qoelab.storage import hostclient
from qoelab.storage.diskrate import unavailable
from qoelab.vm.image import load_image


def _guest_unusable(vm_ok: bool) -> str:
    if not vm_ok:
        return "no QEMU guest can run here (see vm)"
    if not helpers.STORAGE_IOBENCH.available():
        return helpers.STORAGE_IOBENCH.not_built
    try:
        if not (load_image().directory / "root-key").is_file():
            return "the guest image has no root key: rebuild it with 'make vm-image'"
    except Exception as err:  # an unreadable image is a reason, not a crash of the heartbeat
        return f"the guest image cannot be read: {err}"
    return ""


def probe(found: HostProbe) -> None:
    guest_why = _guest_unusable(found.caps.get("vm", False))
    found.set("storage.guest", not guest_why, guest_why)
    for cap, programs, package in (
        ("storage.nfs", ("ganesha.nfsd",), "nfs-ganesha"),
        ("storage.iscsi", ("tgtd", "tgtadm"), "tgt"),
        ("storage.swift", ("swift-proxy-server", "swift-object-server", "memcached"), "swift-proxy"),
    ):
        missing = found.missing(programs)
        found.set(
            cap,
            not missing,
            f"{' and '.join(missing)} not installed (Debian package '{package}' and its peers)",
        )
    host_why = hostclient.unusable()
    found.set("storage.swift_host", not host_why, f"swift_client = host: {host_why}")
    why_not = unavailable()
    found.set("storage.disk_rate", found.caps["storage.guest"] and not why_not,
              f"disk_rate: {why_not}" if why_not else f"disk_rate needs the guest: {guest_why}")  # fmt: skip
