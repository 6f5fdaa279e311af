"""The researcher's pages at phone width (390 x 844) in Debian's Chromium: no page is wider than
the screen, the main navigation is reachable, charts stay inside the viewport (issue 15).

Wide content (tables, JSON) scrolls inside its own box; the page itself never scrolls sideways.
"""

from __future__ import annotations

from typing import Any

import pytest

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

PHONE = {"width": 390, "height": 844}

# The page's width and the elements whose right edge passes the phone's, for a readable failure.
# (A mobile browser would widen its layout viewport to fit them, so the width is passed in.)
OVERFLOW_JS = """(w) => {
  const wide = [...document.querySelectorAll('body *')].filter((el) => {
    const r = el.getBoundingClientRect();
    if (r.width === 0 || r.right <= w + 0.5) return false;
    // Inside a box that scrolls sideways on its own: the page does not overflow because of it.
    for (let p = el.parentElement; p; p = p.parentElement) {
      const s = getComputedStyle(p);
      if ((s.overflowX === 'auto' || s.overflowX === 'scroll' || s.overflowX === 'hidden')
          && p !== document.body && p.getBoundingClientRect().right <= w + 0.5) return false;
    }
    return true;
  });
  return {
    scroll: document.documentElement.scrollWidth,
    wide: wide.slice(0, 8).map((el) =>
      `${el.tagName.toLowerCase()}.${el.className} ${Math.round(el.getBoundingClientRect().right)}px`),
  };
}"""


def test_every_researcher_page_fits_a_phone_and_keeps_its_navigation(
    live_server: Any,
    chromium: Any,
    alice: Any,
    researcher_paths: list[str],
    log_in: Any,
    wait_for_charts: Any,
) -> None:
    context = chromium.new_context(viewport=PHONE, device_scale_factor=2, is_mobile=True, has_touch=True)
    page = context.new_page()
    try:
        page.goto(f"{live_server.url}/accounts/login/")
        assert page.evaluate(OVERFLOW_JS, PHONE["width"])["scroll"] <= PHONE["width"]
        log_in(page, live_server.url, alice)
        page.get_by_role("heading", name="Experiments").wait_for()
        for path in researcher_paths:
            page.goto(live_server.url + path)
            page.wait_for_load_state("load")
            wait_for_charts(page, path)
            found = page.evaluate(OVERFLOW_JS, PHONE["width"])
            assert found["scroll"] <= PHONE["width"], f"{path} is {found['scroll']} px wide: {found['wide']}"
            nav = page.get_by_role("navigation", name="Main")
            for link in ("Experiments", "New sweep", "Compare", "Reproduce", "Rating campaigns"):
                box = nav.get_by_role("link", name=link).bounding_box()
                assert box and box["x"] >= 0 and box["x"] + box["width"] <= PHONE["width"], (path, link, box)
            for canvas in page.locator("figure.chart canvas").all():
                box = canvas.bounding_box()
                if box:  # a chart with nothing to draw yet may be hidden
                    assert box["x"] >= 0 and box["x"] + box["width"] <= PHONE["width"], (path, box)
    finally:
        context.close()
