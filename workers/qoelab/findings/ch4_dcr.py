"""The findings of the thesis' chapter 4 subjective half (§4.5: Table 4.2, Figs. 4.3/4.4) as checks
over DCR ratings.

Source: ../shared/notes/seed-rd-qoe.md, "Subjective evaluation (§4.5)". A row is one evaluator's
answers on one condition, ``{"params": {"protocol", "rate" (bit/s), "delay" (s)}, "summary":
{aspect: score}}``; the checks group rows as the trial checks group trials, so a condition's DMOS is
the mean of its evaluators' scores with a 95 % Student-t CI (the campaign page's DMOS), and two
conditions differ only when their intervals do not overlap. A campaign builds the rows from its
main-phase ratings after screening (``backend/ratings/analysis.py``). With no ratings every check
answers *not run: needs ratings* (``qoelab.findings.rating_findings``). The thresholds were fixed
before any rating existed (docs/findings.md, "Chapter 4's subjective half").
"""

from __future__ import annotations

from qoelab.findings.base import (
    Check,
    Comparison,
    Report,
    Scope,
    as_number,
    at_least,
    lower,
    values_of,
    where,
)

# Table 4.2 is at 1 Mbit/s; Figs. 4.3/4.4 span 1-5 Mbit/s and 10-100 ms (with room for a
# testbed's own base delay and for a rate written as 1000kbit).
TABLE42 = {"rate": (0.9e6, 1.1e6), "delay": (0.0, 0.25)}
FIG43_44 = {"rate": (0.9e6, 5.1e6), "delay": (0.0, 0.11)}
# Fig. 4.3: SPICE is "good above ≈3 Mbit/s whatever the delay".
KNEE_BPS = 3e6
# Table 4.2's image clarity is 4.4-5 everywhere: at least "perceptible but not annoying" (4).
CLEAR = 4.0
OTHERS = ("vnc", "spice")


def _aspect(name: str) -> tuple[str, str]:
    return name, f"DMOS {name.replace('_', ' ')}"


SCREEN = _aspect("screen_response")
MOUSE = _aspect("mouse_response")
CLARITY = _aspect("image_clarity")


def _mouse_x2go_best(sc: Scope) -> tuple[list[Comparison], list[str]]:
    out: list[Comparison] = []
    x2go = sc.series("x2go")[0]
    for delay in sorted(values_of(sc.rows, "delay"), key=as_number):
        mine = sc.stat(x2go, *MOUSE, delay=delay)
        for other in (s for p in OTHERS for s in sc.series(p)):
            theirs = sc.stat(other, *MOUSE, delay=delay)
            out.append(lower(theirs, mine, other.label, x2go.label, where(delay=delay)))
    return out, []


def _x2go_drops_with_delay(sc: Scope) -> tuple[list[Comparison], list[str]]:
    """X2Go's screen-response DMOS at the longest delay below the shortest's, per rate."""
    out: list[Comparison] = []
    x2go = sc.series("x2go")[0]
    for rate in sorted(values_of(sc.select(x2go), "rate"), key=as_number):
        delays = sorted(values_of(sc.select(x2go, rate=rate), "delay"), key=as_number)
        if len(delays) < 2:
            continue
        short, long_ = delays[0], delays[-1]
        at_long = sc.stat(x2go, *SCREEN, rate=rate, delay=long_)
        at_short = sc.stat(x2go, *SCREEN, rate=rate, delay=short)
        out.append(lower(at_long, at_short, f"{x2go.label} at {where(delay=long_)}",
                         f"at {where(delay=short)}", where(rate=rate)))  # fmt: skip
    return out, ([] if out else ["X2Go was rated at one delay only"])


def _clarity_high(sc: Scope) -> tuple[list[Comparison], list[str]]:
    out = []
    for s in sc.series():
        for delay in sorted(values_of(sc.select(s), "delay"), key=as_number):
            out.append(at_least(sc.stat(s, *CLARITY, delay=delay), CLEAR, s.label, where(delay=delay)))
    return out, []


