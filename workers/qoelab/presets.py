"""One-click reproductions of a paper's experiments: sweep and rating-campaign specs at two sizes.

Chapter 4 (``rd_qoe``), chapter 2 (``storage_apt``, scaled to one host) and chapter 3 (``vose``) of
thesis 000, and paper 002's experiments (``thinclient_tcp``, qoelab.thinclient.experiments).

``quick`` has fewer grid points (still one on each side of every threshold the findings check, see
``qoelab.findings``), 3 repetitions and 5 pages; ``full`` is the paper's grid with 10 repetitions.
The thesis gives ranges, not grid points, for its figures (../shared/notes/seed-rd-qoe.md): the full
grids are log-spaced across them, as in ``examples/thesis-fig4.*.yaml`` (a test keeps the two equal).
Plain data: the backend's Reproduce page and the CLI build sweeps and campaigns from the same specs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from qoelab.thinclient import experiments as tc_experiments

SIZES = ("quick", "full")
PROTOCOLS = ["vnc", "spice", "x2go"]
Size = Literal["quick", "full"]


@dataclass(frozen=True)
class Preset:
    """One experiment of a paper. ``grids[size]`` is the swept part; ``fixed`` is the same at both sizes."""

    key: str
    report: str  # the findings report that judges its results (qoelab.findings)
    figure: str
    title: str
    description: str
    kind: Literal["sweep", "campaign"]
    grids: dict[str, dict[str, list[Any]]]
    fixed: dict[str, Any] = field(default_factory=dict)
    repetitions: dict[str, int] = field(default_factory=lambda: {"quick": 3, "full": 10})
    seed: int = 1
    job_type: str = "rd_qoe"
    source: str = "Thesis"  # names the sweep's experiment: "Thesis Fig. 4.6: ...", "Paper 002 E7: ..."
    # Fixed parameters that differ by size (paper 002: 20 pairs for 30 s quick, 100 for 300 s full).
    sized: dict[str, dict[str, Any]] = field(default_factory=dict)

    def sweep_spec(self, size: Size) -> dict[str, Any]:
        """A sweep spec for ``POST /api/sweeps/`` (kind ``sweep``)."""
        if self.kind != "sweep":
            raise ValueError(f"{self.key} is a rating campaign, not a sweep")
        return {
            "experiment": {
                "name": f"{self.source} {self.figure}: {self.title}",
                "description": self.description,
            },
            "job_type": self.job_type,
            "name": f"{self.figure} ({size})",
            "grid": {k: list(v) for k, v in self.grids[_size(size)].items()},
            "fixed": {**self.fixed, **self.sized.get(size, {}), **JOB_FIXED.get(self.job_type, {})},
            "repetitions": self.repetitions[size],
            "order": "random",
            "seed": self.seed,
        }

    def points(self, size: Size) -> list[dict[str, Any]]:
        """Every combination of the grid over the fixed part, the grid's first key varying slowest."""
        fixed = self.sweep_spec(size)["fixed"] if self.kind == "sweep" else self.fixed
        out: list[dict[str, Any]] = [{}]
        for key, values in self.grids[_size(size)].items():
            out = [{**c, key: v} for c in out for v in values]
        return [{**fixed, **c} for c in out]

    def conditions(self, size: Size) -> list[dict[str, Any]]:
        """Rating conditions (kind ``campaign``): every combination of the grid, protocol first."""
        return [{"params": point} for point in self.points(size)]

    def unique_points(self, size: Size) -> list[dict[str, Any]]:
        """The points a sweep runs: a job type may drop parameters that do not apply to a point
        (storage APT's ``sessions`` outside fixed mode), and points that become equal run once."""
        if self.kind != "sweep":
            return self.points(size)
        from qoelab import jobs
        from qoelab.params import validate_params

        job = jobs.get(self.job_type)
        out, seen = [], set()
        for point in self.points(size):
            valid = validate_params(job.params, point)
            dropped = job.inapplicable(valid) if job.inapplicable else frozenset()
            key = repr(sorted((k, v) for k, v in valid.model_dump(mode="json").items() if k not in dropped))
            if key not in seen:
                seen.add(key)
                out.append({k: v for k, v in point.items() if k not in dropped})
        return out

    def trial_count(self, size: Size) -> int:
        return len(self.unique_points(size)) * (self.repetitions[size] if self.kind == "sweep" else 1)


