"""Workload pages (thesis Fig. 4.2): images and text at set ratios, a link to the next page.

Deterministic from a seed: the same seed gives byte-identical pages and manifest. Each page is
800 x 600, an image block covering ``ratio`` of the page area (generated, never downloaded) and
text elsewhere, plus one solid magenta block link at a random position. The link colour does not
occur in the images (their green channel never drops below 110), so the driver can also find the
link on a screenshot. Page ``i`` links to ``i + 1``; the last page links back to the first.
"""

from __future__ import annotations

import html
import json
import random
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from qoelab.errors import ParameterError

DEFAULT_RATIOS = (0.0, 0.25, 0.5, 0.75, 1.0)
WIDTH, HEIGHT = 800, 600
LINK_W, LINK_H = 160, 56
LINK_RGB = (224, 16, 122)
MAX_PAGES = 100
_WORDS = (  # noqa: SIM905 - one string reads better than 49 list items
    "remote desktop protocol screen update image event transfer bandwidth delay loss network "
    "client server frame pixel window cursor click page link response time throughput quality "
    "experience evaluation mean opinion score thin terminal virtual machine hypervisor compression "
    "cache glyph font region damage encoding tile rectangle palette gradient codec stream packet"
).split()


@dataclass(frozen=True)
class Rect:
    x: int
    y: int
    w: int
    h: int

    @property
    def center(self) -> tuple[int, int]:
        return self.x + self.w // 2, self.y + self.h // 2


@dataclass(frozen=True)
class Page:
    number: int  # 1-based
    file: str
    ratio: float
    link: Rect
    next_number: int


@dataclass(frozen=True)
class Manifest:
    seed: int
    width: int
    height: int
    pages: list[Page]

    def page(self, number: int) -> Page:
        return self.pages[number - 1]

    def to_json(self) -> dict[str, Any]:
        return {
            "version": 1,
            "seed": self.seed,
            "width": self.width,
            "height": self.height,
            "link_rgb": list(LINK_RGB),
            "pages": [asdict(p) for p in self.pages],
        }

    @classmethod
    def load(cls, path: Path) -> Manifest:
        doc = json.loads(Path(path).read_text())
        pages = [
            Page(p["number"], p["file"], p["ratio"], Rect(**p["link"]), p["next_number"])
            for p in doc["pages"]
        ]
        return cls(doc["seed"], doc["width"], doc["height"], pages)


def _check(pages: int, ratios: tuple[float, ...]) -> None:
    if isinstance(pages, bool) or not isinstance(pages, int) or not 1 <= pages <= MAX_PAGES:
        raise ParameterError("pages", f"must be an integer from 1 to {MAX_PAGES}, got {pages!r}")
    if not ratios:
        raise ParameterError("ratios", "needs at least one image-area ratio")
    for r in ratios:
        if not 0 <= r <= 1:
            raise ParameterError("ratios", f"each ratio must be between 0 and 1, got {r!r}")


def _image(rng: np.random.Generator, w: int, h: int) -> np.ndarray:
    """A photo-like picture: smooth colour fields, shapes and noise (hard to compress, like photos)."""
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float32)
    img = np.zeros((h, w, 3), np.float32)
    for c in range(3):
        fx, fy, ph = rng.uniform(0.005, 0.03), rng.uniform(0.005, 0.03), rng.uniform(0, 6.28)
        img[..., c] = 128 + 90 * np.sin(xx * fx + ph) * np.cos(yy * fy - ph)
    for _ in range(int(rng.integers(4, 9))):
        cx, cy, rad = rng.uniform(0, w), rng.uniform(0, h), rng.uniform(20, 120)
        mask = (xx - cx) ** 2 + (yy - cy) ** 2 < rad**2
        img[mask] = img[mask] * 0.4 + rng.uniform(0, 255, 3) * 0.6
    img += rng.normal(0, 14, img.shape)
    img = np.clip(img, 0, 255)
    img[..., 1] = np.maximum(img[..., 1], 110)  # keeps the magenta link colour unique on screen
    return img.astype(np.uint8)


def _text(rnd: random.Random, words: int) -> str:
    paras = []
    while words > 0:
        n = min(words, rnd.randint(30, 70))
        paras.append(" ".join(rnd.choice(_WORDS) for _ in range(n)).capitalize() + ".")
        words -= n
    return "".join(f"<p>{html.escape(p)}</p>" for p in paras)


def _page_html(
    number: int, ratio: float, images: list[tuple[str, Rect]], link: Rect, text: str, nxt: str
) -> str:
    imgs = "".join(
        f'<img src="{src}" style="position:absolute;left:{r.x}px;top:{r.y}px;width:{r.w}px;height:{r.h}px">'
        for src, r in images
    )
    text_left = images[0][1].w if images and ratio < 1 else 0
    text_block = (
        f'<div style="position:absolute;left:{text_left + 12}px;top:8px;right:12px;bottom:8px;'
        "overflow:hidden;"
        f'font:15px/1.45 sans-serif;color:#111">{text}</div>'
        if ratio < 1
        else ""
    )
    r, g, b = LINK_RGB
    return (
        "<!doctype html>\n<html><head><meta charset='utf-8'>"
        f"<title>qoelab page {number}</title>"
        "<style>html,body{margin:0;padding:0;width:800px;height:600px;overflow:hidden;background:#fdfdf6}"
        "a.next{position:absolute;display:block;text-decoration:none;color:#fff;font:bold 22px sans-serif;"
        "text-align:center;cursor:default}</style></head><body>"
        f"{imgs}{text_block}"
        f'<a class="next" href="{nxt}" style="left:{link.x}px;top:{link.y}px;'
        f"width:{link.w}px;height:{link.h}px;"
        f'line-height:{link.h}px;background:rgb({r},{g},{b})">NEXT {number}</a>'
        "</body></html>\n"
    )


