"""One remote-desktop trial in VM mode: the desktop is a QEMU guest on the server side of the link.

VNC and SPICE are QEMU's own servers in front of the guest's screen; X2Go is ``x2goserver`` inside
the guest, reached through the tap: the server namespace forwards TCP port 22 of the server address
to the guest (nftables DNAT), so the client connects to the same address as in every other mode.
The namespace mode's pieces are reused unchanged: workload pages (served over HTTP from the server
namespace on the tap, 10.213.0.1:8080, where the guest's start page waits for them), the client
Xvfb and viewer, calibration, the slow-motion driver, capture and packet analysis.
"""

from __future__ import annotations

import functools
import logging
import shutil
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

from qoelab.emulation.system import find_tool, ns_exec_argv
from qoelab.errors import ParameterError
from qoelab.procs import ProcSet, SetupError, require_tool
from qoelab.rd.bench import (
    BenchRequest,
    add_recordings,
    analyze_into,
    base_result,
    measure_client_side,
    package_versions,
    prefix_of,
)
from qoelab.rd.clients import resolve_settings
from qoelab.rd.desktop import ServerSide, serve_pages
from qoelab.rd.workload import find_link, generate
from qoelab.vm.guest import GUEST_IP, PAGE_PORT, TAP_HOST_ADDR, resolve_accel, running_guest
from qoelab.vm.image import GuestImage, load_image
from qoelab.vm.qemu import guest_timeouts, vnc_options_for
from qoelab.vm.reports import browser_reports, x2go_stall_note

VM_PROTOCOLS = ("vnc", "spice", "x2go")
VM_STARTS = ("snapshot", "cold")
VNC_DISPLAY = 0  # port 5900
X2GO_SESSION_COMMAND = "qoelab-x2go-kiosk"  # in the image (vm-images/build.sh)
X2GO_USER = "rd"
# The client side's setup ceiling (the X2Go login, nxagent and a second chromium in the guest take
# minutes under TCG) follows the guest's accelerator: qoelab.vm.qemu.guest_timeouts.
X2GO_SESSION_ATTEMPTS = 2  # a session whose browser ended before the first page gets one more
GUEST_X2GO_IRLIMIT = 1_000_000  # nxagent -irlimit in the guest image (vm-images/build.sh)
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


def ns_run(ns: str, argv: list[str], stdin: str | None = None, timeout: float = 20) -> None:
    """Run ``argv`` in ``ns``; a non-zero exit is a SetupError naming the command."""
    res = subprocess.run(
        ns_exec_argv(ns, argv), input=stdin, capture_output=True, text=True, timeout=timeout, check=False
    )
    if res.returncode != 0:
        raise SetupError(f"in namespace {ns}: {' '.join(argv)} failed: {res.stderr.strip()}")


def forward_ssh_to_guest(ns: str, server_ip: str, port: int) -> None:
    """DNAT ``server_ip:port`` to the guest's sshd; the namespace (and the rule) dies with the link."""
    nft = find_tool("nft", "nftables")
    ns_run(ns, ["sysctl", "-qw", "net.ipv4.ip_forward=1"])
    ruleset = (
        "table ip qoelab_vm {\n"
        "  chain prerouting {\n"
        "    type nat hook prerouting priority dstnat;\n"
        f"    ip daddr {server_ip} tcp dport {port} dnat to {GUEST_IP}:22\n"
        "  }\n"
        "}\n"
    )
    ns_run(ns, [nft, "-f", "-"], stdin=ruleset)


def wait_for_guest_sshd(ns: str, timeout: float) -> None:
    probe = f"exec 3<>/dev/tcp/{GUEST_IP}/22 && head -c 7 <&3"
    deadline = time.monotonic() + timeout
    last = ""
    while time.monotonic() < deadline:
        try:
            ns_run(ns, ["bash", "-c", probe], timeout=10)
            return
        except (SetupError, subprocess.TimeoutExpired) as err:
            last = str(err)
        time.sleep(0.5)
    raise SetupError(f"the guest's sshd ({GUEST_IP}:22) did not answer within {timeout:.0f} s: {last}")


