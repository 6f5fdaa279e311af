"""Screen recordings of an rd_qoe trial for recorded-mode ratings (issue 5): degraded and reference.

* The **degraded** recording is the client display (the viewer's 800x600 desktop area) grabbed
  with ffmpeg's x11grab while the slow-motion driver clicks.
* The **reference** is the same workload without a remote desktop: the pages rendered locally by
  the kiosk browser on a throwaway 800x600 Xvfb (no namespace, ``file://`` pages), clicked at the
  same moments relative to the start of the recording, recorded the same way and for as long.

Both are grabbed into a lossless intermediate (``libx264rgb -qp 0``, cheap per frame, so the
measured session is disturbed as little as possible) and converted to VP8 WebM after the session
is gone, because evaluators' browsers (Chromium) do not all play H.264. ffmpeg runs in its own
process group with the trial's marker in its environment and is stopped with ``q`` on stdin, so the
file is finalised. Beside each video, ``<name>.json`` holds the recording's start as an epoch (the
x11grab input's first timestamp: the clock of ``clicks.json``) and the clicks' offsets into it.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from qoelab.procs import ProcSet, SetupError, marked_env, require_tool, run, wait_for
from qoelab.rd.display import Display, start_xvfb
from qoelab.rd.workload import Manifest, find_link

log = logging.getLogger("qoelab.rd.record")

FPS = 25  # fast enough to see a 200 ms update build up; x11grab cost grows with it
SIZE = (800, 600)  # the workload page = the server screen = what evaluators see
REFERENCE_NAME = "reference.webm"  # the ratings app takes a video named reference* as the reference
RECORDING_NAME = "recording.webm"
LEAD_S = 1.0  # the first page is shown this long before the first click, also in the reference
TAIL_S = 1.0  # and the last page this long after the last update
_START = re.compile(r"x11grab.*?\n.*?start: (\d+\.\d+)", re.S)


@dataclass
class Recording:
    """One ffmpeg x11grab run; ``start_epoch`` is the time of its first frame (epoch seconds)."""

    display: Display
    raw_path: Path
    prefix: str
    log_path: Path
    region: tuple[int, int, int, int] = (0, 0, *SIZE)  # x, y, w, h on the display
    fps: int = FPS
    popen: subprocess.Popen | None = None
    start_epoch: float | None = None
    stop_epoch: float | None = None
    info: dict[str, Any] = field(default_factory=dict)

    def start(self, timeout: float = 15.0) -> Recording:
        ffmpeg = require_tool("ffmpeg", "ffmpeg")
        x, y, w, h = self.region
        argv = [
            ffmpeg, "-hide_banner", "-nostats", "-loglevel", "info", "-y",
            "-f", "x11grab", "-draw_mouse", "1", "-framerate", str(self.fps), "-video_size", f"{w}x{h}",
            "-i", f"{self.display.name}+{x},{y}",
            "-c:v", "libx264rgb", "-preset", "ultrafast", "-qp", "0", "-threads", "1",
            str(self.raw_path),
        ]  # fmt: skip
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "ab") as out:
            out.write(f"$ {' '.join(argv)}\n".encode())
            out.flush()
            self.popen = subprocess.Popen(
                argv,
                stdin=subprocess.PIPE,
                stdout=out,
                stderr=subprocess.STDOUT,
                env=marked_env(self.prefix, self.display.env()),
                start_new_session=True,  # its own process group: a stop never reaches the caller
            )
        before = time.time()

        def started() -> float | None:
            m = _START.search(self._log())
            return float(m.group(1)) if m else None

        try:
            self.start_epoch = float(wait_for(f"ffmpeg recording {self.display.name}", started, timeout))  # type: ignore[arg-type]
        except SetupError:
            self.stop()
            raise
        if self.popen.poll() is not None:
            raise SetupError(f"ffmpeg recording {self.display.name} exited: {self._log()[-400:]}")
        # x11grab stamps frames with the wall clock; a start far from "now" would be another clock.
        if not before - 5 < self.start_epoch < time.time() + 5:
            self.info["start_epoch_from"] = "spawn time (x11grab start not a wall-clock time)"
            self.start_epoch = before
        return self

    def _log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""

    def alive(self) -> bool:
        return self.popen is not None and self.popen.poll() is None

    def stop(self, timeout: float = 15.0) -> None:
        """'q' on stdin (ffmpeg writes the trailer and exits), then SIGINT, then SIGKILL to the group."""
        if self.popen is None:
            return
        self.stop_epoch = self.stop_epoch or time.time()
        if self.popen.poll() is None and self.popen.stdin is not None:
            with contextlib.suppress(OSError, ValueError):
                self.popen.stdin.write(b"q")
                self.popen.stdin.flush()
        for sig in (None, signal.SIGINT, signal.SIGKILL):
            if sig is not None:
                self.info.setdefault("stopped_with", []).append(signal.Signals(sig).name)
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(self.popen.pid, sig)
            try:
                self.popen.wait(timeout=timeout)
                break
            except subprocess.TimeoutExpired:
                continue
        with contextlib.suppress(OSError, ValueError):
            if self.popen.stdin is not None:
                self.popen.stdin.close()
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.popen.pid, signal.SIGKILL)  # anything left in the group


def to_webm(raw: Path, out: Path, log_path: Path, prefix: str, timeout: float = 600) -> Path:
    """Convert a raw recording to VP8 WebM (plays in Chromium and Firefox without plug-ins)."""
    ffmpeg = require_tool("ffmpeg", "ffmpeg")
    argv = [
        ffmpeg, "-hide_banner", "-nostats", "-loglevel", "warning", "-y", "-i", str(raw),
        # Text must stay readable (image clarity is rated): a low CRF with a generous bit-rate cap.
        "-c:v", "libvpx", "-crf", "6", "-b:v", "4M", "-deadline", "good", "-cpu-used", "4",
        "-pix_fmt", "yuv420p", "-an", str(out),
    ]  # fmt: skip
    with open(log_path, "ab") as log_out:
        log_out.write(f"$ {' '.join(argv)}\n".encode())
        log_out.flush()
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=log_out,
            stderr=subprocess.STDOUT,
            env=marked_env(prefix),
            start_new_session=True,
        )
        try:
            rc = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            raise SetupError(f"ffmpeg: converting {raw.name} to WebM took more than {timeout:g} s") from None
    if rc != 0 or not out.exists() or out.stat().st_size == 0:
        raise SetupError(f"ffmpeg: converting {raw.name} to WebM failed (exit {rc}); see {log_path.name}")
    return out


def probe(path: Path) -> dict[str, Any]:
    """Codec, size and duration of a video (ffprobe)."""
    res = run(
        [
            require_tool("ffprobe", "ffmpeg"), "-v", "error", "-select_streams", "v:0", "-show_entries",
            "stream=codec_name,width,height:format=duration,format_name", "-of", "json", str(path),
        ],
        timeout=30,
    )  # fmt: skip
    if res.returncode != 0:
        raise SetupError(f"ffprobe {path.name}: {res.stderr.strip()[:300]}")
    doc = json.loads(res.stdout)
    stream = (doc.get("streams") or [{}])[0]
    fmt = doc.get("format") or {}
    return {
        "codec": stream.get("codec_name"),
        "width": stream.get("width"),
        "height": stream.get("height"),
        "duration_s": float(fmt["duration"]) if fmt.get("duration") not in (None, "N/A") else None,
        "format": fmt.get("format_name"),
    }


def _meta(rec: Recording, clicks: list[dict[str, Any]], kind: str, video: Path) -> dict[str, Any]:
    start = rec.start_epoch or 0.0
    return {
        "kind": kind,
        "video": video.name,
        "start_epoch": rec.start_epoch,
        "stop_epoch": rec.stop_epoch,
        "fps": rec.fps,
        "region": list(rec.region),
        "display": rec.display.name,
        # Offsets of the clicks into the video (seconds); the epochs are those of clicks.json.
        "clicks": [{**c, "offset_s": round(c["t"] - start, 4)} for c in clicks],
        **({"video_info": probe(video)} if video.exists() else {}),
        **rec.info,
    }


def finish(rec: Recording, clicks: list[dict[str, Any]], kind: str, out: Path, prefix: str) -> Path:
    """Stop (if needed), convert to WebM, write ``<out>.json``; the raw file is removed."""
    rec.stop()
    try:
        to_webm(rec.raw_path, out, rec.log_path, prefix)
    finally:
        rec.raw_path.unlink(missing_ok=True)
    out.with_suffix(".json").write_text(json.dumps(_meta(rec, clicks, kind, out), indent=2) + "\n")
    return out


def record_reference(
    workdir: Path,
    manifest: Manifest,
    pages_dir: Path,
    clicks: list[dict[str, Any]],
    degraded_start: float,
    degraded_duration: float,
    prefix: str,
    log: logging.Logger | None = None,
) -> Path:
    """The workload rendered locally, clicked at the degraded recording's click offsets; returns the WebM.

    ``clicks`` are clicks.json entries (``t`` epoch, ``page``: the page the click loads);
    ``degraded_start``/``degraded_duration`` are the degraded recording's start epoch and length.
    """
    from qoelab.rd.desktop import chromium_argv

    log = log or logging.getLogger("qoelab.rd.record")
    procs = ProcSet(prefix, workdir / "logs")
    profile = workdir / "chromium-profile-reference"
    rec: Recording | None = None
    done: list[dict[str, Any]] = []
    try:
        screen = start_xvfb(procs, *SIZE, name="reference-xvfb")
        first = (pages_dir / manifest.page(1).file).resolve().as_uri()
        browser = procs.spawn("reference-chromium", chromium_argv(first, str(profile)), env=screen.env())
        wait_for(
            f"reference browser showing page 1 on {screen.name}",
            lambda: find_link(screen.grab()),
            60,
            browser,
        )
        time.sleep(0.5)  # the page's images finish decoding
        rec = Recording(
            screen, workdir / "reference.raw.mkv", prefix, workdir / "logs" / "ffmpeg-reference.log"
        )
        rec.start()
        start = rec.start_epoch or time.time()
        current = 1
        for c in clicks:
            at = start + (float(c["t"]) - degraded_start)
            delay = at - time.time()
            if delay > 0:
                time.sleep(delay)
            link = manifest.page(current).link
            cx, cy = link.center
            screen.xdotool("mousemove", str(cx), str(cy))
            t = time.time()
            screen.xdotool("click", "1")
            done.append({"index": c.get("index"), "t": t, "page": manifest.page(current).next_number,
                         "degraded_offset_s": round(float(c["t"]) - degraded_start, 4)})  # fmt: skip
            current = manifest.page(current).next_number
        end = start + degraded_duration
        if end > time.time():
            time.sleep(end - time.time())
        rec.stop_epoch = time.time()
        rec.stop()
        if not rec.raw_path.exists():
            raise SetupError(f"the reference recording produced no file ({rec.log_path.name})")
    finally:
        if rec is not None:
            rec.stop()
        procs.stop_all()
        shutil.rmtree(profile, ignore_errors=True)
    out = finish(rec, done, "reference", workdir / REFERENCE_NAME, prefix)
    log.info("%s: reference recording %s (%.1f s)", prefix, out.name, degraded_duration)
    return out
