"""Remove what trials left behind: processes, namespaces (with their links and qdiscs), devices.

Found by name prefix: namespaces ``<prefix>...``, root-namespace devices ``<prefix>...``, and
processes that live in one of those namespaces, carry ``QOELAB_LINK_PREFIX=<prefix>...`` in their
environment, or are a known tool whose arguments name one of our namespaces (the emulator).
A worker runs ``cleanup_leftovers("ql")`` at start-up; only one worker per host may do that.
"""

from __future__ import annotations

import logging
import os
import re

import psutil
from pyroute2 import netns
from pyroute2.netlink.exceptions import NetlinkError

from qoelab.emulation.system import ENV_MARK, NETNS_DIR, iproute_in, kill_processes, require_net_admin

log = logging.getLogger("qoelab.emulation.cleanup")

# Programs whose command line may name our namespaces without running inside them.
_TOOLS = {"linkemu", "qoelab-linkemu", "iperf3", "ping", "ip", "nsenter", "tcpdump", "dumpcap", "tshark"}
_PREFIX_OK = re.compile(r"^[a-z][a-z0-9]{1,12}$")


def _namespaces(prefix: str) -> list[str]:
    try:
        names = netns.listnetns()
    except OSError:
        return []
    return sorted(n for n in names if n.startswith(prefix))


def _protected_pids() -> set[int]:
    me = psutil.Process()
    return {me.pid, *(p.pid for p in me.parents())}


def _net_inode(pid: int) -> int | None:
    try:
        link = os.readlink(f"/proc/{pid}/ns/net")  # "net:[4026532290]"
    except OSError:
        return None
    return int(link[5:-1])


def _matches(proc: psutil.Process, prefix: str, inodes: set[int], names: set[str]) -> bool:
    if _net_inode(proc.pid) in inodes:
        return True
    try:
        mark = proc.environ().get(ENV_MARK)
        if mark is not None and mark.startswith(prefix):
            return True
        if proc.name() in _TOOLS:
            for arg in proc.cmdline():
                token = arg.split("=", 1)[-1]
                if token in names or (token.startswith(prefix) and re.fullmatch(r"[a-z0-9]+[cs]", token)):
                    return True
    except (psutil.Error, OSError):
        return False
    return False


def find_processes(prefix: str) -> list[psutil.Process]:
    """Processes that belong to trials with this prefix (never this process or its parents)."""
    names = set(_namespaces(prefix))
    inodes = {(NETNS_DIR / n).stat().st_ino for n in names if (NETNS_DIR / n).exists()}
    protected = _protected_pids()
    found = []
    for proc in psutil.process_iter():
        if proc.pid in protected:
            continue
        if _matches(proc, prefix, inodes, names):
            found.append(proc)
    return found


def find_devices(prefix: str) -> list[str]:
    """Devices in the root namespace whose names start with the prefix (taps, half-made veths)."""
    try:
        with iproute_in() as ipr:
            return sorted(
                n for link in ipr.get_links() if (n := link.get_attr("IFLA_IFNAME") or "").startswith(prefix)
            )
    except (OSError, NetlinkError):
        return []


def leftovers(prefix: str) -> dict[str, list[str]]:
    """What cleanup would remove, without removing it."""
    return {
        "namespaces": _namespaces(prefix),
        "devices": find_devices(prefix),
        "processes": [f"{p.pid} {p.name()}" for p in find_processes(prefix) if p.is_running()],
    }


def cleanup_leftovers(prefix: str = "ql") -> list[str]:
    """Kill our processes, delete our namespaces and root-namespace devices; return what went."""
    if not _PREFIX_OK.fullmatch(prefix):
        raise ValueError(
            f"prefix must be 2-13 lowercase letters/digits starting with a letter, got {prefix!r}"
        )
    require_net_admin()
    removed: list[str] = kill_processes(find_processes(prefix), log)
    # Deleting a namespace deletes its devices and their qdiscs; TUN devices go with their process.
    for name in _namespaces(prefix):
        try:
            netns.remove(name)
            removed.append(f"netns {name}")
        except OSError as err:
            log.warning("cannot remove namespace %s: %s", name, err)
    devices = find_devices(prefix)
    if devices:
        with iproute_in() as ipr:
            for name in devices:
                try:
                    ipr.link("del", ifname=name)
                    removed.append(f"device {name}")
                except NetlinkError as err:
                    log.warning("cannot remove device %s: %s", name, err)
    if removed:
        log.info("cleanup %s: removed %s", prefix, ", ".join(removed))
    return removed