def _size(size: str) -> str:
    if size not in SIZES:
        raise ValueError(f"size must be one of {', '.join(SIZES)}, got {size!r}")
    return size


# What every sweep of a job type adds to its preset's fixed part (rd_qoe: the thesis' 5 screens).
JOB_FIXED: dict[str, dict[str, Any]] = {"rd_qoe": {"pages": 5}}

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
        grids={
            # quick: 1 Mbit/s (<= "a few"), 10 and 100 Mbit/s (SPICE's side of its 10 Mbit/s switch).
            "quick": {"protocol": PROTOCOLS, "rate": ["1mbit", "10mbit", "100mbit"]},
            "full": {"protocol": PROTOCOLS, "rate": FULL_RATES},
        },
        fixed={"delay": "10ms", "loss": "0%", "verify_duration": "2s"},
        seed=46,
    ),
    Preset(
        key="ch4-fig47",
        report="ch4",
        figure="Fig. 4.7",
        title="delay",
        description="T vs one-way delay 10-200 ms at 1 Mbit/s (a) and 10 Mbit/s (b)",
        kind="sweep",
        grids={
            # quick: two delays at or below the 50 ms crossing of Fig. 4.7a and one far above it.
            "quick": {"protocol": PROTOCOLS, "rate": ["1mbit", "10mbit"], "delay": ["10ms", "50ms", "200ms"]},
            "full": {"protocol": PROTOCOLS, "rate": ["1mbit", "10mbit"], "delay": FULL_DELAYS},
        },
        fixed={"loss": "0%", "verify_duration": "2s"},
        seed=47,
    ),
    Preset(
        key="ch4-fig48",
        report="ch4",
        figure="Fig. 4.8",
        title="loss",
        description="T vs random loss 0.01-10 % at 1 and 10 Mbit/s, 100 ms one-way delay",
        kind="sweep",
        grids={
            # quick: two losses below the 3 % and one above the 5 % the finding compares.
            "quick": {"protocol": PROTOCOLS, "rate": ["1mbit", "10mbit"], "loss": ["0.1%", "1%", "10%"]},
            "full": {"protocol": PROTOCOLS, "rate": ["1mbit", "10mbit"], "loss": FULL_LOSSES},
        },
        # Q = 1 s: at 100 ms a retransmission timeout can exceed 0.5 s and split one update in two.
        fixed={"delay": "100ms", "verify_duration": "2s", "quiet": "1s"},
        seed=48,
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
        grids={
            "quick": {"protocol": PROTOCOLS, "rate": ["1mbit", "3mbit", "5mbit"], "delay": ["10ms", "100ms"]},
            "full": {"protocol": PROTOCOLS, "rate": DCR_RATES, "delay": ["10ms", "50ms", "100ms"]},
        },
        fixed={"loss": "0%"},
    ),
)

# Chapter 2 (storage APT) scaled to one 2-core host as the job type's defaults are: 200 Mbit/s
# instead of 900, delays to 100 ms as the paper's, n_max 64 instead of 128 (docs/storage-apt.md).
APT_MODES = ["apt", "vanilla", "fixed"]
APT_DELAYS = ["10ms", "20ms", "40ms", "60ms", "80ms", "100ms"]


def _both_transports(axis: str, quick: list[str], full: list[str]) -> dict[str, dict[str, list[Any]]]:
    """NBD and iSCSI over ``axis``: APT, vanilla and two fixed N (quick) or four (full)."""
    return {
        "quick": {"transport": ["nbd", "iscsi"], axis: quick, "mode": APT_MODES, "sessions": [16, 64]},
        "full": {"transport": ["nbd", "iscsi"], axis: full, "mode": APT_MODES, "sessions": [8, 16, 32, 64]},
    }


