"""Job type ``thinclient_tcp``: paper 002's thin-client traffic over one shared bottleneck, on Linux TCP.

N server/client pairs replay two-state screen traffic (``qoelab.thinclient``) through the userspace
emulator as the paper's router (10 Mbit/s, 20 ms, a byte-limited tail-drop buffer, FIFO or two
priority classes sharing it); each interactive write's one-way delay is taken apart into the
paper's components. docs/thinclient-tcp.md; ../shared/notes/seed-thinclient-tcp.md.
"""

from __future__ import annotations

import dataclasses
import json
import re
import time
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, field_validator

from qoelab import params as p
from qoelab.emulation.linkparams import LinkParams
from qoelab.emulation.profile import DELAY_MAX_S, RATE_MAX_BPS, RATE_MIN_BPS, LinkProfile
from qoelab.emulation.tcp import TcpSettings
from qoelab.errors import ParameterError
from qoelab.estimate import Estimate
from qoelab.jobtype import ChartSpec, Cleanup, JobType, Metric, Sample, SeriesPoint, TrialContext, TrialResult
from qoelab.thinclient.model import TwoStateModel

PAIRS_MAX = 200
TRIAL_REF = re.compile(r"trial:([1-9][0-9]{0,11})")
SAMPLE_COMPONENTS = ("total", "server", "retransmission", "router", "client")