def run_vm_bench(
    req: BenchRequest,
    *,
    log: logging.Logger | None = None,
    on_step: Callable[[int], None] | None = None,
    accel: str = "auto",
    start: str = "snapshot",
    ready_timeout_s: float | None = None,
) -> dict[str, Any]:
    """Like ``qoelab.rd.bench.run_bench`` (the same request, the same result keys) plus ``vm``: the
    guest's provenance. The guest runs the page workload only.

    ``start``: ``snapshot`` restores the guest from the host's saved state (made once, by the first
    trial that needs it), ``cold`` boots it; a failed restore falls back to a boot and says so.
    ``ready_timeout_s``: QEMU start to the page on the guest's screen; None: the accelerator's,
    divided by a CPU quota QEMU is held to (``qoelab.vm.qemu.guest_timeouts``, applied by
    ``running_guest``), as is the client side's setup ceiling.
    """
    protocol, server_ns, client_ns, server_ip = req.protocol, req.server_ns, req.client_ns, req.server_ip
    client_if, record = req.client_if, req.record
    prefix = req.prefix or prefix_of(server_ns, client_ns)
    log = log or logging.getLogger("qoelab.vm.bench")
    if protocol not in VM_PROTOCOLS:
        raise ParameterError("protocol", f"must be one of {', '.join(VM_PROTOCOLS)}, got {protocol!r}")
    if start not in VM_STARTS:
        raise ParameterError("vm_start", f"must be one of {', '.join(VM_STARTS)}, got {start!r}")
    if req.workload != "pages":
        raise ParameterError("workload", f"server vm runs the page workload only, got {req.workload!r}")
    params = req.driver_params()
    if record:
        require_tool("ffmpeg", "ffmpeg")  # say so before a guest is started, not after it
    user_settings = dict(req.settings or {})
    user_settings.pop("server", None)  # the VNC server is QEMU's, whatever the namespace mode would pick
    adaptive = user_settings.pop("qemu_adaptive", True)
    if not isinstance(adaptive, bool):
        raise ParameterError("settings.qemu_adaptive", f"must be true or false, got {adaptive!r}")
    merged = resolve_settings(protocol, user_settings)
    if protocol == "x2go" and merged["irlimit"] != GUEST_X2GO_IRLIMIT:
        # The guest's nxagent options are baked into the image (vm-images/build.sh).
        raise ParameterError(
            "settings.irlimit", f"server vm runs the image's {GUEST_X2GO_IRLIMIT}, got {merged['irlimit']}"
        )
    if protocol == "vnc":
        merged["server"] = "qemu"
        merged["port"] = 5900 + VNC_DISPLAY
        merged["qemu_vnc_options"] = vnc_options_for(adaptive)
    workdir = Path(req.workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    procs = ProcSet(prefix, workdir / "logs")
    timings: dict[str, float] = {}
    vm_info: dict[str, Any] = {}
    t0 = time.monotonic()
    manifest = generate(workdir / "pages", pages=max(req.pages, 2), seed=req.seed)
    page_url = f"http://{TAP_HOST_ADDR[0]}:{PAGE_PORT}/{manifest.page(1).file}"
    image = load_image()
    # KVM probed once per host boot (cached): running_guest gets the same answer.
    chosen, _why = resolve_accel(accel, image)
    snapshot = None
    if start == "snapshot":
        snapshot = _snapshot_or_none(prefix, workdir / "vm-snapshot", image, chosen, log, vm_info)
        timings["snapshot_prepare_s"] = time.monotonic() - t0
    try:
        # Bind the page server to the tap's address before QEMU creates the tap.
        ns_run(server_ns, ["sysctl", "-qw", "net.ipv4.ip_nonlocal_bind=1"])
        serve_pages(procs, server_ns, TAP_HOST_ADDR[0], workdir / "pages", port=PAGE_PORT)
        if protocol == "x2go":
            forward_ssh_to_guest(server_ns, server_ip, int(merged["ssh_port"]))
        guest_cm = running_guest(
            prefix, workdir / "vm", ns=server_ns, listen_ip=server_ip, image=image, accel=accel,
            vnc_display=VNC_DISPLAY if protocol == "vnc" else None,
            spice_port=int(merged["port"]) if protocol == "spice" else None,
            spice_options=spice_options(merged) if protocol == "spice" else None,
            vnc_options=merged.get("qemu_vnc_options"),
            ready_timeout=ready_timeout_s, ready_check=_link_on_screen, snapshot=snapshot,
        )  # fmt: skip
        with guest_cm as guest:
            timings["vm_ready_s"] = guest.boot_to_ready_s
            server = _server_side(protocol, server_ns, server_ip, merged, page_url, guest)
            log.info("%s: guest up (%s, %s start) in %.1f s; %s on %s:%d", prefix, guest.accel, guest.start,
                     guest.boot_to_ready_s, protocol, server_ip, server.port)  # fmt: skip
            setup_timeout_s = guest_timeouts(guest.accel, guest.cpu_quota).setup_s(protocol)
            measure = functools.partial(
                measure_client_side, procs, protocol, server, lambda: None, client_ns, client_if, server_ip,
                merged, workdir, manifest, params, setup_timeout_s, record=record, prefix=prefix,
                timings=timings, t0=t0, on_step=on_step, log=log,
            )  # fmt: skip

            def said(restart: dict[str, Any]) -> None:
                log.warning("%s: the X2Go session ended before its first page, once more: %s", prefix,
                            restart["guest_reports"])  # fmt: skip

            on_restart = said if protocol == "x2go" else None
            diagnose = functools.partial(x2go_session_state, server_ns, guest, prefix) if on_restart else None
            try:
                run, restarts = _measure_reporting_the_guest(
                    measure, procs, guest, timings, workdir / "client-home", on_restart, diagnose
                )
            finally:
                t2 = time.monotonic()
                procs.stop_all()
                timings["client_teardown_s"] = time.monotonic() - t2
            # Stalled browser starts the guest restarted (e.g. an X2Go session's), by role.
            vm_info["browser_restarts"] = {r: b.restarts for r, b in browser_reports(guest.reports()).items()}
        if restarts:  # said in the trial's provenance
            vm_info["x2go_session_restarts"] = restarts
        # An earlier snapshot_error (the snapshot could not be made) survives the guest's own None.
        vm_info = {**guest.provenance(), **{k: v for k, v in vm_info.items() if v is not None}}
        timings["vm_teardown_s"] = guest.teardown_s or 0.0
        timings["teardown_s"] = timings["client_teardown_s"] + timings["vm_teardown_s"]
    finally:
        procs.stop_all()
        from qoelab.rd.cleanup import cleanup_leftovers

        cleanup_leftovers(prefix, namespaces=[server_ns, client_ns])
    versions = {**package_versions(protocol), "guest_disk_sha256": vm_info.get("disk_sha256")}
    result = base_result(protocol, merged, run, workdir, procs, versions, timings)
    result["vm"] = vm_info
    result["artifacts"] += [
        str(p) for p in sorted((workdir / "vm").glob("*")) if p.suffix in (".log", ".png", ".err")
    ]
    add_recordings(result, run, workdir, prefix, log, timings)
    return analyze_into(result, workdir, run.clicks, server_ip, req.quiet_s, req.update_timeout_s)


def _measure_reporting_the_guest(
    measure: Callable[[], Any], procs: ProcSet, guest: Any, timings: dict[str, float], client_home: Path,
    on_restart: Callable[[dict[str, Any]], None] | None, diagnose: Callable[[], str] | None = None,
) -> tuple[Any, list[dict[str, Any]]]:  # fmt: skip
    """``measure()`` and the X2Go sessions started again, each with its error and the guest's reports.

    With ``on_restart`` (X2Go), a session whose viewer ended before its first page gets a new one, at
    most ``X2GO_SESSION_ATTEMPTS`` in all (its browser did so in CI under TCG; docs/vm.md), and
    ``on_restart`` hears of each as it happens. Any other failure, or the last, raises with what the
    guest reported appended, and ``diagnose()``'s account of the guest's state (X2Go: its session)."""
    started = len(procs.procs)
    restarts: list[dict[str, Any]] = []
    while True:
        try:
            return measure(), restarts
        except SetupError as err:
            reports = guest.reports()
            again = len(restarts) + 1 < X2GO_SESSION_ATTEMPTS
            if on_restart is None or not (again and _viewer_ended_early(procs, started, timings)):
                stall = x2go_stall_note(reports, timings) if on_restart is not None else ""
                why = f"; {stall}" if stall else ""
                state = f"; {diagnose()}" if diagnose is not None else ""
                raise SetupError(f"{err}{why}; the guest reported: {reports or 'nothing'}{state}") from err
            restarts.append({"error": str(err)[-500:], "guest_reports": reports})
            on_restart(restarts[-1])
            procs.stop_all(keep=started)
            shutil.rmtree(client_home, ignore_errors=True)


# The X2Go session as the guest sees it: its processes (oldest first, command lines cut) and the tail
# of each session's agent log. Read as root over ssh when a session never showed its page, because
# the kiosk's own report lines (ttyS1) say nothing when the session's browser never started.
X2GO_STATE_COMMAND = (
    "ps -eo etimes,stat,args --sort=start_time | grep -E '[x]2go|[n]xagent|[c]hromium|[q]oelab-' "
    '| cut -c1-140 | tail -n 12; for f in /home/*/.x2go/C-*/session.log; do [ -f "$f" ] && '
    'echo "== $f" && tail -n 6 "$f" | cut -c1-200; done'
)


def x2go_session_state(ns: str, guest: Any, prefix: str, timeout_s: float = 30.0) -> str:
    """One line: the guest's X2Go processes and agent log, or why they could not be read."""
    from qoelab.vm.shell import GuestShell

    shell = GuestShell(ns, guest.image.directory / "root-key", prefix)
    try:
        out = shell.run(X2GO_STATE_COMMAND, timeout=timeout_s, check=False)
        text = " | ".join(" ".join(line.split()) for line in out.stdout.splitlines() if line.strip())
        return f"in the guest: {text[-1500:] or 'no X2Go process and no session log'}"
    except Exception as err:  # noqa: BLE001 - a diagnosis must not hide the trial's own error
        return f"the guest's X2Go state could not be read ({err})"
    finally:
        shell.close()


def _viewer_ended_early(procs: ProcSet, started: int, timings: dict[str, float]) -> bool:
    """An X2Go viewer (pyhoca-cli) of this attempt has exited before the measurement started."""
    if "setup_s" in timings:
        return False
    return any(p.name == "viewer-x2go" and not p.alive() for p in procs.procs[started:])


def _server_side(
    protocol: str, ns: str, server_ip: str, settings: dict[str, Any], url: str, guest: Any
) -> ServerSide:
    if protocol == "x2go":
        wait_for_guest_sshd(ns, timeout=60)
        password = guest.image.password_file.read_text().strip()
        return ServerSide(protocol, ns, server_ip, int(settings["ssh_port"]), url, user=X2GO_USER,
                          password=password, session_script=X2GO_SESSION_COMMAND)  # fmt: skip
    port = guest.vnc_port if protocol == "vnc" else guest.spice_port
    assert port is not None
    return ServerSide(protocol, ns, server_ip, port, url)


def _snapshot_or_none(
    prefix: str, workdir: Path, image: GuestImage, accel: str, log: logging.Logger, vm_info: dict[str, Any]
) -> Any:
    """The host's saved guest state for the chosen ``accel`` (made now if missing); None, with the
    reason recorded, if it fails."""
    from qoelab.vm.qemu import DEFAULT_MEMORY_MB
    from qoelab.vm.snapshot import SnapshotError, get_snapshot

    try:
        return get_snapshot(image, accel, prefix, DEFAULT_MEMORY_MB, workdir)
    except SnapshotError as err:
        log.warning("%s: no snapshot, the guest boots instead: %s", prefix, err)
        vm_info["snapshot_error"] = str(err)
        return None
