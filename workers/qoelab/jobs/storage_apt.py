"""Job type ``storage_apt``: parallel IP-SAN sessions tuned by APT (thesis 000 ch. 2, paper 003).

A trial reads sequentially from one storage target through N sessions across the emulated link:
one session (``vanilla``), a fixed N (``fixed``) or N chosen by the APT controller (``apt``), then
a steady-state window. Transports: ``nbd`` (nbdkit), ``iscsi`` (tgt) and ``synthetic`` (a goodput
model instead of a network; instant). docs/storage-apt.md.
"""

from __future__ import annotations

import json
import time
from typing import Any, Literal

from pydantic import Field, ValidationInfo, field_validator

from qoelab import params as p
from qoelab.apt.controller import AptConfig
from qoelab.apt.trial import Interval, run_modes, step_sample_values
from qoelab.emulation.linkparams import LinkParams
from qoelab.emulation.profile import DEFAULT_LIMIT_PKTS, DELAY_MAX_S, RATE_MAX_BPS, RATE_MIN_BPS
from qoelab.emulation.tcp import BUFFER_MAX, BUFFER_MIN
from qoelab.errors import ParameterError
from qoelab.estimate import Estimate
from qoelab.jobtype import ChartSpec, Cleanup, JobType, Metric, Sample, SeriesPoint, TrialContext, TrialResult

N_MAX_LIMIT = 128  # the paper's maximum number of sessions
TIMEOUT_S = 3600

# Capabilities per transport (qoelab.capabilities); synthetic needs nothing but the worker.
TRANSPORT_CAPS = {
    "nbd": frozenset({"netns", "link", "apt.nbd"}),
    "iscsi": frozenset({"netns", "link", "apt.iscsi"}),
    "synthetic": frozenset(),
}


class StorageAptParams(LinkParams):
    """The link, defaulted to this host's scaled scenario and Table 2.1's TCP, plus the APT run.

    The paper ran 900 Mbit/s with 10-40 ms and a 5,000-packet queue on dedicated hosts; one 2-core
    host emulating both ends and the link carries 200 Mbit/s with 20 ms one-way delay and 1,000
    packets, which keeps the long-fat shape: one 512 KB window fills a quarter of the path.
    """

    rate: p.Rate(RATE_MIN_BPS, RATE_MAX_BPS) | None = Field(  # type: ignore[valid-type]
        default=200e6, description="bottleneck rate, both directions (the paper's 900mbit, scaled)"
    )
    delay: p.Duration(0.0, DELAY_MAX_S) = Field(
        default=0.02, description="one-way delay (the paper's 10-100ms)"
    )  # type: ignore[valid-type]
    limit: str | int | None = Field(default="1000pkt", description="queue limit (the paper's 5000pkt)")
    tcp_cc: str = Field(default="reno", description="TCP congestion control (Table 2.1: NewReno = reno)")
    tcp_rmem_max: p.Bytes(BUFFER_MIN, BUFFER_MAX) | None = Field(  # type: ignore[valid-type]
        default=512 * 1024, description="receive buffer ceiling (Table 2.1: 512 KB)"
    )
    tcp_wmem_max: p.Bytes(BUFFER_MIN, BUFFER_MAX) | None = Field(  # type: ignore[valid-type]
        default=512 * 1024, description="send buffer ceiling (Table 2.1: 512 KB)"
    )

    transport: Literal["nbd", "iscsi", "synthetic"] = Field(
        default="nbd", description="nbd (nbdkit), iscsi (tgt), or synthetic (a goodput model, no network)"
    )
    mode: Literal["apt", "fixed", "vanilla"] = Field(
        default="apt", description="apt (the controller chooses N), fixed (sessions), vanilla (one session)"
    )
    n_max: int = Field(default=64, ge=1, le=N_MAX_LIMIT, description="sessions opened (the paper's 128)")
    n0: int = Field(default=4, ge=1, le=N_MAX_LIMIT, description="APT's first N (Table 2.1: 4)")
    alpha: float = Field(default=2.0, gt=1.0, le=16.0, description="APT's multiplicative increase (2)")
    gss: Literal["paper", "textbook"] = Field(default="paper", description="Eq. 2.1's left case")
    sessions: int | None = Field(
        default=None, ge=1, le=N_MAX_LIMIT, validate_default=True, description="N in fixed mode"
    )
    delta: p.Duration(0.2, 600.0) = Field(default=5.0, description="measurement interval Δ (paper: 100s)")  # type: ignore[valid-type]
    steady: p.Duration(0.2, 3600.0) = Field(default=30.0, description="steady-state window after tuning")  # type: ignore[valid-type]
    warmup: p.Duration(0.0, 600.0) = Field(  # type: ignore[valid-type]
        default=5.0, description="fixed and vanilla: time at N before the steady window (APT's is its search)"
    )
    stripe: p.Bytes(4096, 32 << 20) = Field(default=128 * 1024, description="stripe unit (Table 2.1: 128 KB)")  # type: ignore[valid-type]
    request: p.Bytes(4096, 1 << 30) = Field(default=10 << 20, description="application read size (10 MB)")  # type: ignore[valid-type]
    readahead: p.Bytes(4096, 1 << 30) = Field(
        default=128 << 20, description="bytes in flight (MD read-ahead)"
    )  # type: ignore[valid-type]
    size: p.Bytes(1 << 20, 1 << 40) = Field(default=1 << 30, description="size of the storage target")  # type: ignore[valid-type]
    noise: p.Percent(0.0, 50.0) = Field(default=2.0, description="synthetic: goodput noise (SD, %)")  # type: ignore[valid-type]

    @field_validator("n0")
    @classmethod
    def _n0_within_n_max(cls, n0: int, info: ValidationInfo) -> int:
        n_max = info.data.get("n_max")
        if n_max is not None and n0 > n_max:
            raise ValueError(f"must be at most n_max ({n_max}), got {n0}")
        return n0

    @field_validator("alpha")
    @classmethod
    def _alpha_moves_n(cls, alpha: float, info: ValidationInfo) -> float:
        n0, n_max = info.data.get("n0"), info.data.get("n_max")
        if n0 is not None and n_max is not None:
            try:
                AptConfig(n0=n0, alpha=alpha, n_max=n_max)
            except ParameterError as err:
                raise ValueError(err.message) from None
        return alpha

    @field_validator("sessions")
    @classmethod
    def _sessions_for_fixed(cls, sessions: int | None, info: ValidationInfo) -> int | None:
        mode, n_max = info.data.get("mode"), info.data.get("n_max")
        if mode == "fixed" and sessions is None:
            raise ValueError("is required in fixed mode (the number of active sessions)")
        if sessions is not None and n_max is not None and sessions > n_max:
            raise ValueError(f"must be at most n_max ({n_max}), got {sessions}")
        return sessions

    def config(self) -> AptConfig:
        return AptConfig(n0=self.n0, alpha=self.alpha, n_max=self.n_max, gss=self.gss)

    def sessions_opened(self) -> int:
        return (
            1 if self.mode == "vanilla" else (self.n_max if self.mode == "apt" else int(self.sessions or 1))
        )