class ThinclientParams(LinkParams):
    """Paper 002's testbed: defaults are its "no modification" case (E1) with the large buffer."""

    rate: p.Rate(RATE_MIN_BPS, RATE_MAX_BPS) | None = Field(  # type: ignore[valid-type]
        default=10e6, description="bottleneck rate (the paper: 10 Mbit/s)"
    )
    delay: p.Duration(0.0, DELAY_MAX_S) = Field(  # type: ignore[valid-type]
        default=0.02, description="WAN one-way delay (the paper: 20 ms; Fig. 14 sweeps 7-70 ms)"
    )
    lan_delay: p.Duration(0.0, 0.1) = Field(  # type: ignore[valid-type]
        default=0.001, description="each LAN leg's delay, added to the WAN's (the paper: 1 ms)"
    )
    limit: str | int | None = Field(
        default="2500000b", description="router buffer, tail drop: 2500000b (large) or 25000b (the BDP)"
    )
    queue: Literal["fifo", "drophead", "codel", "pie", "prio"] = Field(
        default="fifo",
        description="fifo (the paper's tail drop), or prio: interactive packets (DSCP EF) first, one shared "
        "buffer; drophead, codel, pie: the link's queue disciplines",
    )
    tcp_cc: str = Field(default="reno", description="TCP congestion control (the paper: Reno)")
    tcp_sack: bool = Field(default=False, description="SACK (off in the paper's baseline, on in §4)")
    tcp_recovery: int | None = Field(default=None, ge=0, le=7, description="1 = RACK, 0 = RFC 6675")
    tcp_early_retrans: int | None = Field(default=None, ge=0, le=4, description="0 = no tail loss probes")
    tcp_frto: int | None = Field(default=None, ge=0, le=2, description="F-RTO (0 off, 2 with SACK)")
    tcp_timestamps: int | None = Field(default=None, ge=0, le=2, description="TCP timestamps")
    tcp_thin_linear_timeouts: bool | None = Field(default=None, description="linear RTOs for thin streams")
    tcp_slow_start_after_idle: bool = Field(default=False, description="slow-start restart (paper: off)")
    tcp_autocorking: bool = Field(default=False, description="coalesce small writes (paper's sender: off)")
    tcp_notsent_lowat: p.Bytes(1, 2**32 - 1) | None = Field(  # type: ignore[valid-type]
        default=None, description="unsent bytes a socket may hold (empty: unlimited)"
    )
    tcp_quickack: bool = Field(default=True, description="client ACKs every segment (paper: no delayed ACK)")
    pairs: int = Field(default=100, ge=1, le=PAIRS_MAX, description="server/client pairs (the paper: 100)")
    duration: p.Duration(1.0, 900.0) = Field(default=300.0, description="replay length (the paper: 300s)")  # type: ignore[valid-type]
    connections: Literal["shared", "separate"] = Field(
        default="shared", description="separate: interactive data on a connection of its own (Case 2)"
    )
    keystrokes_first: bool = Field(
        default=False, description="the sender writes keystrokes before screen data it still holds (E9)"
    )
    rto_ewma: bool = Field(
        default=False,
        description="the paper's Enhancement 1: a BPF sock_ops program raises each socket's RTO floor from "
        "an srtt with gain 7/8 on rises",
    )
    rto_ewma_floor: p.Duration(0.008, 0.2) = Field(  # type: ignore[valid-type]
        default=0.2,
        description="lowest RTO floor the rto_ewma program sets (the kernel accepts at most 200 ms; "
        "docs/thinclient-bpf.md)",
    )
    t0: p.Duration(0.0, 0.5) = Field(  # type: ignore[valid-type]
        default=0.02, description="request one-way time t0: thresholds are 150 - t0 and 1000 - t0 ms"
    )
    seed: int = Field(default=1, ge=0, le=2**31 - 1, description="traffic model seed")
    bulk_length: Literal["geometric", "pareto"] = Field(
        default="geometric",
        description="bulk flow length, mean 7.4 packets: geometric, or pareto (a bounded power law: the "
        "paper's traces had blocks of a few hundred packets)",
    )
    max_bulk: int = Field(default=100, ge=8, le=280, description="longest bulk flow, packets")
    experiment: str = Field(default="", max_length=20, description="the paper's experiment (e1..e9)")
    trace: str | None = Field(
        default=None,
        max_length=4096,
        description="replay a capture's server timeline instead of the model: trial:N (that trial's "
        "capture, e.g. an rd_qoe session), or a pcap file in a local run",
    )
    trace_server_port: int | None = Field(
        default=None, ge=1, le=65535, description="the capture's server port (empty: found from the SYNs)"
    )

    @field_validator("trace")
    @classmethod
    def _trace_form(cls, v: str | None) -> str | None:
        if v is None or v.strip() == "":
            return None
        v = v.strip()
        if v.startswith("trial:") and not TRIAL_REF.fullmatch(v):
            raise ValueError("takes trial:N with N a trial number, or a pcap file path in a local run")
        return v

    def tcp_settings(self) -> TcpSettings:
        return dataclasses.replace(
            super().tcp_settings(),
            recovery=self.tcp_recovery,
            early_retrans=self.tcp_early_retrans,
            frto=self.tcp_frto,
            timestamps=self.tcp_timestamps,
            thin_linear_timeouts=self.tcp_thin_linear_timeouts,
            slow_start_after_idle=self.tcp_slow_start_after_idle,
            autocorking=self.tcp_autocorking,
            notsent_lowat=None if self.tcp_notsent_lowat is None else int(self.tcp_notsent_lowat),
            quickack=self.tcp_quickack,
        ).validate()

    def to_profile(self, seed: int = 1) -> LinkProfile:
        # Constant delays commute with the queue: the LAN legs ride on the delay after the router.
        return LinkProfile.parse(
            **self.link_rates(),
            delay=float(self.delay) + 2 * float(self.lan_delay),
            loss=self.loss,
            gemodel=self.gemodel,
            limit=self.limit,
            **self.queue_settings(),
            outage=self.outage,
            up_delay=None if self.up_delay is None else float(self.up_delay) + 2 * float(self.lan_delay),
            up_loss=self.up_loss,
            mtu=self.mtu,
            seed=seed,
            tcp=self.tcp_settings(),
            offload=self.link_offload,
        )

    def to_run(self) -> Any:
        from qoelab.thinclient.trial import ThinclientRun

        return ThinclientRun(profile=self.to_profile(self.seed), pairs=self.pairs,
                             duration_s=float(self.duration), connections=self.connections, seed=self.seed,
                             model=TwoStateModel(bulk_length=self.bulk_length, max_bulk=self.max_bulk),
                             t0_ms=float(self.t0) * 1e3,
                             keystrokes_first=self.keystrokes_first, rto_ewma=self.rto_ewma,
                             rto_ewma_floor_s=float(self.rto_ewma_floor))  # fmt: skip


def inapplicable(params: ThinclientParams) -> frozenset[str]:
    out = set() if params.connections == "shared" else {"keystrokes_first"}
    if not params.rto_ewma:
        out.add("rto_ewma_floor")
    out |= {"trace_server_port"} if params.trace is None else {"bulk_length", "max_bulk"}
    return frozenset(out)


