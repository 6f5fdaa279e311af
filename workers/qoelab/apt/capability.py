"""Storage APT's capabilities: a target program per protocol and the block-device layer helper."""

from __future__ import annotations

from qoelab import helpers
from qoelab.jobtype import HostProbe


def probe(found: HostProbe) -> None:
    helper = helpers.APT_BDL.available()
    for cap, programs, package in (
        ("apt.nbd", ("nbdkit",), "nbdkit"),
        ("apt.iscsi", ("tgtd", "tgtadm"), "tgt"),
    ):
        missing = found.missing(programs)
        if missing:
            found.set(cap, False, f"{' and '.join(missing)} not installed (Debian package '{package}')")
        else:
            found.set(cap, helper, helpers.APT_BDL.not_built)
