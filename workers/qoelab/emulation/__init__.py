"""Network emulation: link profiles, the client/server namespaces, netem and userspace backends,
verification of what the path really does, and cleanup of leftovers (see docs/emulation.md)."""

from __future__ import annotations

import contextlib
import shutil
from typing import Any

from qoelab.emulation.linkparams import LinkParams
from qoelab.emulation.profile import Direction, LinkProfile

__all__ = ["Direction", "LinkParams", "LinkProfile", "detect", "emulated_link"]


def emulated_link(*args: Any, **kwargs: Any) -> Any:
    """See :func:`qoelab.emulation.topology.emulated_link` (imported lazily: pyroute2 is heavy)."""
    from qoelab.emulation.topology import emulated_link as build

    return build(*args, **kwargs)


def detect() -> dict[str, Any]:
    """What this host can emulate, with reasons: ``netns``, ``netem``, ``userspace_link``, ``link``.

    Cheap (one throwaway namespace, a few milliseconds): the worker calls it at start-up.
    """
    from pyroute2 import netns

    from qoelab.emulation.system import create_netns, has_net_admin, new_prefix
    from qoelab.emulation.topology import probe_netem, userspace_available

    reasons: dict[str, str] = {}
    caps: dict[str, Any] = {}
    if not has_net_admin():
        caps["netns"] = False
        reasons["netns"] = (
            "creating network namespaces needs CAP_NET_ADMIN; run the worker as root or with that capability"
        )
    else:
        name = new_prefix("qld")[:9] + "d"
        try:
            create_netns(name)
            caps["netns"], reasons["netns"] = True, "network namespaces work"
        except OSError as err:
            caps["netns"], reasons["netns"] = False, f"cannot create a network namespace: {err}"
        finally:
            with contextlib.suppress(OSError):
                netns.remove(name)
    if caps["netns"]:
        caps["netem"], reasons["netem"] = probe_netem()
    else:
        caps["netem"], reasons["netem"] = False, reasons["netns"]
    caps["userspace_link"], reasons["userspace_link"] = userspace_available()
    caps["link"] = bool(caps["netns"] and (caps["netem"] or caps["userspace_link"]))
    if caps["link"]:
        reasons["link"] = "netem" if caps["netem"] else "userspace link (sch_netem not available)"
    else:
        reasons["link"] = "no link backend: " + "; ".join(
            reasons[k] for k in ("netns", "netem", "userspace_link") if not caps[k]
        )
    for tool, package in (("iperf3", "iperf3"), ("ping", "iputils-ping")):
        caps[tool] = shutil.which(tool) is not None
        reasons[tool] = (
            "installed" if caps[tool] else f"{tool} is not installed; install the Debian package '{package}'"
        )
    caps["backend"] = "netem" if caps["netem"] else ("userspace" if caps["userspace_link"] else None)
    caps["reasons"] = reasons
    return caps
