"""Workload pages: deterministic from the seed, manifest with ratios and link rectangles."""

from __future__ import annotations

import hashlib
import json

import numpy as np
import pytest
from PIL import Image

from qoelab.errors import ParameterError
from qoelab.rd.workload import HEIGHT, LINK_RGB, WIDTH, Manifest, Rect, find_link, generate


def _digest(folder) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.iterdir())}


def test_it_generates_identical_pages_from_the_same_seed(tmp_path):
    generate(tmp_path / "a", pages=5, seed=7)
    generate(tmp_path / "b", pages=5, seed=7)
    assert _digest(tmp_path / "a") == _digest(tmp_path / "b")


def test_it_generates_different_pages_from_another_seed(tmp_path):
    a = generate(tmp_path / "a", pages=3, seed=1)
    b = generate(tmp_path / "b", pages=3, seed=2)
    assert [p.link for p in a.pages] != [p.link for p in b.pages]


def test_the_manifest_records_ratios_links_and_the_cycle(tmp_path):
    m = generate(tmp_path, pages=6, seed=3)
    doc = json.loads((tmp_path / "manifest.json").read_text())
    assert [p["ratio"] for p in doc["pages"]] == [0.0, 0.25, 0.5, 0.75, 1.0, 0.0]
    assert [p.next_number for p in m.pages] == [2, 3, 4, 5, 6, 1]
    for page in m.pages:
        r = page.link
        assert r.x >= 0 and r.x + r.w <= WIDTH and r.y >= 0 and r.y + r.h <= HEIGHT
        html = (tmp_path / page.file).read_text()
        assert f'href="page{page.next_number}.html"' in html
        assert f"left:{r.x}px;top:{r.y}px" in html
    assert Manifest.load(tmp_path / "manifest.json") == m


def test_image_area_matches_the_ratio(tmp_path):
    m = generate(tmp_path, pages=5, seed=1)
    for page in m.pages:
        area = 0
        for img in tmp_path.glob(f"p{page.number}-*.jpg"):
            w, h = Image.open(img).size
            area += w * h
        assert area / (WIDTH * HEIGHT) == pytest.approx(page.ratio, abs=0.002)


def test_it_finds_the_link_block_on_a_screenshot_but_not_in_the_images(tmp_path):
    generate(tmp_path, pages=5, seed=1)
    screen = np.full((768, 1024, 3), 250, np.uint8)
    photo = np.asarray(Image.open(tmp_path / "p5-0.jpg").convert("RGB"))
    screen[: photo.shape[0], : photo.shape[1]] = photo[:768, :1024]
    assert find_link(screen) is None
    screen[300:356, 400:560] = LINK_RGB
    screen[320:336, 440:520] = 255  # the white label inside the block
    assert find_link(screen) == Rect(400, 300, 160, 56)


def test_it_rejects_a_page_count_out_of_bounds(tmp_path):
    with pytest.raises(ParameterError, match="pages"):
        generate(tmp_path, pages=0)
    with pytest.raises(ParameterError, match="ratios"):
        generate(tmp_path, pages=2, ratios=(0.5, 1.5))
