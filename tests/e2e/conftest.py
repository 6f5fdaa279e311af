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
    # A request the page itself abandoned (it navigated away while a chart was loading) is not a
    # failure: Chromium reports it as net::ERR_ABORTED, every real failure with another reason.
    page.on(
        "requestfailed",
        lambda r: None if r.failure == "net::ERR_ABORTED" else problems.append(f"request failed: {r.url}"),
    )
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


@pytest.fixture
def log_in() -> Any:
    """``log_in(page, base_url, user, next="/")``: the login form filled as a person would; waits
    until the next page has loaded. Test users' passwords are ``<username>-password-1`` (cast.py)."""

    def go(page: Any, base_url: str, user: Any, next: str = "/") -> None:
        page.goto(f"{base_url}/accounts/login/?next={next}")
        page.get_by_label("Username").fill(user.username)
        page.get_by_label("Password").fill(f"{user.username}-password-1")
        with page.expect_navigation():
            page.get_by_role("button", name="Log in").click()
        page.wait_for_load_state("load")

    return go


@pytest.fixture
def recorded_sweep(alice: Any, settings: Any, tmp_path: Path) -> Any:
    """An rd_qoe demo sweep (vnc and spice at 10 and 100 ms) whose trials carry real 1 s WebM videos."""
    from ratings import demo

    settings.MEDIA_ROOT = tmp_path / "media"
    points = [
        {"protocol": p, "rate": "1mbit", "delay": d} for p in ("vnc", "spice") for d in ("10ms", "100ms")
    ]
    sweep = demo.demo_sweep(alice, points)
    ref = demo.make_video(tmp_path / "reference.webm", seconds=1.0)
    deg = demo.make_video(tmp_path / "degraded.webm", degraded=True, seconds=1.0)
    for trial in sweep.trials.all():
        demo.add_video_artifact(trial, ref, reference=True)
        demo.add_video_artifact(trial, deg)
    return sweep


@pytest.fixture
def lab(alice: Any, recorded_sweep: Any) -> dict[str, Any]:
    """A recorded sweep, one of its trials, a (not yet open) campaign made from it and an imported
    study: what the researcher's pages show."""
    from ratings import campaigns, studies

    campaign = campaigns.create_campaign(alice, name="page check", sweep=recorded_sweep, seed=3)
    # A public rating set imported as a study (tests/data/ratings: NFLX Public, 79 stimuli).
    text = (Path(__file__).resolve().parents[1] / "data" / "ratings" / "nflx_public.csv").read_text()
    study = studies.import_study(alice, name="NFLX Public", text=text, file_name="nflx_public.csv")
    return {
        "sweep": recorded_sweep,
        "trial": recorded_sweep.trials.first(),
        "campaign": campaign,
        "study": study,
    }


@pytest.fixture
def researcher_paths(lab: dict[str, Any]) -> list[str]:
    """Every researcher page, one of each kind, for the checks that hold on all of them."""
    sweep, trial, campaign = lab["sweep"], lab["trial"], lab["campaign"]
    return [
        "/",
        f"/experiments/{sweep.experiment_id}/",
        f"/sweeps/{sweep.pk}/",
        f"/trials/{trial.pk}/",
        "/sweeps/new/",
        "/compare/?job_type=rd_qoe",
        "/reproduce/",
        "/campaigns/",
        "/campaigns/new/",
        f"/campaigns/{campaign.pk}/",
        f"/campaigns/{campaign.pk}/results/",
        "/campaigns/studies/",
        "/campaigns/studies/new/",
        f"/campaigns/studies/{lab['study'].pk}/",
    ]


@pytest.fixture
def wait_for_charts() -> Any:
    """``wait_for_charts(page, path)``: on a sweep page, until every chart has drawn (each figure
    then says how many points it has); other pages need no wait."""

    def wait(page: Any, path: str) -> None:
        if path.startswith("/sweeps/") and path != "/sweeps/new/":
            page.wait_for_function("() => [...document.querySelectorAll('figure[data-chart-url]')]"
                                   ".every((f) => f.dataset.points !== undefined)")  # fmt: skip

    return wait
