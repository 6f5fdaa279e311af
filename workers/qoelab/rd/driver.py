"""Slow-motion driver (thesis ch. 4, §4.6.1): one click, wait for the whole update, pause, next.

For each step the driver finds the link of the page on the client screen (the manifest's link
rectangle mapped through the calibrated offset, confirmed on a screenshot: the link is the only
magenta block), moves the pointer there, waits until the motion's own traffic is quiet, records
the click time ``t`` (epoch, taken just *before* the click is sent, so the update cannot start
earlier) and clicks. The update is finished when

* no server -> client payload arrived for the quiet time Q (live AF_PACKET watch), and
* the client screen has not changed for S (screenshots every 50 ms; the time of its last change
  is ``pixel_stable_t``), and
* the screen no longer shows the page clicked on (its link where it was); a guest slowed down by
  emulation may react to the click with a small change and only seconds later draw the page.

A click whose update does not finish within the per-update timeout is kept, marked timed_out.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

from qoelab.errors import ParameterError
from qoelab.packets.capture import PayloadWatch
from qoelab.rd.display import Display, ScreenWatch
from qoelab.rd.workload import Manifest, Rect, find_link

log = logging.getLogger("qoelab.rd.driver")
MATCH_PX = 16  # a link seen within this distance of a page's mapped link identifies the page


@dataclass(frozen=True)
class DriverParams:
    pages: int = 3
    quiet_s: float = 0.5
    pause_s: float = 0.5
    update_timeout_s: float = 30.0
    stable_s: float | None = None  # screen stability window; defaults to quiet_s

    def validate(self) -> None:
        if isinstance(self.pages, bool) or not isinstance(self.pages, int) or not 1 <= self.pages <= 1000:
            raise ParameterError("pages", f"must be an integer from 1 to 1000, got {self.pages!r}")
        for name, lo, hi in (("quiet_s", 0.05, 10), ("pause_s", 0, 60), ("update_timeout_s", 1, 600)):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int | float) or not lo <= v <= hi:
                raise ParameterError(name, f"must be between {lo:g} and {hi:g} s, got {v!r}")
        if self.stable_s is not None and not 0.05 <= self.stable_s <= 10:
            raise ParameterError("stable_s", f"must be between 0.05 and 10 s, got {self.stable_s!r}")


def identify_page(manifest: Manifest, found: Rect, offset: tuple[int, int]) -> int | None:
    """Which page shows a link at ``found`` (client coordinates); None when none is close."""
    best, best_d = None, MATCH_PX + 1
    for page in manifest.pages:
        d = max(abs(page.link.x + offset[0] - found.x), abs(page.link.y + offset[1] - found.y))
        if d < best_d:
            best, best_d = page.number, d
    return best


def _still_on(client: Display, manifest: Manifest, offset: tuple[int, int], page: int) -> bool:
    """True when the screen confidently shows ``page`` (its link where it should be).

    A link that is not found, matches no page, or sits where the next page's link would also be
    proves nothing, so it counts as moved on: the quiet and stable criteria alone decide then.
    """
    found = find_link(client.grab())
    if found is None or identify_page(manifest, found, offset) != page:
        return False
    nxt = manifest.page(manifest.page(page).next_number).link
    return max(abs(nxt.x + offset[0] - found.x), abs(nxt.y + offset[1] - found.y)) > MATCH_PX


def drive(
    client: Display,
    manifest: Manifest,
    watch: PayloadWatch,
    offset: tuple[int, int],
    params: DriverParams,
    start_page: int = 1,
    on_step: Callable[[int], None] | None = None,
) -> list:
    """Run the clicks; return a list of :class:`qoelab.rd.clicks.Click`."""
    from qoelab.rd.clicks import Click

    params.validate()
    stable_s = params.stable_s if params.stable_s is not None else params.quiet_s
    screen = ScreenWatch(client).start()
    clicks = []
    current = start_page
    try:
        for i in range(params.pages):
            if on_step:
                on_step(i)
            found = find_link(client.grab())
            if found is not None:
                seen = identify_page(manifest, found, offset)
                if seen is None:
                    log.warning("step %d: link at %s matches no page at offset %s", i, found, offset)
                elif seen != current:
                    log.warning("step %d: expected page %d on screen, found page %d", i, current, seen)
                    current = seen
                x, y = found.center
            else:
                cx, cy = manifest.page(current).link.center
                x, y = cx + offset[0], cy + offset[1]
                log.warning("step %d: link not visible on the client screen, clicking its mapped position", i)
            client.xdotool("mousemove", str(x), str(y))
            # Pointer motion makes its own traffic (cursor updates); let it end before the click.
            watch.wait_quiet(params.quiet_s, timeout=max(2.0, 4 * params.quiet_s))
            t = time.time()
            client.xdotool("click", "1")
            nxt = manifest.page(current).next_number
            deadline = t + params.update_timeout_s
            timed_out = True
            early_stops = 0
            while time.time() < deadline:
                if (
                    watch.last_down > t
                    and watch.quiet_for(params.quiet_s)
                    and screen.last_change > t
                    and screen.stable_for(stable_s)
                ):
                    if not _still_on(client, manifest, offset, current):
                        timed_out = False
                        break
                    # A slow guest can answer the click with a small change (cursor, link
                    # highlight) and only later draw the page: that quiet gap is not the end.
                    early_stops += 1
                    if early_stops == 1:
                        log.info("click %d: screen quiet but page %d still shown; waiting on", i, current)
                    time.sleep(stable_s / 2)
                    continue
                time.sleep(0.02)
            pixel_t = screen.last_change if screen.last_change > t else None
            clicks.append(
                Click(
                    index=i,
                    t=t,
                    page=nxt,
                    ratio=manifest.page(nxt).ratio,
                    x=int(x),
                    y=int(y),
                    pixel_stable_t=pixel_t,
                    timed_out=timed_out,
                )
            )
            log.info(
                "click %d -> page %d: %s, pixels stable after %s",
                i,
                nxt,
                "timed out" if timed_out else "done",
                f"{(pixel_t - t) * 1e3:.0f} ms" if pixel_t else "no change",
            )
            current = nxt
            time.sleep(params.pause_s)
    finally:
        screen.stop()
    return clicks
