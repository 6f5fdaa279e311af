"""Playwright in Debian's Chromium (/usr/bin/chromium): no browser downloads, sync API.

``chromium_page`` gives a fresh page at a laptop-sized viewport; console errors and failed
requests of the page are collected in ``page.qoelab_problems`` so a test can assert there were none.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

# Playwright's sync API keeps an asyncio loop running in the test's thread, so Django refuses ORM
# calls there (fixture teardown, assertions on rows) unless told that this is intended; the ORM
# calls are still plain synchronous ones (Django's documented switch for exactly this case).
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",  # we run as root in CI
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
]
REPO = Path(__file__).resolve().parents[2]
RESULTS = REPO / "test-results"
STATIC_MARKER = REPO / "frontend" / "dist" / "vendor" / "chart.js" / "chart.umd.min.js"


@pytest.fixture(scope="module")  # Playwright holds an asyncio loop open; pyroute2 tests must not see it
def chromium() -> Iterator[Any]:
    if not Path(CHROMIUM).exists() and not shutil.which("chromium"):
        pytest.fail("Chromium is missing: apt-get install -y chromium (Playwright's download is not used)")
    if not STATIC_MARKER.exists():
        pytest.fail(f"{STATIC_MARKER} is missing: build the front end first (make frontend)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield browser
        browser.close()


@pytest.fixture
def chromium_page(chromium: Any) -> Iterator[Any]:
    context = chromium.new_context(viewport={"width": 1366, "height": 768})
    page = context.new_page()
    problems: list[str] = []
    page.on("console", lambda m: problems.append(f"console: {m.text}") if m.type == "error" else None)
    page.on("pageerror", lambda e: problems.append(f"page error: {e}"))
    page.on("requestfailed", lambda r: problems.append(f"request failed: {r.url}"))
    page.qoelab_problems = problems
    yield page
    context.close()


@pytest.fixture
def save_screenshot() -> Any:
    """``save_screenshot(page, "sweeps/name")``: a full-page PNG under test-results/ for humans."""

    def save(page: Any, name: str) -> Path:
        path = RESULTS / f"{name}.png"
        path.parent.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(path), full_page=True)
        return path

    return save
