"""The ``typing`` workload: keystrokes at a typist's rate into the desktop's editor page.

Paper 002 (notes/seed-thinclient-tcp.md §1) models thin-client server->client traffic as
interactive flows (one small packet echoing a keystroke) and bulk flows (screen updates). The page
workload makes only bulk flows; this one makes the interactive ones: after one click into the
editor's text area (``workload.generate_editor``) it sends the characters of seeded text, one key
at a time, through the client display (xdotool, the driver's input path), and does not wait for an
echo before the next key: a person types on while the echo travels.

Inter-key gaps (the lab's assumption, not the paper's: the paper gives only means) are gamma
distributed with shape 4 (coefficient of variation 0.5, no gap shorter than 50 ms) around the mean
``gap_s``; the default 0.27 s is the paper's mean interactive-to-interactive flow interval t_II
(Table 2), about 45 words per minute. Each keystroke is recorded like a click (``Click``): ``t`` is
taken just before the key is sent, ``pixel_stable_t`` is the client screen's last change before
the next key; the packet analysis times its echo like an update (``qoelab.rd.analysis``).
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from qoelab.errors import ParameterError

if TYPE_CHECKING:  # light at import: the job type's declaration (backend too) reads the constants
    from qoelab.packets.capture import PayloadWatch
    from qoelab.rd.display import Display
    from qoelab.rd.workload import Rect

log = logging.getLogger("qoelab.rd.keystrokes")
MAX_KEYSTROKES = 2000
GAP_SHAPE = 4.0  # gamma shape: coefficient of variation 1/sqrt(4) = 0.5
MIN_GAP_S = 0.05
DEFAULT_GAP_S = 0.27  # paper 002, Table 2: t_II
# Words are joined by "-", not spaces: with the caret hidden a space changes no pixel, so it would have
# no echo to time (a trailing space draws nothing). "-" is unshifted on the us layout, as the letters.
SEPARATOR = "-"
KEYSYMS = {"-": "minus", " ": "space"}


@dataclass(frozen=True)
class TypingPlan:
    """What will be typed: one character per keystroke and the gap before each (the first: 0)."""

    keys: str
    gaps_s: tuple[float, ...]
    mean_gap_s: float
    seed: int

    def to_json(self) -> dict[str, object]:
        return {
            "keys": self.keys,
            "gaps_s": [round(g, 4) for g in self.gaps_s],
            "mean_gap_s": self.mean_gap_s,
            "seed": self.seed,
            "gap_model": f"gamma(shape={GAP_SHAPE:g}), at least {MIN_GAP_S:g} s",
        }


def plan(keystrokes: int, seed: int = 1, gap_s: float = DEFAULT_GAP_S) -> TypingPlan:
    """Seeded text (lower-case words joined by "-": no modifier keys) and inter-key gaps."""
    if (
        isinstance(keystrokes, bool)
        or not isinstance(keystrokes, int)
        or not 1 <= keystrokes <= MAX_KEYSTROKES
    ):
        raise ParameterError(
            "keystrokes", f"must be an integer from 1 to {MAX_KEYSTROKES}, got {keystrokes!r}"
        )
    if isinstance(gap_s, bool) or not isinstance(gap_s, int | float) or not 0.05 <= gap_s <= 5:
        raise ParameterError("typing_gap", f"must be between 0.05 and 5 s, got {gap_s!r}")
    from qoelab.rd.workload import _WORDS

    rnd = random.Random(seed)
    text = ""
    while len(text) < keystrokes:
        text += rnd.choice(_WORDS) + SEPARATOR
    gaps = [0.0] + [
        max(MIN_GAP_S, rnd.gammavariate(GAP_SHAPE, gap_s / GAP_SHAPE)) for _ in range(keystrokes - 1)
    ]
    return TypingPlan(text[:keystrokes], tuple(gaps), float(gap_s), seed)


def type_keys(
    client: Display,
    watch: PayloadWatch,
    area: Rect,
    offset: tuple[int, int],
    typing: TypingPlan,
    quiet_s: float,
    on_step: Callable[[int], None] | None = None,
) -> list:
    """Click into the editor, wait for quiet, then type ``typing``; return one ``Click`` per key."""
    from qoelab.rd.clicks import Click
    from qoelab.rd.display import ScreenWatch

    x, y = area.center[0] + offset[0], area.center[1] + offset[1]
    client.xdotool("mousemove", str(x), str(y))
    client.xdotool("click", "1")  # focus on both ends: the viewer window (pointer) and the text area
    watch.wait_quiet(quiet_s, timeout=max(2.0, 4 * quiet_s))
    screen = ScreenWatch(client).start()
    times: list[float] = []
    pixels: list[float | None] = []

    def settled(since: float) -> float | None:
        # The screen's last change since the key went out (ScreenWatch samples every 50 ms).
        return screen.last_change if screen.last_change > since else None

    try:
        due = time.time()
        for i, (key, gap) in enumerate(zip(typing.keys, typing.gaps_s, strict=True)):
            if on_step:
                on_step(i)
            due += gap
            time.sleep(max(0.0, due - time.time()))  # behind schedule (a slow xdotool): type at once
            if times:
                pixels.append(settled(times[-1]))  # the previous key's echo window ends here
            t = time.time()
            client.xdotool("key", KEYSYMS.get(key, key))
            times.append(t)
        # The last echo: let it arrive and the screen settle.
        watch.wait_quiet(quiet_s, timeout=max(2.0, 4 * quiet_s))
        time.sleep(min(0.5, quiet_s))
        if times:
            pixels.append(settled(times[-1]))
    finally:
        screen.stop()
    log.info("typed %d keys, %d with a screen change", len(times), sum(p is not None for p in pixels))
    return [
        Click(index=i, t=t, x=x, y=y, pixel_stable_t=px)
        for i, (t, px) in enumerate(zip(times, pixels, strict=False))
    ]


def echo_times(
    pcap: Path, clicks: list, server_ip: str, guard_s: float = 0.005
) -> list[dict[str, float | None]]:
    """Per keystroke, its echo from the capture: the first client->server payload after the key was
    sent (``input_t``), the first server->client payload after that (``echo_t``) and ``echo_ms``.

    The update rule of the clicks (``qoelab.rd.analysis``: from the *last* input before the response
    to the end of the burst) suits a page; for a key it can start too late (X2Go's client sends a
    second message ~20 ms after the key, just before the echo arrives) and end too late (trailing
    packets before the next key). The first answer to the key's first packet is the echo. Nothing
    before the next key: ``None``.
    """
    import bisect
    import math

    from qoelab.packets.pcapfile import read_packets

    packets, _info = read_packets(pcap)
    up = [p.ts for p in packets if p.dst == server_ip and p.src != server_ip and p.effective]
    down = [p.ts for p in packets if p.src == server_ip and p.dst != server_ip and p.effective]
    ordered = sorted(clicks, key=lambda c: c.t)
    out: list[dict[str, float | None]] = []
    for k, c in enumerate(ordered):
        w1 = ordered[k + 1].t - guard_s if k + 1 < len(ordered) else math.inf
        iu = bisect.bisect_left(up, c.t - guard_s)
        first_in = up[iu] if iu < len(up) and up[iu] < w1 else None
        echo = None
        if first_in is not None:
            jd = bisect.bisect_right(down, first_in)
            echo = down[jd] if jd < len(down) and down[jd] < w1 else None
        out.append({
            "index": c.index,
            "input_t": first_in,
            "echo_t": echo,
            "echo_ms": (echo - first_in) * 1e3 if echo is not None and first_in is not None else None,
        })  # fmt: skip
    return out