def _spice_better_above_knee(sc: Scope) -> tuple[list[Comparison], list[str]]:
    out: list[Comparison] = []
    spice = sc.series("spice")[0]
    for delay in sorted(values_of(sc.select(spice), "delay"), key=as_number):
        rates = sorted(values_of(sc.select(spice, delay=delay), "rate"), key=as_number)
        low, high = rates[0], rates[-1]
        if len(rates) < 2 or as_number(high) < KNEE_BPS:
            continue
        at_low = sc.stat(spice, *SCREEN, rate=low, delay=delay)
        at_high = sc.stat(spice, *SCREEN, rate=high, delay=delay)
        out.append(lower(at_low, at_high, f"SPICE at {where(rate=low)}", f"at {where(rate=high)}",
                         where(delay=delay)))  # fmt: skip
    return out, ([] if out else [f"SPICE was not rated at and above {KNEE_BPS / 1e6:g} Mbit/s at one delay"])


CHECKS: tuple[Check, ...] = (
    Check(
        name="dcr_mouse_x2go_best",
        title="X2Go's mouse response rated best at every delay",
        claim="At 1 Mbit/s X2Go's mouse response is rated better than VNC's and SPICE's at every delay "
        "(its mouse cursor is drawn locally) (Table 4.2)",
        figure="Table 4.2",
        x="delay",
        protocols=("vnc", "spice", "x2go"),
        run=_mouse_x2go_best,
        within=TABLE42,
        rows_are="ratings",
    ),
    Check(
        name="dcr_x2go_screen_drops_with_delay",
        title="X2Go's screen response drops with delay",
        claim="Event transfer (X2Go) is rated worse as the one-way delay grows: its screen-response DMOS "
        "at the longest delay is below the shortest's (Table 4.2, Fig. 4.4)",
        figure="Table 4.2, Fig. 4.4",
        x="delay",
        protocols=("x2go",),
        run=_x2go_drops_with_delay,
        within=FIG43_44 | {"delay": TABLE42["delay"]},
        rows_are="ratings",
    ),
    Check(
        name="dcr_image_clarity_high",
        title="Image clarity rated good everywhere",
        claim=f"At 1 Mbit/s image clarity is rated at least {CLEAR:g} (perceptible but not annoying) for "
        "every protocol and delay (Table 4.2: 4.4-5)",
        figure="Table 4.2",
        x="delay",
        protocols=("vnc", "spice", "x2go"),
        run=_clarity_high,
        within=TABLE42,
        rows_are="ratings",
    ),
    Check(
        name="dcr_spice_better_above_3mbit",
        title="SPICE rated better above 3 Mbit/s",
        claim="Image transfer (SPICE) is sensitive to throughput: at every delay its screen-response DMOS "
        f"at {KNEE_BPS / 1e6:g} Mbit/s or more is above its DMOS at the lowest rate (Fig. 4.3)",
        figure="Fig. 4.3",
        x="rate",
        protocols=("spice",),
        run=_spice_better_above_knee,
        within=FIG43_44,
        rows_are="ratings",
    ),
)

PAPER_VALUES: dict[str, str] = {
    "dcr_mouse_x2go_best": "X2Go 5 / 4.6 / 4.8, VNC 3.6 / 1.8 / 2.2, SPICE 2 / 1.2 / 1.2 (10 / 100 / 200 ms)",
    "dcr_x2go_screen_drops_with_delay": "X2Go's screen response 4 / 2.4 / 1.8 at 10 / 100 / 200 ms",
    "dcr_image_clarity_high": "image clarity 4.4-5 for every protocol and delay",
    "dcr_spice_better_above_3mbit": "SPICE good above ≈3 Mbit/s of TCP throughput whatever the delay",
}

REPORT = Report(
    "ch4-dcr",
    "Thesis chapter 4 (§4.5): DCR ratings of the remote desktops",
    CHECKS,
    PAPER_VALUES,
    reads="ratings",
)
