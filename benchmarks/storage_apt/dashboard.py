"""An S1-style storage-APT sweep started from the dashboard's New-sweep form, in Debian's Chromium:
APT beside vanilla and fixed N over three delays. Waits for it, then saves the sweep page's charts
(Figs. 2.8-2.15 as the lab draws them) and its findings section as PNGs under docs/img/storage-apt/.

    .venv/bin/python benchmarks/storage_apt/dashboard.py --base http://127.0.0.1:8000 --password P
    .venv/bin/python benchmarks/storage_apt/dashboard.py --sweep 7 --password P   # screenshots only

Needs a running lab (``make demo``) with a worker that offers apt.nbd.
"""

from __future__ import annotations

import argparse
import re
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
IMG = REPO / "docs" / "img" / "storage-apt"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--no-first-run"]  # fmt: skip
CHART_READY_JS = """(key) => {
  const canvases = [...document.querySelectorAll(`figure[data-chart-key="${key}"] canvas`)];
  const charts = canvases.map((c) => window.Chart && window.Chart.getChart(c));
  return charts.length > 0 && charts.every((ch) => ch && ch.data.datasets.some((d) => d.data.length)
    && !(window.Chart.animator && window.Chart.animator.running(ch)));
}"""
# The form as a researcher fills it: grid values comma-separated, fixed values one each.
FORM = {
    "new_experiment": "Storage APT: S1 from the dashboard",
    "name": "S1 NBD 200 Mbit/s, APT beside fixed N, 10-40 ms",
    "grid_mode": "apt, vanilla, fixed",
    "grid_sessions": "4, 16, 64",
    "grid_delay": "10ms, 20ms, 40ms",
    "fixed_transport": "nbd",
    "fixed_steady": "20s",
    "repetitions": "2",
}


def main() -> int:
    from playwright.sync_api import sync_playwright

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", default="http://127.0.0.1:8000")
    parser.add_argument("--user", default="researcher")
    parser.add_argument("--password", required=True)
    parser.add_argument("--sweep", type=int, help="an existing sweep: only take the screenshots")
    parser.add_argument("--timeout", type=float, default=3600, help="seconds to wait for the sweep")
    args = parser.parse_args()
    base = args.base.rstrip("/")
    IMG.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1366, "height": 900})
        page.goto(base + "/accounts/login/")
        page.get_by_label("Username").fill(args.user)
        page.get_by_label("Password").fill(args.password)
        page.get_by_role("button", name="Log in").click()
        page.wait_for_url(base + "/")
        sweep = args.sweep or start_from_form(page, base)
        print(f"sweep {sweep}: {base}/sweeps/{sweep}/", flush=True)
        wait_finished(page, base, sweep, args.timeout)
        page.goto(f"{base}/sweeps/{sweep}/")
        for fig in page.locator("figure[data-chart-url]").all():
            key = fig.get_attribute("data-chart-key")
            page.wait_for_function(CHART_READY_JS, arg=key, timeout=60_000)
            fig.screenshot(path=str(IMG / f"s1-{key}.png"))
            print(f"saved docs/img/storage-apt/s1-{key}.png")
        page.locator("#findings").screenshot(path=str(IMG / "s1-findings.png"))
        print("saved docs/img/storage-apt/s1-findings.png")
        browser.close()
    return 0


def start_from_form(page, base: str) -> int:
    page.goto(base + "/sweeps/new/?job_type=storage_apt")
    for name, value in FORM.items():
        page.locator(f'[name="{name}"]').fill(value)
    page.get_by_role("button", name="Create sweep").click()
    page.wait_for_url(re.compile(r"/sweeps/\d+/$"))
    return int(re.search(r"/sweeps/(\d+)/$", page.url).group(1))


def wait_finished(page, base: str, sweep: int, timeout: float) -> None:
    """Poll the sweep's status via the API the page itself uses (the session cookie)."""
    deadline = time.monotonic() + timeout
    while True:
        body = page.request.get(f"{base}/api/sweeps/{sweep}/").json()
        progress = body.get("progress") or {}
        print(f"  {progress.get('done')}/{progress.get('total')} trials", flush=True)
        if progress.get("cancelled") or (
            progress.get("total") and progress.get("done") == progress.get("total")
        ):
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"sweep {sweep} did not finish within {timeout:g} s")
        time.sleep(20)


if __name__ == "__main__":
    raise SystemExit(main())
