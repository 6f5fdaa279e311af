"""Offload emulation's capabilities: the vose-pair helper and ethtool, and the accelerated
instructions a hardware run compares against (AES-NI, SHA-NI) as their own flags."""

from __future__ import annotations

from pathlib import Path

from qoelab import helpers
from qoelab.jobtype import HostProbe


def cpu_flags() -> set[str]:
    try:
        line = next(x for x in Path("/proc/cpuinfo").read_text().splitlines() if x.startswith("flags"))
    except (OSError, StopIteration):
        return set()
    return set(line.split(":", 1)[1].split())


def probe(found: HostProbe) -> None:
    helper = helpers.VOSE_PAIR.available()
    ethtool = not found.missing(("ethtool",))
    why = helpers.VOSE_PAIR.not_built if not helper else "ethtool is not installed (Debian package 'ethtool')"
    found.set("vose", helper and ethtool, why)
    flags = cpu_flags()
    for cap, flag, name in (("vose.aesni", "aes", "AES-NI"), ("vose.sha_ni", "sha_ni", "SHA-NI")):
        ok = found.caps["vose"] and flag in flags
        found.set(cap, ok, found.reasons.get("vose") or f"this CPU has no {name}")
