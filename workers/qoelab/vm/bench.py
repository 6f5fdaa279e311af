"""One remote-desktop trial in VM mode: QEMU's own VNC or SPICE server in front of the guest's kiosk.

The namespace mode's pieces are reused unchanged: workload pages (shared into the guest read-only
over virtio-9p and opened as ``file://`` there), the client Xvfb and viewer, calibration, the
slow-motion driver, capture and packet analysis. Only the server side differs: a guest booted on
a copy-on-write overlay (``qoelab.vm.guest``), its VNC/SPICE servers listening on the server address.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

from qoelab.errors import ParameterError
from qoelab.rd.bench import CLIENT_SCREEN, SETUP_TIMEOUT_S, calibrate, package_versions
from qoelab.rd.capture import Capture, PayloadWatch
from qoelab.rd.clicks import save_clicks
from qoelab.rd.clients import fit_viewer_window, resolve_settings, start_viewer
from qoelab.rd.desktop import ServerSide
from qoelab.rd.display import start_xvfb
from qoelab.rd.driver import DriverParams, drive
from qoelab.rd.procs import ProcSet, wait_for
from qoelab.rd.workload import find_link, generate
from qoelab.vm.guest import running_guest

VM_PROTOCOLS = ("vnc", "spice")  # X2Go in VM mode (sshd + x2goserver are in the image) is not wired yet
VNC_DISPLAY = 0  # port 5900
# rd settings -> QEMU -spice option names (the SPICE server is QEMU's libspice-server).
SPICE_OPTION_NAMES = {
    "image_compression": "image-compression",
    "jpeg_wan_compression": "jpeg-wan-compression",
    "zlib_glz_wan_compression": "zlib-glz-wan-compression",
    "streaming_video": "streaming-video",
}


def _link_on_screen(img: Image.Image) -> bool:
    # Ready = the first page's link block is on QEMU's screen (the same test the client side uses).
    return find_link(np.asarray(img.convert("RGB"))) is not None


def spice_options(settings: dict[str, Any]) -> dict[str, str]:
    return {qemu: str(settings[key]) for key, qemu in SPICE_OPTION_NAMES.items() if key in settings}


def run_vm_bench(
    protocol: str,
    server_ns: str,
    client_ns: str,
    server_ip: str,
    client_if: str,
    workdir: Path,
    pages: int = 3,
    seed: int = 1,
    quiet_s: float = 0.5,
    pause_s: float = 0.5,
    update_timeout_s: float = 30,
    settings: dict[str, Any] | None = None,
    log: logging.Logger | None = None,
    *,
    prefix: str,
    stable_s: float | None = None,
    on_step: Callable[[int], None] | None = None,
    accel: str = "auto",
    ready_timeout_s: float = 300,
) -> dict[str, Any]:
    """Like ``qoelab.rd.bench.run_bench`` (same result keys) plus ``vm``: the guest's provenance."""
    log = log or logging.getLogger("qoelab.vm.bench")
    if protocol not in VM_PROTOCOLS:
        raise ParameterError(
            "protocol", f"VM mode supports {', '.join(VM_PROTOCOLS)} so far, got {protocol!r}"
        )
    params = DriverParams(pages, quiet_s, pause_s, update_timeout_s, stable_s)
    params.validate()
    user_settings = dict(settings or {})
    user_settings.pop("server", None)  # the VNC server is QEMU's, whatever the namespace mode would pick
    merged = resolve_settings(protocol, user_settings)
    if protocol == "vnc":
        merged["server"] = "qemu"
        merged["port"] = 5900 + VNC_DISPLAY
    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    procs = ProcSet(prefix, workdir / "logs")
    capture: Capture | None = None
    watch: PayloadWatch | None = None
    clicks: list = []
    timings: dict[str, float] = {}
    mapping: dict[str, Any] = {}
    vm_info: dict[str, Any] = {}
    pcap = workdir / "capture.pcap"
    clicks_path = workdir / "clicks.json"
    t0 = time.monotonic()
    manifest = generate(workdir / "pages", pages=max(pages, 2), seed=seed)
    url = f"file:///srv/pages/{manifest.page(1).file}"
    guest_cm = running_guest(
        prefix, workdir / "vm", ns=server_ns, listen_ip=server_ip, accel=accel, pages_dir=workdir / "pages",
        url=url, vnc_display=VNC_DISPLAY if protocol == "vnc" else None,
        spice_port=int(merged["port"]) if protocol == "spice" else None,
        spice_options=spice_options(merged) if protocol == "spice" else None,
        ready_timeout=ready_timeout_s, ready_check=_link_on_screen,
    )  # fmt: skip
    try:
        with guest_cm as guest:
            timings["vm_ready_s"] = guest.boot_to_ready_s
            port = guest.vnc_port if protocol == "vnc" else guest.spice_port
            assert port is not None
            server = ServerSide(protocol, server_ns, server_ip, port, url)
            log.info("%s: guest up (%s) in %.1f s; %s on %s:%d", prefix, guest.accel, guest.boot_to_ready_s,
                     protocol, server_ip, port)  # fmt: skip
            try:
                client = start_xvfb(procs, *CLIENT_SCREEN, ns=client_ns, name="client-xvfb")
                viewer = start_viewer(procs, protocol, client_ns, client, server, merged, workdir)
                wait_for(
                    f"{protocol} viewer showing the guest's first page on {client.name}",
                    lambda: find_link(client.grab()),
                    SETUP_TIMEOUT_S[protocol],
                    proc=viewer,
                    poll=0.3,
                )
                fitted = fit_viewer_window(protocol, client)
                if fitted is not None:
                    time.sleep(1.0)
                offset, mapping = calibrate(client, None, manifest)
                watch = PayloadWatch(client_ns, client_if, server_ip).start()
                capture = Capture(procs, client_ns, client_if, pcap)
                capture.start()
                watch.wait_quiet(quiet_s, timeout=10)
                timings["setup_s"] = time.monotonic() - t0
                t1 = time.monotonic()
                clicks = drive(client, manifest, watch, offset, params, on_step=on_step)
                time.sleep(min(0.5, quiet_s))
                timings["run_s"] = time.monotonic() - t1
            finally:
                t2 = time.monotonic()
                if watch is not None:
                    watch.stop()
                if capture is not None:
                    capture.stop()
                procs.stop_all()
                timings["client_teardown_s"] = time.monotonic() - t2
        vm_info = guest.provenance()
        timings["vm_teardown_s"] = guest.teardown_s or 0.0
    finally:
        from qoelab.rd.cleanup import cleanup_leftovers

        cleanup_leftovers(prefix, namespaces=[server_ns, client_ns])
    save_clicks(clicks_path, clicks)
    result: dict[str, Any] = {
        "protocol": protocol,
        "settings": merged,
        "clicks": [c.to_json() for c in clicks],
        "mapping": mapping,
        "artifacts": [str(pcap), str(clicks_path), *(str(p) for p in procs.logs())],
        "versions": {**package_versions(protocol), "guest": vm_info.get("disk_sha256")},
        "timings": timings,
        "vm": vm_info,
        "updates": None,
        "summary": None,
    }
    (workdir / "manifest.json").write_text((workdir / "pages" / "manifest.json").read_text())
    result["artifacts"].append(str(workdir / "manifest.json"))
    result["artifacts"] += [
        str(p) for p in sorted((workdir / "vm").glob("*")) if p.suffix in (".log", ".png", ".err")
    ]
    from qoelab.rd import analysis

    analyzed = analysis.analyze(
        pcap, clicks, server=analysis.parse_endpoint(server_ip), quiet_s=quiet_s, timeout_s=update_timeout_s
    )
    doc = analyzed.to_json()
    by_index = {c.index: c for c in clicks}
    for update in doc.get("updates") or []:
        click = by_index.get(update.get("index"))
        stable = click.pixel_stable_t if click else None
        update["pixel_ms"] = (stable - click.t) * 1e3 if click and stable else None
    result["updates"] = doc.get("updates")
    result["summary"] = doc.get("summary")
    result["analysis"] = {k: v for k, v in doc.items() if k not in ("updates", "summary")}
    (workdir / "result.json").write_text(json.dumps(result, indent=2, default=str) + "\n")
    return result