def requires_for(params: StorageAptParams) -> frozenset[str]:
    return TRANSPORT_CAPS[params.transport]


APT_ONLY = frozenset({"n0", "alpha", "gss", "delta"})


def inapplicable(params: StorageAptParams) -> frozenset[str]:
    """A sweep of APT beside fixed N (mode × sessions) runs each APT or vanilla point once."""
    out = set() if params.mode == "fixed" else {"sessions"}
    if params.mode != "apt":
        out |= APT_ONLY | ({"n_max"} if params.mode == "vanilla" else set())
    else:
        out.add("warmup")
    if params.transport != "synthetic":
        out.add("noise")
    return frozenset(out)


def _synthetic(params: StorageAptParams) -> Any:
    from qoelab.apt.synthetic import SyntheticTransport, model_curve

    profile = params.to_profile()
    rtt = profile.up.delay_s + profile.down.delay_s
    queue = (
        (profile.down.limit_pkts or DEFAULT_LIMIT_PKTS) * params.mtu
        if profile.down.limit_bytes is None
        else profile.down.limit_bytes
    )
    curve = model_curve(float(params.rate or 1e9), rtt, float(params.tcp_rmem_max or 512 * 1024), queue)
    return SyntheticTransport(curve, params.sessions_opened(), noise=params.noise / 100, seed=1)


def run(params: StorageAptParams, ctx: TrialContext) -> TrialResult:
    started = time.time()
    if params.transport == "synthetic":
        return _result(params, ctx, _synthetic(params), link={}, started=started)
    from qoelab.apt.transports import storage_session

    with storage_session(params, ctx) as (transport, link, prov):
        result = _result(params, ctx, transport, link=link, started=started)
    result.provenance.update(prov)
    return result


def _result(
    params: StorageAptParams, ctx: TrialContext, transport: Any, link: dict, started: float
) -> TrialResult:
    samples: list[Sample] = []

    def on_step(step: Any, iv: Interval) -> None:
        samples.append(Sample("step", step.k, step_sample_values(step, iv)))
        bracket = f", bracket ({step.l}, {step.m}, {step.r})" if step.l is not None else ""
        ctx.log.info("step %d (%s): N = %d, goodput %.1f Mbit/s -> %s%s, next N = %d", step.k, step.phase,
                     step.n, iv.goodput_bps / 1e6, step.branch, bracket, step.next_n)  # fmt: skip

    out = run_modes(transport, params.mode, params.config(), float(params.delta), float(params.steady),
                    sessions=params.sessions, on_step=on_step, warmup_s=float(params.warmup))  # fmt: skip
    series = [
        SeriesPoint("goodput_bps", t, g)
        for iv in [*out.step_intervals, *([out.warmup] if out.warmup else []), out.steady]
        for t, g in iv.per_second
    ]
    series += [SeriesPoint("active_n", t, float(n)) for t, n in out.per_second_n]
    series += [
        SeriesPoint("goodput_step_bps", iv.start_s + iv.elapsed_s, iv.goodput_bps)
        for iv in out.step_intervals
    ]
    summary = out.summary(float(params.rate) if params.rate else None)
    summary["sessions_opened"] = float(params.sessions_opened())
    detail = ctx.workdir / "storage_apt.json"
    detail.write_text(json.dumps({"steps": [s.values for s in samples], "summary": summary}, indent=2))
    ctx.add_artifact(detail, "json")
    return TrialResult(
        summary=summary,
        samples=samples,
        series=series,
        link=link,
        provenance={
            "transport": params.transport,
            "mode": params.mode,
            "cpu_accounting": _cpu_note(params),
            "elapsed_s": time.time() - started,
        },  # fmt: skip
    )


