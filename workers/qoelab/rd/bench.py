"""One remote-desktop trial: start the namespace desktop and a viewer, click under capture, measure.

``run_bench`` takes a ``BenchRequest``: the two namespaces, the server address and the client
interface (however the link was built: the emulation layer's ``emulated_link`` or anything else) and
a work directory.
It always tears down what it started (try/finally, process groups); a SIGKILLed run leaves
processes that :func:`qoelab.rd.cleanup.cleanup_leftovers` finds by their marker.
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from qoelab.errors import ParameterError
from qoelab.packets.capture import Capture, PayloadWatch
from qoelab.procs import ProcSet, SetupError, require_tool, wait_for
from qoelab.rd.clients import fit_viewer_window, resolve_settings, start_viewer
from qoelab.rd.desktop import PROTOCOLS, ServerSide, find_x2go_agent_display, start_server_side
from qoelab.rd.display import Display, start_xvfb
from qoelab.rd.driver import DriverParams, drive
from qoelab.rd.geometry import desktop_extent, root_size
from qoelab.rd.keystrokes import DEFAULT_GAP_S, TypingPlan, type_keys
from qoelab.rd.keystrokes import plan as typing_plan
from qoelab.rd.workload import EDITOR_FILE, Manifest, Rect, find_link, generate, generate_editor

CLIENT_SCREEN = (1024, 768)  # larger than 800x600 so viewer menus or borders never crop the desktop
PACKAGES = {
    "common": ["xvfb", "chromium", "tshark", "xdotool"],
    "vnc": ["x11vnc", "tigervnc-standalone-server", "xtightvncviewer"],
    "spice": ["xserver-xspice", "virt-viewer", "libspice-server1"],
    "x2go": ["x2goserver", "pyhoca-cli", "python3-x2go", "nxproxy", "openssh-server"],
}
WORKLOADS = ("pages", "typing")
SETUP_TIMEOUT_S = {"vnc": 45.0, "spice": 45.0, "x2go": 90.0}


def package_versions(protocol: str) -> dict[str, str | None]:
    versions: dict[str, str | None] = {}
    for pkg in PACKAGES["common"] + PACKAGES[protocol]:
        res = subprocess.run(
            ["dpkg-query", "-W", "-f", "${Version}", pkg], capture_output=True, text=True, check=False
        )
        versions[pkg] = res.stdout.strip() if res.returncode == 0 and res.stdout.strip() else None
    return versions


def prefix_of(server_ns: str, client_ns: str) -> str:
    common = os.path.commonprefix([server_ns, client_ns]).rstrip("-_")
    return common if re.fullmatch(r"[a-z][a-z0-9]{1,12}", common or "") else "qlrd"


def calibrate(
    client: Display, server_display: Display | None, manifest: Manifest, page: int = 1
) -> tuple[tuple[int, int], dict[str, Any]]:
    """Offset from page coordinates to client screen coordinates, measured three ways.

    ``window``: the viewer's top-level window origin (xdotool geometry); ``pointer``: move the client
    pointer and read where the server's pointer went (needs the server display); ``visual``: where
    the link of the shown page is on the client screen. The visual offset is used when found,
    since it includes everything (window decorations, viewer toolbars, the browser's placement).
    """
    info: dict[str, Any] = {}
    windows = client.windows()
    if windows:
        _wid, wx, wy, ww, wh = windows[0]
        info["window"] = {"x": wx, "y": wy, "w": ww, "h": wh}
    if server_display is not None:
        offs = []
        for sx, sy in ((200, 150), (600, 450)):
            guess = info.get("window", {"x": 0, "y": 0})
            cx = min(max(sx + guess["x"], 0), client.width - 1)
            cy = min(max(sy + guess["y"], 0), client.height - 1)
            try:
                client.xdotool("mousemove", str(cx), str(cy))
                time.sleep(0.4)
                px, py = server_display.pointer()
                offs.append((cx - px, cy - py))
            except SetupError as err:
                info["pointer_error"] = str(err)
                break
        if offs:
            info["pointer"] = {"offsets": offs, "consistent": len(set(offs)) == 1}
        server_screen = root_size(server_display)
        if server_screen is not None:
            info["server_screen"] = list(server_screen)
        if server_display.proc is not None:
            seen = find_link(server_display.grab())
            link = manifest.page(page).link
            if seen is not None:
                info["page_on_server"] = {"dx": seen.x - link.x, "dy": seen.y - link.y}
    shot = client.grab()
    found = find_link(shot)
    link = manifest.page(page).link
    if found is not None:
        info["visual"] = {"dx": found.x - link.x, "dy": found.y - link.y}
        # How much of the 800x600 desktop the client really shows (a black band shortens it).
        info["desktop_extent"] = list(desktop_extent(shot, (info["visual"]["dx"], info["visual"]["dy"])))
        scale = found.w / link.w
        info["scale"] = round(scale, 3)
        if abs(scale - 1) > 0.05:
            raise SetupError(
                f"the viewer scales the remote desktop by {scale:.2f}; page coordinates would not map 1:1"
            )
        offset = (found.x - link.x, found.y - link.y)
        info["used"] = "visual"
    elif info.get("pointer", {}).get("consistent"):
        offset = info["pointer"]["offsets"][0]
        info["used"] = "pointer"
    elif "window" in info:
        offset = (info["window"]["x"], info["window"]["y"])
        info["used"] = "window"
    else:
        raise SetupError("cannot map page coordinates to the client screen: no viewer window found")
    return (int(offset[0]), int(offset[1])), info


@dataclass
class ClientRun:
    """What the client side of a trial produced: the clicks, the page -> screen mapping, a recorder."""

    clicks: list = field(default_factory=list)
    mapping: dict[str, Any] = field(default_factory=dict)
    recorder: Any = None


def measure_client_side(
    procs: ProcSet, protocol: str, server: ServerSide, server_display: Callable[[], Display | None],
    client_ns: str, client_if: str, server_ip: str, settings: dict[str, Any], workdir: Path,
    manifest: Manifest, params: DriverParams, setup_timeout_s: float, *, record: bool, prefix: str,
    timings: dict[str, float], t0: float, on_step: Callable[[int], None] | None, log: logging.Logger,
    typing: tuple[TypingPlan, Rect] | None = None,
) -> ClientRun:  # fmt: skip
    """The client half of a trial, the same whatever serves the desktop (namespace or VM).

    Starts the client display and the viewer, maps page coordinates to the client screen, then
    clicks through the pages under capture (and a screen recording when ``record``). Stops the
    watch, the capture and the recorder itself; the viewer stays in ``procs`` for the caller.
    ``server_display`` is asked after the viewer is up (pointer calibration; None: visual only).
    ``typing``: the ``typing`` workload instead of the clicks (its plan and the editor's text area).
    """
    from qoelab.rd import record as rec_mod

    run = ClientRun()
    watch: PayloadWatch | None = None
    capture: Capture | None = None
    client = start_xvfb(procs, *CLIENT_SCREEN, ns=client_ns, name="client-xvfb")
    viewer = start_viewer(procs, protocol, client_ns, client, server, settings, workdir)

    def page_on_client(what: str) -> None:
        wait_for(f"{protocol} viewer showing {what} on {client.name}", lambda: find_link(client.grab()),
                 setup_timeout_s, proc=viewer, poll=0.3)  # fmt: skip

    page_on_client("the first page")
    fitted = fit_viewer_window(protocol, client)
    if fitted is not None:
        if protocol != "x2go":
            time.sleep(1.0)  # the viewer redraws at the new size (X2Go's fit waits until it has)
        # The remote desktop redraws at the fitted size too: a TCG guest's browser takes seconds to
        # lay the page out again, and calibrating before it has would find no link (docs/vm.md).
        page_on_client("the first page again after fitting its window")
    offset, run.mapping = calibrate(client, server_display(), manifest)
    if fitted is not None:
        run.mapping["fitted_window"] = fitted
    log.info("%s: page -> client offset %s (%s)", prefix, offset, run.mapping.get("used"))
    try:
        if record:
            # The viewer's 800x600 desktop area of the client screen, the size of the reference.
            run.recorder = rec_mod.Recording(
                client, workdir / "recording.raw.mkv", prefix, workdir / "logs" / "ffmpeg-recording.log",
                region=(offset[0], offset[1], *rec_mod.SIZE),
            ).start()  # fmt: skip
        watch = PayloadWatch(client_ns, client_if, server_ip).start()
        capture = Capture(procs, client_ns, client_if, workdir / "capture.pcap")
        capture.start()
        # Start measuring from a quiet link: the calibration moves left traffic behind.
        watch.wait_quiet(params.quiet_s, timeout=10)
        recorder = run.recorder
        if recorder is not None and recorder.start_epoch is not None:
            # Evaluators see the first page for a moment before the first click.
            time.sleep(max(0.0, recorder.start_epoch + rec_mod.LEAD_S - time.time()))
        timings["setup_s"] = time.monotonic() - t0
        t1 = time.monotonic()
        if typing is None:
            run.clicks = drive(client, manifest, watch, offset, params, on_step=on_step)
        else:
            run.clicks = type_keys(client, watch, typing[1], offset, typing[0], params.quiet_s, on_step)
        # The last update's tail must be in the file before dumpcap stops.
        time.sleep(min(0.5, params.quiet_s))
        timings["run_s"] = time.monotonic() - t1
        if recorder is not None:
            time.sleep(rec_mod.TAIL_S)
            recorder.stop_epoch = time.time()
    finally:
        if run.recorder is not None:
            run.recorder.stop()  # also on failure: ffmpeg must not outlive the trial
        if watch is not None:
            watch.stop()
        if capture is not None:
            capture.stop()
    return run


def add_recordings(
    result: dict[str, Any], run: ClientRun, workdir: Path, prefix: str, log: logging.Logger,
    timings: dict[str, float],
) -> None:  # fmt: skip
    """With a recorder: encode the recording and render the reference into ``result["recordings"]``."""
    if run.recorder is None:
        return
    result["recordings"] = _recordings(run.recorder, result["clicks"], workdir, prefix, log, timings)
    result["artifacts"] += [p for v in result["recordings"].get("files", {}).values() for p in v]


def _recordings(
    recorder: Any, clicks: list[dict[str, Any]], workdir: Path, prefix: str, log: logging.Logger,
    timings: dict[str, float],
) -> dict[str, Any]:  # fmt: skip
    """Encode the degraded recording, record the reference and compare their first frames.

    A failure here does not throw the measurement away: it is reported in ``error`` (and the
    ratings app then finds no recording for the condition).
    """
    from qoelab.rd import record as rec_mod
    from qoelab.rd import stimulus

    t = time.monotonic()
    out: dict[str, Any] = {"files": {}}
    try:
        degraded = rec_mod.finish(recorder, clicks, "recording", workdir / rec_mod.RECORDING_NAME, prefix)
        out["files"]["recording"] = [str(degraded), str(degraded.with_suffix(".json"))]
        start = float(recorder.start_epoch)
        duration = float(recorder.stop_epoch) - start
        manifest = Manifest.load(workdir / "pages" / "manifest.json")
        ref = rec_mod.record_reference(
            workdir, manifest, workdir / "pages", clicks, start, duration, prefix, log
        )
        out["files"]["reference"] = [str(ref), str(ref.with_suffix(".json"))]
        # The stimulus must differ from the reference only by what the network did (stimulus.py).
        out["stimulus_check"] = stimulus.check(degraded, ref)
        if problems := out["stimulus_check"]["problems"]:
            log.warning("%s: recording vs reference: %s", prefix, "; ".join(problems))
    except Exception as err:  # noqa: BLE001 - the measurement stays valid without its videos
        out["error"] = f"{type(err).__name__}: {err}"
        log.warning("%s: recording failed: %s", prefix, out["error"])
    timings["record_s"] = time.monotonic() - t
    return out


@dataclass(frozen=True)
class BenchRequest:
    """One remote-desktop benchmark run, as both server modes take it (``run_bench`` on the namespace
    desktop, ``qoelab.vm.bench.run_vm_bench`` on a QEMU guest): the link's two ends, the workload and
    the driver's timing. ``prefix`` names everything the run starts (default: from the namespaces).

    ``record``: also record the client display during the clicks and a locally rendered reference
    (``qoelab.rd.record``; for recorded-mode ratings). Costs CPU during the trial (the x11grab)
    and time after it (WebM encoding, the reference run), so benchmarks leave it off.
    ``workload``: ``pages`` clicks through the pages; ``typing`` types ``keystrokes`` keys into an
    editor page at a mean gap of ``typing_gap_s`` (``qoelab.rd.keystrokes``), one "update" per key.
    """

    protocol: str
    server_ns: str
    client_ns: str
    server_ip: str
    client_if: str
    workdir: Path
    pages: int = 3
    seed: int = 1
    quiet_s: float = 0.5
    pause_s: float = 0.5
    update_timeout_s: float = 30
    settings: dict[str, Any] | None = None
    prefix: str | None = None
    stable_s: float | None = None
    record: bool = False
    workload: str = "pages"
    keystrokes: int = 40
    typing_gap_s: float = DEFAULT_GAP_S

    @classmethod
    def across(cls, link: Any, protocol: str, workdir: Path, **options: Any) -> BenchRequest:
        """A run across an emulated link (``qoelab.emulation``): its namespaces, address, interface."""
        return cls(protocol, link.server_ns, link.client_ns, link.server_ip, link.client_if, Path(workdir),
                   **{"prefix": link.prefix, **options})  # fmt: skip

    def driver_params(self) -> DriverParams:
        params = DriverParams(self.pages, self.quiet_s, self.pause_s, self.update_timeout_s, self.stable_s)
        params.validate()
        return params


def run_bench(
    req: BenchRequest, *, log: logging.Logger | None = None, on_step: Callable[[int], None] | None = None
) -> dict[str, Any]:
    """Run one trial on the namespace desktop; return updates, summary, clicks, artifacts, versions,
    timings. ``on_step(i)`` is called as the driver reaches each step."""
    protocol, server_ns, client_ns, server_ip = req.protocol, req.server_ns, req.client_ns, req.server_ip
    client_if, pages, seed, record, workload = req.client_if, req.pages, req.seed, req.record, req.workload
    log = log or logging.getLogger("qoelab.rd.bench")
    if protocol not in PROTOCOLS:
        raise ParameterError("protocol", f"must be one of {', '.join(PROTOCOLS)}, got {protocol!r}")
    if workload not in WORKLOADS:
        raise ParameterError("workload", f"must be one of {', '.join(WORKLOADS)}, got {workload!r}")
    if workload == "typing" and record:
        raise ParameterError("record", "the typing workload has no recorded mode (no reference to replay)")
    params = req.driver_params()
    plan = typing_plan(req.keystrokes, seed, req.typing_gap_s) if workload == "typing" else None
    merged = resolve_settings(protocol, req.settings)
    if record:
        require_tool("ffmpeg", "ffmpeg")  # say so before a session is started, not after it
    prefix = req.prefix or prefix_of(server_ns, client_ns)
    workdir = Path(req.workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    procs = ProcSet(prefix, workdir / "logs")
    timings: dict[str, float] = {}
    t0 = time.monotonic()
    try:
        # Pages: N distinct pages cycle, so N clicks show every page once (the last links to page 1).
        manifest = generate(workdir / "pages", pages=max(pages, 2), seed=seed)
        first = manifest.page(1).file
        typing = None
        if plan is not None:
            typing = (plan, generate_editor(workdir / "pages", manifest))
            first = EDITOR_FILE
            (workdir / "typing.json").write_text(json.dumps(plan.to_json(), indent=2) + "\n")
        server = start_server_side(
            procs,
            protocol,
            server_ns,
            server_ip,
            workdir / "pages",
            first,
            workdir,
            merged,
            prefix,
        )
        log.info(
            "%s: %s server up on %s:%d, pages at %s", prefix, protocol, server_ip, server.port, server.url
        )

        def server_display() -> Display | None:
            if protocol != "x2go":
                return server.display
            # The X2Go agent's display exists once the client has connected.
            try:
                inode = os.stat(f"/run/netns/{server_ns}").st_ino
            except OSError:
                inode = None
            return find_x2go_agent_display(inode)

        run = measure_client_side(
            procs, protocol, server, server_display, client_ns, client_if, server_ip, merged, workdir,
            manifest, params, SETUP_TIMEOUT_S[protocol], record=record, prefix=prefix, timings=timings,
            t0=t0, on_step=on_step, log=log, typing=typing,
        )  # fmt: skip
    finally:
        t2 = time.monotonic()
        if protocol == "x2go":
            from qoelab.rd.cleanup import terminate_x2go_sessions

            if terminate_x2go_sessions(prefix, server_ns):
                for proc in procs.procs:  # the session is over: nothing left for the client to end
                    if proc.name == "viewer-x2go":
                        proc.stop_signal = signal.SIGKILL
        procs.stop_all()
        for profile in workdir.glob("chromium-profile-*"):
            shutil.rmtree(profile, ignore_errors=True)  # browser state, not a result
        from qoelab.rd.cleanup import cleanup_leftovers

        leftovers = cleanup_leftovers(prefix, namespaces=[server_ns, client_ns])
        if leftovers:
            # Expected for X2Go (the session's processes are sshd's children, not ours).
            log.info("%s: cleanup removed %s", prefix, ", ".join(leftovers))
        timings["teardown_s"] = time.monotonic() - t2
    result = base_result(protocol, merged, run, workdir, procs, package_versions(protocol), timings)
    if plan is not None:
        result["workload"] = "typing"
        result["typing"] = plan.to_json()
        result["artifacts"].append(str(workdir / "typing.json"))
    add_recordings(result, run, workdir, prefix, log, timings)
    result = analyze_into(result, workdir, run.clicks, server_ip, req.quiet_s, req.update_timeout_s)
    if plan is not None and result.get("updates") is not None:
        add_echo_times(result, workdir, run.clicks, server_ip)
    return result


def add_echo_times(result: dict[str, Any], workdir: Path, clicks: list, server_ip: str) -> None:
    """The typing workload: each update (a keystroke) gets its echo time from the capture
    (``keystrokes.echo_times``); result.json is written again with it."""
    from qoelab.rd.keystrokes import echo_times

    echoes = {e["index"]: e for e in echo_times(workdir / "capture.pcap", clicks, server_ip)}
    for update in result["updates"]:
        e = echoes.get(update.get("index")) or {}
        update["input_t"], update["echo_t"], update["echo_ms"] = (
            e.get("input_t"),
            e.get("echo_t"),
            e.get("echo_ms"),
        )
    (workdir / "result.json").write_text(json.dumps(result, indent=2, default=str) + "\n")


def base_result(
    protocol: str, settings: dict[str, Any], run: ClientRun, workdir: Path, procs: ProcSet,
    versions: dict[str, Any], timings: dict[str, float],
) -> dict[str, Any]:  # fmt: skip
    """The result document before analysis; saves clicks.json and manifest.json beside the capture."""
    from qoelab.rd.clicks import save_clicks

    clicks, mapping = run.clicks, run.mapping
    save_clicks(workdir / "clicks.json", clicks)
    (workdir / "manifest.json").write_text((workdir / "pages" / "manifest.json").read_text())
    return {
        "protocol": protocol,
        "settings": settings,
        "clicks": [c.to_json() for c in clicks],
        "mapping": mapping,
        "artifacts": [
            str(workdir / "capture.pcap"), str(workdir / "clicks.json"), *(str(p) for p in procs.logs()),
            str(workdir / "manifest.json"),
        ],
        "versions": versions,
        "timings": timings,
        "updates": None,
        "summary": None,
    }  # fmt: skip


def analyze_into(
    result: dict[str, Any], workdir: Path, clicks: list, server_ip: str, quiet_s: float,
    update_timeout_s: float,
) -> dict[str, Any]:  # fmt: skip
    """Packet analysis of ``capture.pcap`` into ``result`` (updates, summary), written to result.json."""
    try:
        from qoelab.rd import analysis
    except ImportError as err:  # the analysis module is optional for the driver itself
        result["analysis_error"] = f"packet analysis not available: {err}"
        return result
    server_ep = analysis.parse_endpoint(server_ip)
    analyzed = analysis.analyze(
        workdir / "capture.pcap", clicks, server=server_ep, quiet_s=quiet_s, timeout_s=update_timeout_s
    )
    doc = analyzed.to_json()
    by_index = {c.index: c for c in clicks}
    for update in doc.get("updates") or []:
        # Pixel timing beside packet timing: click -> last change of the client screen.
        click = by_index.get(update.get("index"))
        stable = click.pixel_stable_t if click else None
        update["pixel_ms"] = (stable - click.t) * 1e3 if click and stable else None
    result["updates"] = doc.get("updates")
    result["summary"] = doc.get("summary")
    result["analysis"] = {k: v for k, v in doc.items() if k not in ("updates", "summary")}
    (workdir / "result.json").write_text(json.dumps(result, indent=2, default=str) + "\n")
    return result