def trace_path(params: ThinclientParams, ctx: TrialContext) -> Path | None:
    """The capture to replay: trial:N fetched through the worker, or a local run's file."""
    if params.trace is None:
        return None
    ref = TRIAL_REF.fullmatch(params.trace)
    if ref is not None:
        if ctx.fetch_capture is None:
            raise ParameterError("trace", "trial:N is fetched from the backend by a worker; a local run "
                                 "takes the pcap file (download it from the trial page)")  # fmt: skip
        dest = ctx.workdir / f"trace-trial{ref.group(1)}.pcap"
        ctx.fetch_capture(int(ref.group(1)), dest)
        return dest
    if ctx.fetch_capture is not None:
        raise ParameterError("trace", "a file path means nothing to a worker; name a trial's capture as "
                             "trial:N")  # fmt: skip
    path = Path(params.trace)
    if not path.is_file():
        raise ParameterError("trace", f"no such capture file: {path}")
    return path


def run(params: ThinclientParams, ctx: TrialContext) -> TrialResult:
    from qoelab.emulation import linklog
    from qoelab.thinclient import experiments
    from qoelab.thinclient.trial import run_trial

    started = time.time()

    def on_tick(elapsed: float, down: dict[str, Any]) -> None:
        ctx.log.info("t = %.0f s: %s packets through the router, %s dropped, largest queue %s B",
                     elapsed, down.get("packets"), down.get("dropped_queue"),
                     down.get("max_backlog_bytes"))  # fmt: skip

    trace = trace_path(params, ctx)
    run_spec = dataclasses.replace(params.to_run(), trace=trace, trace_server_port=params.trace_server_port)
    out = run_trial(run_spec, ctx.prefix, ctx.workdir / "run", on_tick=on_tick)
    detail = ctx.workdir / "thinclient.json"
    detail.write_text(json.dumps({"summary": out.summary, "connections": out.connections, "ccdf": out.ccdf,
                                  "gaps": out.gaps, "writes": out.rows}, default=str))  # fmt: skip
    ctx.add_artifact(detail, "json")
    if (ctx.workdir / "run" / linklog.ARTIFACT).is_file():  # a trace link's log
        ctx.add_artifact(ctx.workdir / "run" / linklog.ARTIFACT, "json")
    for name in ("down.rec", "linkemu.log"):
        path = Path(ctx.workdir / "run" / name)
        if path.exists() and name.endswith(".log"):
            ctx.add_artifact(path, "log")
    samples = [
        Sample("ccdf", i, {**row, "curve": f"{row['kind']} {row['component']}"})
        for i, row in enumerate(out.ccdf)
        if row["component"] in SAMPLE_COMPONENTS
    ]
    samples += [Sample("connection", i, row) for i, row in enumerate(out.connections)]
    samples += [Sample("gap_histogram", i, row) for i, row in enumerate(out.gaps)]
    buffer_bytes = out.provenance["buffer_bytes"]
    return TrialResult(
        summary=out.summary,
        samples=samples,  # type: ignore[arg-type]
        series=[SeriesPoint("queue_bytes", t, v) for t, v in out.queue],
        link=out.link,
        provenance={
            **out.provenance,
            "paper": experiments.paper_values(params.experiment, buffer_bytes) if params.experiment else {},
            "trace": None if trace is None else {"ref": params.trace, "bytes": trace.stat().st_size},
            "elapsed_s": time.time() - started,
        },
    )


def _fig14(key: str, y: str, name: str) -> ChartSpec:
    return ChartSpec(key=key, title=f"Fig. 14: {name} against WAN delay", x="delay", y=y, series="experiment",
                     facet="limit", log_y=True, x_label="WAN one-way delay (ms)", y_label=f"{name} (s)",
                     x_scale=1e-3)  # fmt: skip


def record_params(record: dict[str, Any]) -> dict[str, Any]:
    """The resolved ``thinclient_tcp`` parameters of one saved benchmark run (a line of
    ``benchmarks/thinclient/results/*.jsonl``: experiment, buffer, extra, seed, pairs, duration_s)."""
    from qoelab.params import validate_params
    from qoelab.thinclient.experiments import preset

    raw = {**preset(record["experiment"], record["buffer"]), **record["extra"],
           "experiment": record["experiment"], "seed": record["seed"], "pairs": record["pairs"],
           "duration": f"{record['duration_s']}s"}  # fmt: skip
    return validate_params(ThinclientParams, raw).model_dump(mode="json")