def _cpu_note(params: StorageAptParams) -> str:
    if params.transport == "synthetic":
        return "none (synthetic transport)"
    return ("per process (/proc/<pid>/stat): client = the block-device layer, storage = the target; both "
            "sides share one host, so /proc/stat would count them together")  # fmt: skip


def _vs_delay(key: str, title: str, y: str, y_label: str, y_scale: float = 1.0) -> ChartSpec:
    return ChartSpec(key=key, title=title, x="delay", y=y, series="mode", x_label="one-way delay (ms)",
                     y_label=y_label, x_scale=1e-3, y_scale=y_scale, facet="transport")  # fmt: skip


JOB = JobType(
    name="storage_apt",
    title="Storage APT",
    description="Sequential reads from an IP-SAN target (NBD or iSCSI) over N parallel sessions across "
    "the emulated link: one session, a fixed N, or N tuned by APT (bracket + golden-section search).",
    params=StorageAptParams,
    requires=frozenset(),
    requires_for=requires_for,  # type: ignore[arg-type]
    inapplicable=inapplicable,  # type: ignore[arg-type]
    run=run,  # type: ignore[arg-type]
    metrics=(
        Metric("goodput_steady_bps", "steady-state goodput", "bit/s"),
        Metric("utilization", "goodput / link rate", ""),
        Metric("n_star", "APT's N*", "sessions"),
        Metric("steps", "steps to converge", ""),
        Metric("converge_s", "time to converge", "s"),
        Metric("n_steady", "active sessions in the steady window", "sessions"),
        Metric("saturated", "APT reached n_max", ""),
        Metric("cpu_load_client", "CPU load, client (cores)", ""),
        Metric("cpu_load_storage", "CPU load, storage (cores)", ""),
        Metric("cpu_ticks_per_bit_client", "CPU ticks per bit, client", "ticks/bit"),
        Metric("cpu_ticks_per_bit_storage", "CPU ticks per bit, storage", "ticks/bit"),
    ),
    charts=(
        ChartSpec(
            key="fig28",
            title="Fig. 2.8: goodput over time",
            x="t",
            y="goodput_bps",
            series="mode",
            source="series",
            x_label="time (s)",
            y_label="goodput (Mbit/s)",
            y_scale=1e6,
        ),
        ChartSpec(
            key="fig29",
            title="Fig. 2.9: active sessions over time",
            x="t",
            y="active_n",
            series="mode",
            source="series",
            x_label="time (s)",
            y_label="active sessions N",
        ),
        ChartSpec(
            key="fig210",
            title="Fig. 2.10: goodput vs bandwidth",
            x="rate",
            y="goodput_steady_bps",
            series="mode",
            log_x=True,
            x_label="bandwidth (Mbit/s)",
            y_label="goodput (Mbit/s)",
            x_scale=1e6,
            y_scale=1e6,
            facet="transport",
        ),  # fmt: skip
        _vs_delay("fig211", "Fig. 2.11: goodput vs delay", "goodput_steady_bps", "goodput (Mbit/s)", 1e6),
        _vs_delay("fig212", "Figs. 2.12/2.13: CPU load vs delay (client)", "cpu_load_client", "cores busy"),
        _vs_delay(
            "fig214",
            "Figs. 2.14/2.15: CPU ticks per bit vs delay (client)",
            "cpu_ticks_per_bit_client",
            "ticks per bit",
        ),  # fmt: skip
    ),
    timeout_s=TIMEOUT_S,
    max_attempts=1,
    probes=("qoelab.apt.capability:probe",),
    cleanups=(Cleanup("qoelab.apt.targets:cleanup_leftovers", after_link=True),),
    reports=("qoelab.findings.ch2:REPORT",),
    presets="qoelab.apt.presets:CHAPTER",
    estimate=Estimate("qoelab.apt.estimate:estimate", metrics=("steps",)),
    cli=("qoelab.apt.cli:register",),
    examples=("qoelab apt simulate --goodput curve.csv --n0 4 --alpha 2 --n-max 64",),
)