def generate(
    out_dir: Path, pages: int = 5, seed: int = 1, ratios: tuple[float, ...] = DEFAULT_RATIOS
) -> Manifest:
    """Write ``page<N>.html``, their images and ``manifest.json`` into ``out_dir``."""
    from PIL import Image

    _check(pages, tuple(ratios))
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    rnd = random.Random(seed)
    rng = np.random.default_rng(seed)
    result = []
    for number in range(1, pages + 1):
        ratio = float(ratios[(number - 1) % len(ratios)])
        img_w = round(WIDTH * ratio)
        images: list[tuple[str, Rect]] = []
        if img_w > 0:
            # Two stacked pictures fill the left strip; area = ratio of the page.
            top_h = rnd.randint(HEIGHT // 3, 2 * HEIGHT // 3)
            for k, rect in enumerate((Rect(0, 0, img_w, top_h), Rect(0, top_h, img_w, HEIGHT - top_h))):
                name = f"p{number}-{k}.jpg"
                Image.fromarray(_image(rng, rect.w, rect.h)).save(out_dir / name, quality=88)
                images.append((name, rect))
        link = Rect(rnd.randint(8, WIDTH - LINK_W - 8), rnd.randint(8, HEIGHT - LINK_H - 8), LINK_W, LINK_H)
        nxt = number % pages + 1
        text = _text(rnd, 500)
        (out_dir / f"page{number}.html").write_text(
            _page_html(number, ratio, images, link, text, f"page{nxt}.html")
        )
        result.append(Page(number, f"page{number}.html", ratio, link, nxt))
    manifest = Manifest(seed, WIDTH, HEIGHT, result)
    (out_dir / "manifest.json").write_text(json.dumps(manifest.to_json(), indent=2) + "\n")
    return manifest


def find_link(img: np.ndarray, tol: int = 48) -> Rect | None:
    """The magenta link block on a screenshot (H x W x 3), or None.

    The block is the connected region of link-coloured pixels whose size is closest to the link's
    (the white label inside leaves holes; lossy encodings blur the edges, hence the tolerance).
    """
    from scipy import ndimage

    diff = np.abs(img[..., :3].astype(np.int16) - np.array(LINK_RGB, np.int16)).max(axis=2)
    mask = diff <= tol
    if int(mask.sum()) < LINK_W * LINK_H // 4:
        return None
    # Close the label's holes so the block is one region.
    labels, n = ndimage.label(ndimage.binary_closing(mask, structure=np.ones((5, 5)), iterations=2))
    best, best_err = None, 0.35
    for sl in ndimage.find_objects(labels):
        if sl is None:
            continue
        h, w = sl[0].stop - sl[0].start, sl[1].stop - sl[1].start
        err = max(abs(w - LINK_W) / LINK_W, abs(h - LINK_H) / LINK_H)
        if err < best_err:
            best, best_err = Rect(int(sl[1].start), int(sl[0].start), int(w), int(h)), err
    return best


# --------------------------------------------------------------------------------------------------
# The ``typing`` workload's editor page

EDITOR_FILE = "editor.html"
EDITOR_MARGIN = 20
EDITOR_H = 250


def editor_area(manifest: Manifest) -> Rect:
    """Where the editor's text area sits on the 800 x 600 page: the half the first page's link is not in."""
    link = manifest.page(1).link
    top = EDITOR_MARGIN if link.y + link.h // 2 >= HEIGHT // 2 else HEIGHT - EDITOR_MARGIN - EDITOR_H
    return Rect(EDITOR_MARGIN, top, WIDTH - 2 * EDITOR_MARGIN, EDITOR_H)


def generate_editor(out_dir: Path, manifest: Manifest) -> Rect:
    """Write ``editor.html`` beside the pages: an autofocused ``<textarea>``, the plainest editor the
    desktop's browser has, and the magenta block where page 1 has its link (a plain block, not a link:
    the viewer-ready wait and the calibration find it as on page 1). The caret is transparent: a
    blinking caret would redraw the screen twice a second and send updates that no keystroke caused.
    Returns the text area's rectangle in page coordinates."""
    area, link = editor_area(manifest), manifest.page(1).link
    r, g, b = LINK_RGB
    page = (
        "<!doctype html>\n<html><head><meta charset='utf-8'><title>qoelab editor</title>"
        "<style>html,body{margin:0;padding:0;width:800px;height:600px;overflow:hidden;background:#fdfdf6}"
        "textarea{position:absolute;box-sizing:border-box;margin:0;padding:8px;border:1px solid #888;"
        "outline:none;resize:none;background:#fff;color:#111;font:16px/1.4 monospace;"
        "caret-color:transparent}"
        "div.mark{position:absolute}</style></head><body>"
        f'<div class="mark" style="left:{link.x}px;top:{link.y}px;width:{link.w}px;height:{link.h}px;'
        f'background:rgb({r},{g},{b})"></div>'
        f'<textarea autofocus spellcheck="false" style="left:{area.x}px;top:{area.y}px;width:{area.w}px;'
        f'height:{area.h}px"></textarea>'
        "</body></html>\n"
    )
    (Path(out_dir) / EDITOR_FILE).write_text(page)
    return area
