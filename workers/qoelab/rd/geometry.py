"""The remote desktop's size as the client shows it, and the X2Go agent's screen size.

Every protocol must show the same 800 x 600 desktop. The client screen (Xvfb) is black where no
viewer draws, and the workload pages have a light background, so the part of the expected
800 x 600 area that the remote desktop really covers is where the columns and rows stop being
black. nxagent started without a window manager on the client display forces itself to
"fullscreen" and sizes its screen to 3/4 of the client screen (768 x 576 on our 1024 x 768 Xvfb),
whatever geometry X2Go passed: ``fit_x2go_window`` sizes the agent's window, and with
``resize=1`` (X2Go's default) nxagent follows it with its screen.
"""

from __future__ import annotations

import re

import numpy as np

from qoelab.procs import require_tool, run
from qoelab.rd.display import Display

BLACK_MAX = 16  # a channel value at most this counts as black (Xvfb's background is 0,0,0)


def desktop_extent(
    img: np.ndarray, offset: tuple[int, int], size: tuple[int, int] = (800, 600)
) -> tuple[int, int]:
    """Width and height of the desktop the client shows in the ``size`` area at ``offset``.

    A column (row) counts when any pixel in it is not black; the extent runs to the last such
    column (row), so a black band along the right or bottom edge shortens it.
    """
    x0, y0 = offset
    region = img[max(y0, 0) : y0 + size[1], max(x0, 0) : x0 + size[0]]
    if region.size == 0:
        return 0, 0
    lit = region.max(axis=2) > BLACK_MAX
    cols = np.flatnonzero(lit.any(axis=0))
    rows = np.flatnonzero(lit.any(axis=1))
    return (int(cols[-1]) + 1 if cols.size else 0, int(rows[-1]) + 1 if rows.size else 0)


def fills(extent: tuple[int, int] | list[int], size: tuple[int, int] = (800, 600), slack: int = 2) -> bool:
    """Whether ``extent`` covers ``size`` but for ``slack`` pixels.

    The kiosk browser leaves the last column and row of its 800 x 600 screen unpainted (black on
    the server's own screen too), so the extent of a correct session is 799 x 599.
    """
    return extent[0] >= size[0] - slack and extent[1] >= size[1] - slack


def root_size(display: Display) -> tuple[int, int] | None:
    """The root window's size of ``display`` (xwininfo), None when it cannot be asked."""
    res = run([require_tool("xwininfo", "x11-utils"), "-root"], env=display.env(), timeout=5)
    w = re.search(r"Width: (\d+)", res.stdout)
    h = re.search(r"Height: (\d+)", res.stdout)
    return (int(w.group(1)), int(h.group(1))) if res.returncode == 0 and w and h else None


def x2go_windows(display: Display) -> list[str]:
    """Ids of nxagent's top-level windows on the client display (named ``X2GO-<session>``)."""
    res = run(
        [require_tool("xdotool", "xdotool"), "search", "--onlyvisible", "--name", "^X2GO-"],
        env=display.env(),
        timeout=5,
    )
    return res.stdout.split() if res.returncode == 0 else []
