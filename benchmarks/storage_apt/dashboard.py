"""An S1-style storage-APT sweep started from the dashboard's New-sweep form, in Debian's Chromium:
APT beside vanilla and fixed N over three delays. Waits for it, then saves the sweep page's charts
(Figs. 2.8-2.15 as the lab draws them) and its findings section as PNGs under docs/img/storage-apt/,
and writes the sweep's trials to benchmarks/storage_apt/s1-dashboard.jsonl (the numbers a doc quotes).

    .venv/bin/python benchmarks/storage_apt/dashboard.py --base http://127.0.0.1:8000 --password P
    .venv/bin/python benchmarks/storage_apt/dashboard.py --sweep 7 --password P   # screenshots only

Needs a running lab (``make demo``) with a worker that offers apt.nbd.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
IMG = REPO / "docs" / "img" / "storage-apt"
ROWS = REPO / "benchmarks" / "storage_apt" / "s1-dashboard.jsonl"
# The form as a researcher fills it: grid values comma-separated, fixed values one each.
FORM = {
    "new_experiment": "Storage APT: S1 from the dashboard",
    "name": "S1 NBD 200 Mbit/s, APT beside fixed N, 10-40 ms",
    "grid_mode": "apt, vanilla, fixed",
    "grid_sessions": "4, 64",
    "grid_delay": "10ms, 20ms, 40ms",
    "fixed_transport": "nbd",
    "fixed_steady": "15s",
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
    sys.path.insert(0, str(REPO / "benchmarks"))
    import dashboard_shots

    with sync_playwright() as p:
        browser, page = dashboard_shots.logged_in_page(p, base, args.user, args.password)
        sweep = args.sweep or dashboard_shots.start_from_form(page, base, "storage_apt", FORM)
        print(f"sweep {sweep}: {base}/sweeps/{sweep}/", flush=True)
        dashboard_shots.wait_finished(page, base, sweep, args.timeout)
        rows = dashboard_shots.export_rows(page, base, sweep, ROWS)
        print(f"wrote {ROWS.relative_to(REPO)} ({rows} trials)")
        for name in dashboard_shots.save_charts(page, base, sweep, IMG, "s1"):
            print(f"saved docs/img/storage-apt/{name}")
        page.locator("#findings").screenshot(path=str(IMG / "s1-findings.png"))
        print("saved docs/img/storage-apt/s1-findings.png")
        browser.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