CH2: tuple[Preset, ...] = (
    Preset(
        key="ch2-s1",
        report="ch2",
        figure="Figs. 2.8/2.9",
        title="APT beside fixed N over time",
        description="NBD reads across 200 Mbit/s with 20 ms one-way delay: goodput and active sessions "
        "over time for APT, one session and fixed N",
        kind="sweep",
        grids={
            "quick": {"mode": APT_MODES, "sessions": [4, 16, 64]},
            "full": {"mode": APT_MODES, "sessions": [4, 8, 16, 32, 64]},
        },
        fixed={"transport": "nbd", "rate": "200mbit", "delay": "20ms", "steady": "30s"},
        job_type="storage_apt",
    ),
    Preset(
        key="ch2-fig210",
        report="ch2",
        figure="Fig. 2.10",
        title="goodput vs bandwidth",
        description="NBD and iSCSI at 10 ms one-way delay, 50-200 Mbit/s: APT, one session and fixed N",
        kind="sweep",
        grids=_both_transports("rate", ["50mbit", "200mbit"], ["50mbit", "100mbit", "150mbit", "200mbit"]),
        fixed={"delay": "10ms", "steady": "20s"},
        repetitions={"quick": 2, "full": 10},
        job_type="storage_apt",
    ),
    Preset(
        key="ch2-fig211",
        report="ch2",
        figure="Figs. 2.11-2.15",
        title="goodput and CPU vs delay",
        description="NBD and iSCSI at 200 Mbit/s, 10-100 ms one-way delay: goodput, CPU load and CPU "
        "ticks per bit for APT, one session and fixed N",
        kind="sweep",
        grids=_both_transports("delay", ["10ms", "40ms"], APT_DELAYS),
        fixed={"rate": "200mbit", "steady": "20s"},
        repetitions={"quick": 2, "full": 10},
        job_type="storage_apt",
    ),
)

CH3_SPEEDUPS = {"quick": [1, 2, 3, 10, "inf"], "full": [1, 1.5, 2, 3, 5, 10, 30, "inf"]}
CH3: tuple[Preset, ...] = (
    Preset(
        key="ch3-validate",
        report="ch3",
        figure="§3.5.3",
        title="VOSE against real acceleration",
        description="AES-128-CBC and HMAC-SHA1-96 per 1,448-byte record: software, the CPU's AES-NI / "
        "SHA-NI, and VOSE busy-waiting this host's measured T_software / T_hardware",
        kind="sweep",
        grids={
            "quick": {"device": ["aes_cbc", "sha1_only"], "mode": ["software", "hardware", "vose"]},
            "full": {"device": ["aes_cbc", "sha1_only"], "mode": ["software", "hardware", "vose"]},
        },
        fixed={"path": "app", "speedup": "measured", "duration": "10s"},
        repetitions={"quick": 3, "full": 10},
        job_type="vose",
    ),  # fmt: skip
    Preset(
        key="ch3-fig311",
        report="ch3",
        figure="Fig. 3.11",
        title="checksum offload vs speedup",
        description="The kernel's TCP checksum over veth: offload off (software), on (hardware, T = 0) and "
        "VOSE busy-waiting T_checksum / speedup per record",
        kind="sweep",
        grids={q: {"mode": ["software", "hardware", "vose"], "speedup": CH3_SPEEDUPS[q]} for q in SIZES},
        fixed={"path": "kernel_csum", "duration": "10s"},
        repetitions={"quick": 2, "full": 10},
        job_type="vose",
    ),
    Preset(
        key="ch3-fig312",
        report="ch3",
        figure="Fig. 3.12",
        title="IPsec offload devices vs speedup",
        description="AES-only, AES-CBC, SHA1-only, SHA1-AES and SHA1-AES-CBC devices at speedups 1 to inf, "
        "application records over veth",
        kind="sweep",
        grids={
            q: {
                "device": ["aes_only", "aes_cbc", "sha1_only", "sha1_aes", "sha1_aes_cbc"],
                "speedup": CH3_SPEEDUPS[q],
            }
            for q in SIZES
        },
        fixed={"path": "app", "mode": "vose", "duration": "10s"},
        repetitions={"quick": 1, "full": 10},
        job_type="vose",
    ),  # fmt: skip
    Preset(
        key="ch3-quota",
        report="ch3",
        figure="Figs. 3.5-3.10",
        title="checksum offload vs CPU quota",
        description="Software, hardware and VOSE (T = 0) on the kernel's TCP checksum with each end held "
        "to a CPU bandwidth quota (the stand-in for a lower clock frequency, which a lab host cannot set)",
        kind="sweep",
        grids={
            "quick": {"mode": ["software", "hardware", "vose"], "cpu_quota": [0.25, 0.5, 1.0]},
            "full": {"mode": ["software", "hardware", "vose"], "cpu_quota": [0.2, 0.4, 0.6, 0.8, 1.0]},
        },
        fixed={"path": "kernel_csum", "speedup": "inf", "duration": "10s"},
        repetitions={"quick": 2, "full": 10},
        job_type="vose",
    ),  # fmt: skip
)

