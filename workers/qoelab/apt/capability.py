"""Storage APT's capabilities: a target program per protocol and the block-device layer helper."""

from __future__ import annotations

import os

from qoelab.apt.bdl import NOT_BUILT, binary_path
from qoelab.jobtype import HostProbe


def probe(found: HostProbe) -> None:
    helper = os.access(binary_path(), os.X_OK)
    for cap, programs, package in (
        ("apt.nbd", ("nbdkit",), "nbdkit"),
        ("apt.iscsi", ("tgtd", "tgtadm"), "tgt"),
    ):
        missing = found.missing(programs)
        if missing:
            found.set(cap, False, f"{' and '.join(missing)} not installed (Debian package '{package}')")
        else:
            found.set(cap, helper, NOT_BUILT)
