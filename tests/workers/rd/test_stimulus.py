"""The first-frame check of a recording against its reference (qoelab.rd.stimulus)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from qoelab.rd.stimulus import MAX_MEAN_DIFF, check, compare, first_frame

BG = (253, 253, 246)  # the workload pages' background


def _page(w: int = 800, h: int = 600, lit: tuple[int, int] = (799, 599), shift: int = 0) -> np.ndarray:
    img = np.zeros((h, w, 3), np.uint8)
    img[: lit[1], : lit[0]] = BG
    img[100 + shift : 180 + shift, 60:740] = (30, 60, 160)  # a heading bar
    img[260:520, 60 + shift : 400 + shift] = (200, 40, 40)  # a picture
    return img


def test_the_same_page_with_codec_noise_passes() -> None:
    ref = _page()
    noise = np.random.default_rng(1).integers(-6, 7, ref.shape)
    rec = np.clip(ref.astype(int) + noise, 0, 255).astype(np.uint8)
    out = compare(rec, ref)
    assert out["ok"], out
    assert out["mean_diff"] < MAX_MEAN_DIFF / 2


def test_a_cropped_desktop_a_moved_page_and_another_size_are_named() -> None:
    ref = _page()
    band = compare(_page(lit=(768, 576)), ref)  # X2Go's old 3/4-screen session
    assert not band["ok"] and "black band" in band["problems"][0] and band["desktop_extent"] == [768, 576]
    moved = compare(_page(shift=60), ref)
    assert not moved["ok"] and "differs from the reference" in moved["problems"][0]
    small = compare(_page(w=768, h=576, lit=(767, 575)), ref)
    assert not small["ok"] and "size 768x576 differs" in small["problems"][0]


def test_the_first_frame_is_decoded_at_the_videos_own_size(tmp_path: Path) -> None:
    if shutil.which("ffmpeg") is None:
        pytest.skip("ffmpeg is not installed")
    video = tmp_path / "v.webm"
    subprocess.run(
        ["ffmpeg", "-v", "error", "-f", "lavfi", "-i", "testsrc=size=800x600:rate=5:duration=1",
         "-c:v", "libvpx", "-b:v", "1M", str(video)],
        check=True, timeout=60,
    )  # fmt: skip
    frame = first_frame(video)
    assert frame.shape == (600, 800, 3) and frame.max() > 200
    assert check(video, video)["ok"]