# Paper 002 (``thinclient_tcp``): the experiments of qoelab.thinclient.experiments at the paper's
# two buffers. The seed is a grid axis, not a repetition: repetitions of one seed replay the same
# traffic, while the findings pool trials that differ by seed only (findings.base.POOLED). quick:
# 20 pairs for 30 s and 2 seeds; full: the paper's 100 pairs, 300 s and 7 runs.
TC_BUFFERS = [tc_experiments.BUFFERS["large"], tc_experiments.BUFFERS["small"]]
TC_SEEDS = {"quick": [1, 2], "full": [1, 2, 3, 4, 5, 6, 7]}
# 100 pairs at both sizes: fewer pairs load the link too little for any queue (docs/thinclient-tcp.md;
# this host replays 100 pairs less than a millisecond behind the schedule).
TC_SIZED = {"quick": {"pairs": 100, "duration": "30s"}, "full": {"pairs": 100, "duration": "300s"}}
# The power-law bulk length with Table 2's mean: the geometric one never queues the large buffer
# (measured, docs/thinclient-tcp.md "Measured on this host"); the paper's real traces had long blocks.
TC_TRAFFIC = {"bulk_length": "pareto", "max_bulk": 250}
TC_ONCE = {"quick": 1, "full": 1}


def _tc_grids(axes: dict[str, list[Any]]) -> dict[str, dict[str, list[Any]]]:
    """``axes`` at both sizes, the size's seeds last (the pooled repetitions)."""
    return {q: {**axes, "seed": TC_SEEDS[q]} for q in SIZES}


def _tc_fixed(base: dict[str, Any], key: str, drop: tuple[str, ...] = ()) -> dict[str, Any]:
    """An experiment's parameters (experiments.BASE / EXISTING ...) without the swept ones, and the
    experiment's key, which the job type reads for the paper's numbers and the charts series by."""
    return {**{k: v for k, v in base.items() if k not in drop}, **TC_TRAFFIC, "experiment": key}


TC002: tuple[Preset, ...] = (
    Preset(
        key="tc002-e1e2",
        report="tc002",
        figure="E1/E2",
        title="no modification vs priority queueing + SACK",
        description="Thin-client pairs over 10 Mbit/s, 20 ms, Reno: FIFO or two priority classes "
        "sharing the buffer, SACK off or on, at the 2,500 KB and 25 KB buffers (§3-§4; E1 is FIFO without "
        "SACK, E2 priority with SACK, the other two separate the options' effects)",
        kind="sweep",
        grids=_tc_grids({"limit": TC_BUFFERS, "queue": ["fifo", "prio"], "tcp_sack": [False, True]}),
        fixed=_tc_fixed(tc_experiments.BASE, "e1e2", drop=("queue", "tcp_sack")),
        repetitions=TC_ONCE,
        sized=TC_SIZED,
        job_type="thinclient_tcp",
        source="Paper 002",
    ),
    Preset(
        key="tc002-e7",
        report="tc002",
        figure="E7",
        title="separate connections for interactive and bulk data",
        description="Priority queueing + SACK with interactive data on a TCP connection of its own "
        "(§5.2.2, Case 2), at both buffers: interactive delay should be propagation only",
        kind="sweep",
        grids=_tc_grids({"limit": TC_BUFFERS}),
        fixed=_tc_fixed(tc_experiments.EXPERIMENTS["e7"].params, "e7"),
        repetitions=TC_ONCE,
        sized=TC_SIZED,
        job_type="thinclient_tcp",
        source="Paper 002",
    ),
    Preset(
        key="tc002-e8",
        report="tc002",
        figure="E8 (Fig. 14)",
        title="T_I150 and T_I1000 against WAN delay",
        description="WAN one-way delay 7-70 ms at both buffers with the existing options, priority "
        "queueing + SACK (a sweep grid cannot pair the paper's three configurations; E1/E2 runs no "
        "modification at 20 ms): T_I150 and T_I1000 by Eq. 4 (§6, Fig. 14)",
        kind="sweep",
        grids=_tc_grids({"limit": TC_BUFFERS, "delay": [f"{d}ms" for d in tc_experiments.E8_DELAYS_MS]}),
        fixed=_tc_fixed(tc_experiments.EXISTING, "e8"),
        repetitions=TC_ONCE,
        sized=TC_SIZED,
        job_type="thinclient_tcp",
        source="Paper 002",
    ),
)

