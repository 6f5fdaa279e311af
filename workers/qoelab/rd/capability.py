"""The remote-desktop tools a worker reports, one capability per side of each protocol.

Trials route by these flags (``qoelab.jobs.rd_qoe.requires_for``); ``rd_qoe`` and ``live_session``
list :func:`probe` among their probes.
"""

from __future__ import annotations

import shutil

from qoelab.jobtype import HostProbe

# capability -> (programs, any of which proves it, Debian package that provides it)
RD_TOOLS: dict[str, tuple[tuple[str, ...], str]] = {
    "rd.desktop": (("Xvfb",), "xvfb"),  # the X displays of both sides
    "rd.input": (("xdotool",), "xdotool"),  # the slow-motion driver's clicks
    "rd.vnc.server": (("x11vnc",), "x11vnc"),  # the default VNC server (docs/rd-benchmark.md)
    "rd.vnc.client": (("xtightvncviewer",), "xtightvncviewer"),
    "rd.spice.server": (("Xspice",), "xserver-xspice"),  # Xorg + spiceqxl, started by qoelab
    "rd.spice.client": (("remote-viewer",), "virt-viewer"),
    "rd.x2go.server": (("x2gostartagent", "x2golistsessions"), "x2goserver"),
    "rd.x2go.client": (("pyhoca-cli", "x2goclient"), "pyhoca-cli"),
}


def probe(found: HostProbe) -> None:
    for cap, (programs, package) in RD_TOOLS.items():
        ok = any(shutil.which(p) for p in programs)
        found.set(cap, ok, f"{' or '.join(programs)} not installed (Debian package '{package}')")
