"""VOSE sweeps started from the dashboard's New-sweep form, in Debian's Chromium: the five IPsec
devices against speedup (Fig. 3.12) and the kernel checksum against speedup with its software and
hardware references (Fig. 3.11). Waits for both, then saves the sweep pages' charts and findings as
PNGs under docs/img/vose/.

    .venv/bin/python benchmarks/vose/dashboard.py --base http://127.0.0.1:8000 --password P
    .venv/bin/python benchmarks/vose/dashboard.py --sweeps 7 8 --password P   # screenshots only

Needs a running lab (``make demo``) with a worker that offers vose.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
IMG = REPO / "docs" / "img" / "vose"
# The forms as a researcher fills them: grid values comma-separated, fixed values one each.
FORMS = {
    "fig312": {
        "new_experiment": "VOSE from the dashboard",
        "name": "Fig. 3.12: five IPsec devices vs speedup",
        "grid_device": "aes_only, aes_cbc, sha1_only, sha1_aes, sha1_aes_cbc",
        "grid_speedup": "1, 2, 3, 10, inf",
        "fixed_path": "app",
        "fixed_mode": "vose",
        "fixed_duration": "5s",
        "repetitions": "2",
    },
    "fig311": {
        "new_experiment": "VOSE from the dashboard (checksum)",
        "name": "Fig. 3.11: kernel checksum vs speedup",
        "grid_mode": "software, hardware, vose",
        "grid_speedup": "1, 1.5, 2, 3, 10, inf",
        "fixed_path": "kernel_csum",
        "fixed_duration": "5s",
        "repetitions": "2",
    },
}


def main() -> int:
    from playwright.sync_api import sync_playwright

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", default="http://127.0.0.1:8000")
    parser.add_argument("--user", default="researcher")
    parser.add_argument("--password", required=True)
    parser.add_argument("--sweeps", type=int, nargs=2, metavar=("FIG312", "FIG311"), help="screenshots only")
    parser.add_argument("--timeout", type=float, default=3600, help="seconds to wait for each sweep")
    args = parser.parse_args()
    base = args.base.rstrip("/")
    sys.path.insert(0, str(REPO / "benchmarks"))
    import dashboard_shots

    IMG.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as p:
        browser, page = dashboard_shots.logged_in_page(p, base, args.user, args.password)
        sweeps = args.sweeps or [
            dashboard_shots.start_from_form(page, base, "vose", f) for f in FORMS.values()
        ]
        for key, sweep in zip(FORMS, sweeps, strict=True):
            print(f"{key}: sweep {sweep}: {base}/sweeps/{sweep}/", flush=True)
            dashboard_shots.wait_finished(page, base, sweep, args.timeout)
            for name in dashboard_shots.save_charts(page, base, sweep, IMG, key):
                print(f"saved docs/img/vose/{name}")
            page.locator("#findings").screenshot(path=str(IMG / f"{key}-findings.png"))
            print(f"saved docs/img/vose/{key}-findings.png")
        browser.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