# Thesis 001 (storage benchmarking): one guest boot per trial, so quick runs each point once.
SB_TARGETS = ["nfs", "iscsi", "swift"]
SB_RTTS = {"quick": ["0ms", "20ms", "50ms"], "full": ["0ms", "20ms", "50ms", "160ms", "250ms"]}
SB_THREADS = {"quick": [1, 4, 16, 32], "full": [1, 2, 4, 8, 16, 32, 64]}
SB_REALISTIC = {"rtt": "50ms", "loss": "0.1%", "jitter": "10ms"}  # Table 3.1 (notes §2)
SB_ONCE = {"quick": 1, "full": 3}  # the thesis does not say how often it repeated (notes §3.7)


def _sb(key: str, figure: str, title: str, description: str, grids: dict[str, dict[str, list[Any]]],
        fixed: dict[str, Any], sized: dict[str, dict[str, Any]] | None = None) -> Preset:  # fmt: skip
    return Preset(key=key, report="sb001", figure=figure, title=title, description=description, kind="sweep",
                  grids=grids, fixed=fixed, repetitions=SB_ONCE, sized=sized or {}, job_type="storage_bench",
                  source="Thesis 001")  # fmt: skip


SB001: tuple[Preset, ...] = (
    _sb("sb001-realistic", "Figs. 4.6/4.7", "batch reads on the realistic network",
        "NFS, iSCSI and Swift reading 1 MiB files with 1-64 threads at 100 Mbit/s, 50 ms RTT, 0.1 % loss and "
        "±10 ms jitter: Swift's parallel connections against one TCP connection each (§4.6)",
        {size: {"target": SB_TARGETS, "threads": SB_THREADS[size]} for size in SIZES},
        {"family": "batch", "op": "read", "file_size": "1mb", **SB_REALISTIC},
        {"quick": {"set_size": "64mb"}, "full": {"set_size": "256mb"}}),
    _sb("sb001-ideal", "Figs. 4.5-4.7 (a)", "batch reads on the ideal network",
        "The same batch on the unimpaired 100 Mbit/s link, 4 KiB and 1 MiB files: iSCSI's LAN advantage",
        {size: {"target": SB_TARGETS, "file_size": ["4kb", "1mb"], "threads": SB_THREADS[size]}
         for size in SIZES},
        {"family": "batch", "op": "read", "rtt": "0ms"},
        {"quick": {"set_size": "16mb"}, "full": {"set_size": "256mb"}}),
    _sb("sb001-metadata-rtt", "Fig. 5.1c", "metadata time per operation vs RTT",
        "n × mkdir, touch, ls, unlink, rmdir on each target at RTT 0-250 ms: NFS ≈ 2 RTT per operation, "
        "Swift ≈ 30 ms + RTT, iSCSI barely affected",
        {size: {"target": SB_TARGETS, "rtt": SB_RTTS[size]} for size in SIZES},
        {"family": "metadata"}, {"quick": {"meta_n": 100}, "full": {"meta_n": 1000}}),
    _sb("sb001-metadata-n", "Figs. 5.1a/5.2", "metadata time and packets vs n",
        "n = 1-1000 operations of each kind on the ideal network: completion time and packets on the link",
        {"quick": {"target": SB_TARGETS, "meta_n": [1, 10, 100]},
         "full": {"target": SB_TARGETS, "meta_n": [1, 10, 100, 1000]}},
        {"family": "metadata", "rtt": "0ms"}),
    _sb("sb001-metadata-loss", "Fig. 5.1d", "metadata completion time vs loss",
        "n operations of each kind with 0-2.5 % loss on each direction",
        {"quick": {"target": SB_TARGETS, "loss": ["0%", "2.5%"]},
         "full": {"target": SB_TARGETS, "loss": ["0%", "0.1%", "1%", "2.5%"]}},
        {"family": "metadata", "rtt": "0ms"}, {"quick": {"meta_n": 100}, "full": {"meta_n": 1000}}),
    _sb("sb001-amplification", "Figs. 4.3/4.9", "single-file throughput and amplification",
        "One file of 4 KiB-16 MiB read or written on the ideal network: link bytes in both directions per "
        "file byte; iSCSI's (148 + s)/s and (204 + s)/s (§4.7)",
        {"quick": {"target": SB_TARGETS, "op": ["read", "write"], "file_size": ["4kb", "1mb"]},
         "full": {"target": SB_TARGETS, "op": ["read", "write"],
                  "file_size": ["4kb", "16kb", "64kb", "256kb", "1mb", "4mb", "16mb"]}},
        {"family": "single", "rtt": "0ms"}),
    _sb("sb001-schedulers", "Fig. 4.8", "iSCSI schedulers at 50 ms",
        "iSCSI sync reads of 1 MiB files at 50 ms RTT with mq-deadline (the thesis' deadline) and bfq "
        "(standing in for CFQ, which Linux removed)",
        {size: {"scheduler": ["mq-deadline", "bfq"], "threads": SB_THREADS[size]} for size in SIZES},
        {"family": "batch", "target": "iscsi", "op": "read", "form": "sync", "file_size": "1mb",
         "rtt": "50ms"},
        {"quick": {"set_size": "64mb"}, "full": {"set_size": "256mb"}}),
    _sb("sb001-1gbit", "Fig. 4.10", "batch reads at 1 Gbit/s vs RTT",
        "The three targets (and iSCSI with bfq) reading with 16 threads at 1 Gbit/s as the RTT grows: a "
        "larger BDP steepens the curves; Swift stays level, iSCSI with deadline resists best (§4.8). A TCG "
        "guest cannot fill 1 Gbit/s: every round carries its ceiling",
        {"quick": {"target": SB_TARGETS, "rtt": SB_RTTS["quick"]},
         "full": {"target": SB_TARGETS, "scheduler": ["mq-deadline", "bfq"], "rtt": SB_RTTS["full"],
                  "file_size": ["4kb", "1mb", "16mb"]}},
        {"family": "batch", "op": "read", "rate": "1gbit", "threads": 16},
        {"quick": {"file_size": "1mb", "set_size": "64mb"}, "full": {"set_size": "256mb"}}),
    _sb("sb001-macro", "Tables 6.1-6.3", "PostMark and FileBench",
        "PostMark (500 files of 5-512 KiB, unbuffered) and the emulated varmail and fileserver personalities "
        "on each target, ideal and at 50 ms RTT",
        {"quick": {"family": ["varmail", "fileserver"], "target": SB_TARGETS, "rtt": ["0ms", "50ms"]},
         "full": {"family": ["postmark", "varmail", "fileserver"], "target": SB_TARGETS,
                  "rtt": ["0ms", "50ms"]}},
        # quick: 1,000 files per personality (fileserver's stock 10,000 of 128 KiB take long to preallocate
        # from a TCG guest); full: the stock personalities. PostMark on Swift does not finish here in
        # hours (one FUSE request per 512 B write; docs/storage-bench.md).
        {}, {"quick": {"seconds": "30s", "files": 1000}, "full": {"seconds": "120s", "transactions": 25000}}),
)  # fmt: skip

REGISTRY: dict[str, Preset] = {p.key: p for p in (*CH4, *CH2, *CH3, *TC002, *SB001)}
# The Reproduce page's sections: (report, heading, presets).
CHAPTERS: tuple[tuple[str, str, tuple[Preset, ...]], ...] = (
    ("ch4", "Chapter 4: remote-desktop QoE (VNC, SPICE, X2Go)", CH4),
    ("ch2", "Chapter 2: storage APT (parallel NBD and iSCSI sessions)", CH2),
    ("ch3", "Chapter 3: offload emulation (VOSE: checksum and IPsec devices)", CH3),
    ("tc002", "Paper 002: thin-client traffic over a shared bottleneck (Linux TCP)", TC002),
    ("sb001", "Thesis 001: NFS, iSCSI and Swift behind an emulated WAN", SB001),
)


def get(key: str) -> Preset:
    try:
        return REGISTRY[key]
    except KeyError:
        raise ValueError(f"unknown preset {key!r} (known: {', '.join(REGISTRY)})") from None
