"""What the guest says on its second serial port (ttyS1), read back: the kiosk's steps and its browsers.

The image's scripts (vm-images/build.sh) write one line per event: ``QOELAB-STEP <step> <uptime>``
as the kiosk starts, ``QOELAB-READY <uptime>`` once the browser window is mapped,
``QOELAB-PAGE-SHOWN <role> <start> <uptime>`` once a browser shows a qoelab page, and its restarts
and giving up (below). ``RunningGuest.reports()`` returns these lines; this module turns them into
the one sentence a failed trial needs and the counts its provenance keeps.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

READY_MARK = "QOELAB-READY"
# The image's kiosk browsers on ttyS1 (vm-images/build.sh), each naming its role: "console" (the
# autologin kiosk) or "x2go" (an X2Go session's browser). "QOELAB-BROWSER-RESTART <role> <attempt>
# <uptime>": a stalled start restarted; "QOELAB-BROWSER-GAVE-UP <role> <attempts> <uptime>": once,
# when every start stalled. Older images wrote "QOELAB-BROWSER-RESTART <attempt> <uptime>".
BROWSER_RESTART_MARK = "QOELAB-BROWSER-RESTART"
BROWSER_GAVE_UP_MARK = "QOELAB-BROWSER-GAVE-UP"
UNKNOWN_ROLE = "unknown"  # the role of a line that names none (an older image's)
_ROLE = re.compile(r"[a-z][a-z0-9_-]*")
# In a failed X2Go trial's error when the session's browser gave up (docs/vm.md, "Why the guest's
# browser stalled").
X2GO_BROWSER_STALL = "the X2Go session's browser never showed the page"
# The kiosk's start in order: the line that says a step happened, and what a guest that stopped
# before it did not do.
KIOSK_STEPS = (
    ("QOELAB-STEP x-server", "the X server never started"),
    ("QOELAB-STEP window-manager", "the window manager (openbox) never came up"),
    (READY_MARK, "the kiosk browser never mapped its window"),
    ("QOELAB-PAGE-SHOWN console", "the kiosk browser never showed its start page"),
)


@dataclass(frozen=True)
class BrowserStarts:
    """What one guest browser (a role) reported of its starts."""

    restarts: int = 0  # stalled starts it restarted
    gave_up: bool = False  # every start stalled: it stopped trying


def browser_reports(reports: Iterable[str]) -> dict[str, BrowserStarts]:
    """The guest's browser lines (``RunningGuest.reports()``), by role; roles that said nothing are absent.

    A line without a role (an older image's restart) counts as ``UNKNOWN_ROLE``, never as a known one.
    """
    counts: dict[str, tuple[int, bool]] = {}
    for line in reports:
        words = line.split()
        if not words or words[0] not in (BROWSER_RESTART_MARK, BROWSER_GAVE_UP_MARK):
            continue
        role = words[1] if len(words) > 1 and _ROLE.fullmatch(words[1]) else UNKNOWN_ROLE
        restarts, gave_up = counts.get(role, (0, False))
        if words[0] == BROWSER_RESTART_MARK:
            restarts += 1
        else:
            gave_up = True
        counts[role] = (restarts, gave_up)
    return {role: BrowserStarts(n, gave_up) for role, (n, gave_up) in counts.items()}


def x2go_stall_note(reports: Iterable[str], timings: dict[str, float]) -> str:
    """The X2GO_BROWSER_STALL label for an X2Go trial's error, or "" when it does not apply.

    It applies exactly when the measurement's setup never completed (no ``setup_s``) and the guest
    reported that an X2Go session's browser gave up (all its starts stalled). The console browser's
    restarts (a cold boot's kiosk) and an older image's unattributed ones never count.
    """
    x2go = browser_reports(reports).get("x2go")
    if "setup_s" in timings or x2go is None or not x2go.gave_up:
        return ""
    return f"{X2GO_BROWSER_STALL} ({x2go.restarts + 1} starts stalled; docs/vm.md)"


def step_not_reached(lines: Iterable[str], trial_page: str | None, restored: bool = False) -> str:
    """One sentence: the first step of the kiosk's start that the guest's ttyS1 lines do not report.

    ``trial_page``: where the start page fetches the trial's first page from, when the guest had to
    show it (a trial), so a guest that got that far is told apart from one whose network failed.
    ``restored``: the guest resumed from a saved state, whose kiosk had shown its start page before
    it was saved (those lines went to the saving QEMU's ttyS1, not this one's).
    """
    lines = list(lines)
    console = browser_reports(lines).get("console")
    for mark, missing in () if restored else KIOSK_STEPS:
        if not any(line.startswith(mark) for line in lines):
            if console is not None and console.gave_up:
                return f"{missing}: the kiosk browser gave up after {console.restarts + 1} starts"
            return missing
    if trial_page:
        return f"the start page never opened the trial's first page ({trial_page}, or the guest's network)"
    return "the screen never showed a painted page"
