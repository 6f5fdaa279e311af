"""NIC offloads of a VOSE trial's interfaces, switched and read back with ethtool inside a namespace.

The thesis turned TSO, GSO and LRO off and compared checksum offload off (software) with on (the
NIC's TOE); on veth, checksum offload on means the checksum is never computed (a virtual offload).
"""

from __future__ import annotations

import subprocess
from collections.abc import Sequence

from qoelab.emulation.system import find_tool, ns_exec_argv
from qoelab.errors import MissingToolError, QoelabError

OFFLOAD_FEATURES = (
    "tx-checksumming",
    "rx-checksumming",
    "scatter-gather",
    "tcp-segmentation-offload",
    "generic-segmentation-offload",
    "generic-receive-offload",
)
ETHTOOL_TIMEOUT_S = 10


class OffloadError(QoelabError):
    """An interface's offloads could not be read, or a requested setting did not take."""


def parse_offloads(text: str) -> dict[str, bool | list[str]]:
    """``ethtool -k`` output as {feature: on?} for :data:`OFFLOAD_FEATURES`, plus ``fixed``: [names].

    A feature missing from the output is missing from the result. ethtool shows an aggregate
    (tx-checksumming, ...) as on when any of its sub-features is on.
    """
    state: dict[str, bool | list[str]] = {}
    fixed: list[str] = []
    for line in text.splitlines():
        if line[:1].isspace():
            continue  # a sub-feature of the aggregate above it
        name, sep, rest = line.partition(":")
        words = rest.split()
        if not sep or name not in OFFLOAD_FEATURES or not words:
            continue
        state[name] = words[0] == "on"
        if "[fixed]" in rest:
            fixed.append(name)
    state["fixed"] = fixed
    return state


def _ethtool(ns: str, args: Sequence[str]) -> subprocess.CompletedProcess[str]:
    try:
        ethtool = find_tool("ethtool")
    except MissingToolError:
        raise OffloadError("ethtool is not installed (Debian package ethtool)") from None
    try:
        return subprocess.run(
            ns_exec_argv(ns, [ethtool, *args]), capture_output=True, text=True, timeout=ETHTOOL_TIMEOUT_S
        )
    except subprocess.TimeoutExpired:
        raise OffloadError(
            f"ethtool {' '.join(args)} in namespace {ns} did not finish within {ETHTOOL_TIMEOUT_S} s"
        ) from None


def _said(out: subprocess.CompletedProcess[str]) -> str:
    lines = [ln.strip() for ln in (out.stderr or out.stdout).splitlines() if ln.strip()]
    return lines[-1] if lines else f"exit status {out.returncode}"


def read_offloads(ns: str, ifname: str) -> dict[str, bool | list[str]]:
    """The :data:`OFFLOAD_FEATURES` of ``ifname`` in namespace ``ns`` (see :func:`parse_offloads`)."""
    out = _ethtool(ns, ["-k", ifname])
    if out.returncode != 0:
        raise OffloadError(f"cannot read the offloads of {ifname} in namespace {ns}: {_said(out)}")
    return parse_offloads(out.stdout)


def set_offloads(
    ns: str,
    ifname: str,
    *,
    tx_csum: bool,
    rx_csum: bool,
    tso: bool = False,
    gso: bool = False,
    gro: bool = False,
    sg: bool | None = None,
) -> dict[str, bool | list[str]]:
    """Switch ``ifname``'s offloads with ``ethtool -K`` and return them as read back.

    Only the features set here are checked: on a veth, tx off also switches off dependants such as
    TSO, which is the kernel's doing, not a failure. ``sg`` None leaves scatter-gather alone.
    """
    wanted = {
        "tx-checksumming": tx_csum,
        "rx-checksumming": rx_csum,
        "tcp-segmentation-offload": tso,
        "generic-segmentation-offload": gso,
        "generic-receive-offload": gro,
    }
    args = ["-K", ifname]
    for short, value in (("tx", tx_csum), ("rx", rx_csum), ("tso", tso), ("gso", gso), ("gro", gro)):
        args += [short, "on" if value else "off"]
    if sg is not None:
        wanted["scatter-gather"] = sg
        args += ["sg", "on" if sg else "off"]
    # ethtool -K exits 1 when nothing needed changing, too; the read-back is what counts.
    out = _ethtool(ns, args)
    state = read_offloads(ns, ifname)
    for feature, value in wanted.items():
        if feature not in state:
            raise OffloadError(f"ethtool does not report {feature} for {ifname} in namespace {ns}")
        if state[feature] != value:
            why = " (the driver fixes it)" if feature in state["fixed"] else f" (ethtool: {_said(out)})"
            raise OffloadError(
                f"{feature} stayed {'on' if state[feature] else 'off'} on {ifname} in namespace {ns} "
                f"although {'on' if value else 'off'} was asked for{why}"
            )
    return state