JOB = JobType(
    name="thinclient_tcp",
    title="Thin-client TCP (paper 002)",
    description="N server/client pairs replay two-state thin-client traffic (interactive keystrokes, "
    "bulk screen updates) through one 10 Mbit/s bottleneck; each interactive write's one-way delay "
    "is split into server buffering, retransmission, router queueing, propagation and client "
    "head-of-line time, on real Linux TCP with the paper's settings read back.",
    params=ThinclientParams,
    requires=frozenset({"netns", "userspace_link", "thinclient"}),
    inapplicable=inapplicable,  # type: ignore[arg-type]
    capture_params=("trace",),
    run=run,  # type: ignore[arg-type]
    metrics=(
        Metric("r_I150", "interactive writes above 150 - t0 ms (r_I150)", ""),
        Metric("r_I1000", "interactive writes above 1000 - t0 ms (r_I1000)", ""),
        Metric("T_I150_s", "mean time between r_I150 events, Eq. 4 as printed", "s"),
        Metric("T_I1000_s", "mean time between r_I1000 events, Eq. 4 as printed", "s"),
        Metric("T_I150_rederived_s", "T_I150 by Eq. 4 re-derived (no 1/c_B on bulk terms)", "s"),
        Metric("T_I1000_rederived_s", "T_I1000 by Eq. 4 re-derived", "s"),
        Metric("p50_I_ms", "interactive one-way delay, median", "ms"),
        Metric("p99_I_ms", "interactive one-way delay, 99th percentile", "ms"),
        Metric("max_I_ms", "interactive one-way delay, largest", "ms"),
        Metric("p99_B_ms", "bulk one-way delay, 99th percentile", "ms"),
        Metric("rto_per_conn_300s", "RTOs per connection per 300 s (TcpExtTCPTimeouts)", ""),
        Metric("spurious_rto_per_conn_300s", "spurious RTOs per connection per 300 s (F-RTO)", ""),
        Metric("utilisation", "bottleneck utilisation (IP bytes)", ""),
        Metric("utilisation_interactive", "bottleneck utilisation by interactive payload", ""),
        Metric("router_drops", "packets dropped at the router (tail drop and push-out)", ""),
        Metric("max_queue_bytes", "largest router queue", "B"),
        Metric("share_server_I1000", "server buffering's share of the >980 ms tail", ""),
        Metric("share_router_I150", "router queueing's share of the >130 ms tail", ""),
        Metric("schedule_lag_p99_ms", "sender behind its schedule, 99th percentile", "ms"),
    ),
    charts=(
        ChartSpec(
            key="fig6",
            title="Fig. 6: one-way delay CCDF by kind and component",
            x="x_ms",
            y="ccdf",
            series="curve",
            source="curve",
            log_x=True,
            log_y=True,
            x_label="delay (ms)",
            y_label="share of writes above",
        ),
        ChartSpec(
            key="ri150",
            title="r_I150 per configuration (paper: 3.6e-2 no modification, large)",
            x="queue",
            y="r_I150",
            series="tcp_sack",
            log_y=True,
            facet="limit",
            x_label="router queue",
            y_label="r_I150",
        ),
        ChartSpec(
            key="ri1000",
            title="r_I1000 per configuration",
            x="queue",
            y="r_I1000",
            series="tcp_sack",
            log_y=True,
            facet="limit",
            x_label="router queue",
            y_label="r_I1000",
        ),
        _fig14("fig14_150", "T_I150_s", "T_I150"),
        _fig14("fig14_1000", "T_I1000_s", "T_I1000"),
        ChartSpec(
            key="fig8",
            title="Fig. 8: router queue over time",
            x="t",
            y="queue_bytes",
            source="series",
            x_label="time (s)",
            y_label="queue (KB)",
            y_scale=1e3,
        ),
        ChartSpec(
            key="fig4",
            title="Fig. 4: gaps between a connection's writes",
            x="log10_gap",
            y="count",
            source="curve",
            x_label="log10 gap (s)",
            y_label="writes",
        ),
    ),  # fmt: skip
    timeout_s=1500,
    max_attempts=1,
    probes=("qoelab.thinclient.capability:probe",),
    reports=("qoelab.findings.tc002:REPORT",),
    presets="qoelab.thinclient.presets:CHAPTER",
    estimate=Estimate("qoelab.estimate:for_duration"),
    cli=("qoelab.thinclient.cli:register",),
    examples=("qoelab thinclient classify rdp.pcapng --server-port 3389",),
    # A killed trial's BPF program, its pins and its cgroup (qoelab-<prefix>...), once its processes are gone.
    cleanups=(Cleanup("qoelab.thinclient.bpf.loader:cleanup", after_link=True),),
)
