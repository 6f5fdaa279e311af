"""Paper 002's flow classification of an rd_qoe trial's capture (``qoelab.thinclient.classify``).

Every rd_qoe trial, pages or typing, stores the classification in ``provenance["thinclient_classify"]``
and four numbers in its summary (``tc_*``), so the lab's VNC, SPICE and X2Go sessions can be held
against the paper's RDP traffic (Tables 1-2). The capture is the client-side one, not the paper's
server-side tap: docs/rd-benchmark.md says what that changes.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

# The summary metrics of paper 002's flow classification (``provenance["thinclient_classify"]``).
CLASSIFY_METRICS = {"tc_alpha": "alpha", "tc_beta": "beta", "tc_c_B": "c_B", "tc_p_I": "p_I"}


def server_port(protocol: str, server: str, settings: dict[str, Any]) -> int | None:
    """The port the protocol's server listens on in this trial (None: every port of the server host)."""
    if server == "vm":
        return None  # QEMU's ports behind the namespace's forwarding; the host filter is enough
    key = "ssh_port" if protocol == "x2go" else "port"
    port = settings.get(key)
    return int(port) if isinstance(port, int) and not isinstance(port, bool) else None


def classify_capture(pcap: Path, server_ip: str, protocol: str, result: dict[str, Any]) -> dict[str, Any]:
    """Paper 002's flow classification of the trial's capture, or why there is none (never raises:
    a trial's measurement does not depend on it)."""
    port = server_port(protocol, "vm" if "vm" in result else "namespace", result.get("settings") or {})
    where = {"pcap": pcap.name, "server_ip": server_ip, "server_port": port,
             "capture_point": "client side of the emulated link"}  # fmt: skip
    if not pcap.is_file():
        return {**where, "error": "no capture: the trial has no capture.pcap"}
    try:
        from qoelab.thinclient.classify import classify

        return {**where, **classify(pcap, server_ip=server_ip, server_port=port)}
    except Exception as err:  # noqa: BLE001 - recorded in provenance, the trial stands
        return {**where, "error": f"{type(err).__name__}: {err}"}


def classification_metrics(classified: dict[str, Any]) -> dict[str, float]:
    out = {}
    for metric, key in CLASSIFY_METRICS.items():
        value = classified.get(key)
        if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
            out[metric] = float(value)
    return out
