"""Does a recording show what the reference shows, apart from what the network did?

An evaluator in recorded mode compares the recording of the client display with the reference
rendered locally. Both begin on the workload's first page, shown for ``record.LEAD_S`` before the
first click, so their first frames must agree: the same size, no black band (a client that fills
only part of its screen, as X2Go once did with 768 x 576), and the same page in the same place.
``check`` compares the two first frames and says what differs; ``rd_qoe`` stores the answer with
the recordings, and the tests hold every protocol to it.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import numpy as np

from qoelab.procs import require_tool
from qoelab.rd.geometry import desktop_extent, fills
from qoelab.rd.record import SIZE, probe

# Mean absolute difference (0-255, grey) of the two first frames, downscaled to 200 x 150 to
# forgive codec noise and sub-pixel font placement: a lossy VP8 frame of the same page stays far
# below it; a shifted, cropped or different page is well above (tests/workers/rd/test_stimulus.py).
MAX_MEAN_DIFF = 12.0


def first_frame(video: Path, size: tuple[int, int] = SIZE) -> np.ndarray:
    """The first decoded frame at the video's own size, as an RGB array (height, width, 3)."""
    info = probe(video)
    w, h = int(info["width"] or size[0]), int(info["height"] or size[1])
    res = subprocess.run(
        [require_tool("ffmpeg", "ffmpeg"), "-v", "error", "-i", str(video), "-frames:v", "1",
         "-f", "rawvideo", "-pix_fmt", "rgb24", "-"],
        capture_output=True, timeout=60, check=False,
    )  # fmt: skip
    if res.returncode != 0 or len(res.stdout) != w * h * 3:
        raise ValueError(f"cannot decode the first frame of {video.name}")
    return np.frombuffer(res.stdout, np.uint8).reshape(h, w, 3)


def _grey_small(img: np.ndarray, size: tuple[int, int] = (200, 150)) -> np.ndarray:
    """Block-mean downscale to ``size`` (exact when the frame is a multiple of it, as 800 x 600 is)."""
    h, w = img.shape[:2]
    bw, bh = size
    g = img[: h - h % bh, : w - w % bw].astype(np.float32).mean(axis=2)
    return g.reshape(bh, g.shape[0] // bh, bw, g.shape[1] // bw).mean(axis=(1, 3))


def compare(recording: np.ndarray, reference: np.ndarray) -> dict[str, Any]:
    """What differs between two first frames; ``ok`` when nothing does."""
    problems: list[str] = []
    rec_size = [int(recording.shape[1]), int(recording.shape[0])]
    ref_size = [int(reference.shape[1]), int(reference.shape[0])]
    if rec_size != ref_size:
        problems.append(
            f"size {rec_size[0]}x{rec_size[1]} differs from the reference's {ref_size[0]}x{ref_size[1]}"
        )
    extent = list(desktop_extent(recording, (0, 0), tuple(rec_size)))
    if not fills(extent, tuple(ref_size)):
        problems.append(f"the desktop covers only {extent[0]}x{extent[1]} of the frame (a black band)")
    diff = None
    if rec_size == ref_size:
        diff = float(np.abs(_grey_small(recording) - _grey_small(reference)).mean())
        if diff > MAX_MEAN_DIFF:
            problems.append(
                f"the page differs from the reference's (mean difference {diff:.1f} > {MAX_MEAN_DIFF})"
            )
    return {
        "ok": not problems,
        "problems": problems,
        "recording_size": rec_size,
        "reference_size": ref_size,
        "desktop_extent": extent,
        "mean_diff": None if diff is None else round(diff, 2),
    }


def check(recording: Path, reference: Path) -> dict[str, Any]:
    """``compare`` of the first frames of two videos."""
    return compare(first_frame(recording), first_frame(reference))
