"""The slow-motion driver against a real browser whose page answers a click late.

A guest under TCG can answer a click with a small change (the link's focus, a cursor) and draw the
next page only seconds later. The page here does the same on purpose: the click fetches a small
file at once (server -> client payload, a few changed pixels) and follows the link 3 s later. The
update must end after the new page, not after the early change.
"""

from __future__ import annotations

import time

import pytest

from qoelab.packets.capture import PayloadWatch
from qoelab.procs import ProcSet, wait_for
from qoelab.rd.desktop import SCREEN_H, SCREEN_W, chromium_argv, serve_pages
from qoelab.rd.display import start_xvfb
from qoelab.rd.driver import DriverParams, drive, identify_page
from qoelab.rd.workload import find_link, generate

pytestmark = pytest.mark.netns

LATE_S = 3.0
# Runs on the click: an immediate small fetch and mark, then the real navigation LATE_S later.
LATE_SCRIPT = f"""
<div id="mark" style="position:fixed;right:0;bottom:0;width:24px;height:24px;background:#fff"></div>
<script>
document.querySelector("a.next").addEventListener("click", (ev) => {{
  ev.preventDefault();
  const href = ev.currentTarget.href;
  fetch("ack.txt?" + Date.now()).then(() => {{ document.getElementById("mark").style.background = "#0a0"; }});
  setTimeout(() => {{ location.href = href; }}, {int(LATE_S * 1000)});
}});
</script>
"""


def test_an_update_ends_with_the_new_page_not_with_an_early_small_change(rd_link, rd_prefix, tmp_path):
    pages = tmp_path / "pages"
    manifest = generate(pages, pages=2, seed=7)
    page1 = pages / "page1.html"
    page1.write_text(page1.read_text().replace("</body>", LATE_SCRIPT + "</body>"))
    (pages / "ack.txt").write_text("ok\n")

    procs = ProcSet(rd_prefix, tmp_path / "logs")
    try:
        _, port = serve_pages(procs, rd_link.server_ns, rd_link.server_ip, pages)
        client = start_xvfb(procs, SCREEN_W, SCREEN_H, ns=rd_link.client_ns, name="client-xvfb")
        url = f"http://{rd_link.server_ip}:{port}/page1.html"
        browser = procs.spawn(
            "chromium",
            chromium_argv(url, str(tmp_path / "chromium")),
            ns=rd_link.client_ns,
            env={"DISPLAY": client.name, "HOME": str(tmp_path)},
        )
        found = wait_for("page 1 on screen", lambda: find_link(client.grab()), 60, proc=browser)
        link = manifest.page(1).link
        offset = (found.x - link.x, found.y - link.y)
        time.sleep(1.0)  # let the first paint settle

        watch = PayloadWatch(rd_link.client_ns, rd_link.client_if, rd_link.server_ip).start()
        try:
            [click] = drive(
                client,
                manifest,
                watch,
                offset,
                DriverParams(pages=1, quiet_s=0.5, pause_s=0, update_timeout_s=20),
            )
        finally:
            watch.stop()
        assert not click.timed_out
        assert click.page == 2
        # The early fetch and mark came well before LATE_S; the update ends after the new page.
        assert click.pixel_stable_t is not None and click.pixel_stable_t - click.t >= LATE_S, (
            click.pixel_stable_t - click.t if click.pixel_stable_t else None
        )
        shown = find_link(client.grab())
        assert shown is not None and identify_page(manifest, shown, offset) == 2
    finally:
        procs.stop_all()
