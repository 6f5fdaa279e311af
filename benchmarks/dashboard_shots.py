"""Screenshots of the dashboard's charts in Debian's Chromium, shared by the benchmark reports.

A script under ``benchmarks/<name>/`` loads this with :func:`load` (the directory is not a package).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--no-first-run"]  # fmt: skip
# A chart is ready when every canvas of its figure has data drawn and no animation runs.
CHART_READY_JS = """(key) => {
  const canvases = [...document.querySelectorAll(`figure[data-chart-key="${key}"] canvas`)];
  const charts = canvases.map((c) => window.Chart && window.Chart.getChart(c));
  return charts.length > 0 && charts.every((ch) => ch && ch.data.datasets.some((d) => d.data.length)
    && !(window.Chart.animator && window.Chart.animator.running(ch)));
}"""


def logged_in_page(playwright: Any, base: str, username: str, password: str) -> tuple[Any, Any]:
    """(browser, page) after logging in to the dashboard at ``base``."""
    browser = playwright.chromium.launch(executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS)
    page = browser.new_page(viewport={"width": 1366, "height": 900})
    page.goto(base + "/accounts/login/")
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill(password)
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url(base + "/")
    return browser, page


def save_charts(page: Any, base: str, sweep_id: int, outdir: Path, prefix: str) -> list[str]:
    """PNG of every chart on the sweep's page, as drawn, named ``<prefix>-<chart key>.png``."""
    outdir.mkdir(parents=True, exist_ok=True)
    page.goto(f"{base}/sweeps/{sweep_id}/")
    names = []
    for fig in page.locator("figure[data-chart-url]").all():
        chart = fig.get_attribute("data-chart-key")
        page.wait_for_function(CHART_READY_JS, arg=chart, timeout=60_000)
        names.append(f"{prefix}-{chart}.png")
        fig.screenshot(path=str(outdir / names[-1]))
    return names


def start_from_form(page: Any, base: str, job_type: str, form: dict[str, str]) -> int:
    """Fill the New-sweep form as a researcher does (grid values comma-separated, fixed values one
    each), create the sweep and return its id."""
    import re

    page.goto(f"{base}/sweeps/new/?job_type={job_type}")
    for name, value in form.items():
        page.locator(f'[name="{name}"]').fill(value)
    page.get_by_role("button", name="Create sweep").click()
    page.wait_for_url(re.compile(r"/sweeps/\d+/$"))
    return int(re.search(r"/sweeps/(\d+)/$", page.url).group(1))


def wait_finished(page: Any, base: str, sweep: int, timeout: float) -> None:
    """Poll the sweep's status via the API the page itself uses (the session cookie)."""
    import time

    deadline = time.monotonic() + timeout
    while True:
        progress = page.request.get(f"{base}/api/sweeps/{sweep}/").json().get("progress") or {}
        print(f"  {progress.get('done')}/{progress.get('total')} trials", flush=True)
        if progress.get("cancelled") or (
            progress.get("total") and progress.get("done") == progress.get("total")
        ):
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"sweep {sweep} did not finish within {timeout:g} s")
        time.sleep(20)


def export_rows(page: Any, base: str, sweep: int, out: Path) -> int:
    """Write the sweep's ended trials as result rows (``qoelab sweep export``'s form, one JSON line
    each) through the API with the page's session, so a doc quotes a committed file, not a
    screenshot of a database that may be gone. Returns the number of rows."""
    import json

    body = page.request.get(f"{base}/api/sweeps/{sweep}/export/").json()
    rows = body["rows"]
    out.write_text("".join(json.dumps(r, sort_keys=True) + "\n" for r in rows))
    return len(rows)
