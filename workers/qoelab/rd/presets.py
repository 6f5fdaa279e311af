"""Chapter 4's experiments (thesis 000, ``rd_qoe``): the sweeps of Figs. 4.6-4.8 and the live DCR
campaigns of Table 4.2 and Figs. 4.3/4.4.

The thesis gives ranges, not grid points, for its figures (../shared/notes/seed-rd-qoe.md): the full
grids are log-spaced across them, as in ``examples/thesis-fig4.*.yaml`` (a test keeps the two equal).
``quick`` keeps one grid point on each side of every threshold ``qoelab.findings.ch4`` checks, 3
repetitions; ``full`` 10.
"""

from __future__ import annotations

from qoelab.preset import Chapter, Preset

PROTOCOLS = ["vnc", "spice", "x2go"]
# Every sweep measures the thesis' 5 screens (a rating campaign's conditions do not say).
FIVE_PAGES = {"quick": {"pages": 5}, "full": {"pages": 5}}

# The thesis' ranges, log-spaced (Figs. 4.6-4.8) and 1-5 Mbit/s of TCP throughput (Figs. 4.3/4.4).
FULL_RATES = ["0.5mbit", "1mbit", "2mbit", "5mbit", "10mbit", "20mbit", "50mbit", "100mbit", "200mbit",
              "500mbit", "1000mbit"]  # fmt: skip
FULL_DELAYS = ["10ms", "25ms", "50ms", "100ms", "150ms", "200ms"]
FULL_LOSSES = ["0.01%", "0.03%", "0.1%", "0.3%", "1%", "3%", "5%", "10%"]
DCR_RATES = ["1mbit", "2mbit", "3mbit", "4mbit", "5mbit"]

CH4: tuple[Preset, ...] = (
    Preset(
        key="ch4-fig46",
        report="ch4",
        figure="Fig. 4.6",
        title="bandwidth",
        description="T, X and X/T vs bottleneck bandwidth 0.5-1000 Mbit/s at 10 ms one-way delay",
        kind="sweep",
        job_type="rd_qoe",
        grids={
            # quick: 1 Mbit/s (<= "a few"), 10 and 100 Mbit/s (SPICE's side of its 10 Mbit/s switch).
            "quick": {"protocol": PROTOCOLS, "rate": ["1mbit", "10mbit", "100mbit"]},
            "full": {"protocol": PROTOCOLS, "rate": FULL_RATES},
        },
        fixed={"delay": "10ms", "loss": "0%", "verify_duration": "2s"},
        seed=46,
        sized=FIVE_PAGES,
    ),
    Preset(
        key="ch4-fig47",
        report="ch4",
        figure="Fig. 4.7",
        title="delay",
        description="T vs one-way delay 10-200 ms at 1 Mbit/s (a) and 10 Mbit/s (b)",
        kind="sweep",
        job_type="rd_qoe",
        grids={
            # quick: two delays at or below the 50 ms crossing of Fig. 4.7a and one far above it.
            "quick": {"protocol": PROTOCOLS, "rate": ["1mbit", "10mbit"], "delay": ["10ms", "50ms", "200ms"]},
            "full": {"protocol": PROTOCOLS, "rate": ["1mbit", "10mbit"], "delay": FULL_DELAYS},
        },
        fixed={"loss": "0%", "verify_duration": "2s"},
        seed=47,
        sized=FIVE_PAGES,
    ),
    Preset(
        key="ch4-fig48",
        report="ch4",
        figure="Fig. 4.8",
        title="loss",
        description="T vs random loss 0.01-10 % at 1 and 10 Mbit/s, 100 ms one-way delay",
        kind="sweep",
        job_type="rd_qoe",
        grids={
            # quick: two losses below the 3 % and one above the 5 % the finding compares.
            "quick": {"protocol": PROTOCOLS, "rate": ["1mbit", "10mbit"], "loss": ["0.1%", "1%", "10%"]},
            "full": {"protocol": PROTOCOLS, "rate": ["1mbit", "10mbit"], "loss": FULL_LOSSES},
        },
        # Q = 1 s: at 100 ms a retransmission timeout can exceed 0.5 s and split one update in two.
        fixed={"delay": "100ms", "verify_duration": "2s", "quiet": "1s"},
        seed=48,
        sized=FIVE_PAGES,
    ),
    Preset(
        key="ch4-table42",
        report="ch4",
        figure="Table 4.2",
        title="DCR at 1 Mbit/s",
        description="Live DCR ratings of screen and mouse response and image clarity at 1 Mbit/s with "
        "10, 100 and 200 ms one-way delay (ITU-T P.910); the thesis' keyboard response is not asked, "
        "the live pages have nothing to type",
        kind="campaign",
        job_type="rd_qoe",
        grids={
            "quick": {"protocol": PROTOCOLS, "delay": ["10ms", "200ms"]},
            "full": {"protocol": PROTOCOLS, "delay": ["10ms", "100ms", "200ms"]},
        },
        fixed={"rate": "1mbit", "loss": "0%"},
    ),
    Preset(
        key="ch4-fig43-44",
        report="ch4",
        figure="Figs. 4.3/4.4",
        title="DCR vs throughput and delay",
        description="Live DCR ratings vs TCP throughput 1-5 Mbit/s at 10, 50 and 100 ms one-way delay",
        kind="campaign",
        job_type="rd_qoe",
        grids={
            "quick": {"protocol": PROTOCOLS, "rate": ["1mbit", "3mbit", "5mbit"], "delay": ["10ms", "100ms"]},
            "full": {"protocol": PROTOCOLS, "rate": DCR_RATES, "delay": ["10ms", "50ms", "100ms"]},
        },
        fixed={"loss": "0%"},
    ),
)

CHAPTER = Chapter(
    "ch4",
    "Chapter 4: remote-desktop QoE (VNC, SPICE, X2Go)",
    CH4,
    note="VNC, SPICE and X2Go on the namespace desktop, 5 pages per trial; TCP is CUBIC in both "
    "namespaces, as in the thesis.",
)
