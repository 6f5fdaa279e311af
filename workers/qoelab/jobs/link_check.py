"""Job type ``link_check``: build the emulated link for a profile and record configured vs measured.

A sweep over link profiles shows how faithfully this host emulates each condition (TCP goodput
against the configured rate, RTT against the configured delay, loss against the configured loss).
Every other job type records the same verification for its own link at the start of each trial.
"""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import Field

from qoelab import params as p
from qoelab.emulation.linkparams import LinkParams
from qoelab.jobtype import ChartSpec, JobType, Metric, TrialContext, TrialResult

MIN_DURATION_S = 1.0
# Fixed costs of one verification besides the two TCP tests: namespaces, pings, two UDP probes.
OVERHEAD_S = 15.0


class LinkCheckParams(LinkParams):
    """The link (shared fields) plus how long to measure."""

    duration: p.Duration(MIN_DURATION_S, 60.0) = Field(  # type: ignore[valid-type]
        default=5.0, description="seconds per TCP test (iperf3), each direction"
    )
    backend: Literal["auto", "netem", "userspace"] = "auto"


def summary_numbers(verification: dict[str, Any]) -> dict[str, float]:
    """Flat per-trial numbers from a verification dict (None values are left out)."""
    conf, meas = verification["configured"], verification["measured"]
    values: dict[str, Any] = {
        "configured_rate_bps": conf["rate_bps"],
        "configured_up_rate_bps": conf["up_rate_bps"],
        "configured_delay_ms": conf["delay_ms"],
        "configured_rtt_ms": conf["rtt_ms"],
        "configured_loss_pct": conf["loss_pct"],
        "tcp_down_bps": meas["tcp_down_bps"],
        "tcp_up_bps": meas["tcp_up_bps"],
        "rtt_ms": meas["rtt_ms"],
        "rtt_loaded_ms": meas["rtt_loaded_ms"],
        "loss_pct": meas["loss_pct"],
        "loss_down_pct": meas["loss_down"]["loss_pct"],
        "loss_up_pct": meas["loss_up"]["loss_pct"],
        "expected_tcp_down_bps": verification["expected"]["tcp_down_bps"],
        "mathis_bps": verification.get("mathis_bps"),
        "checks_ok": 1.0 if verification["ok"] else 0.0,
    }
    return {k: float(v) for k, v in values.items() if v is not None}


def run(params: LinkCheckParams, ctx: TrialContext) -> TrialResult:
    from qoelab.emulation import linklog
    from qoelab.emulation.topology import emulated_link
    from qoelab.emulation.verify import verify_link

    duration = float(params.duration)
    left = ctx.time_left()
    if left is not None:
        # Two TCP tests plus fixed costs must fit before the deadline.
        duration = max(MIN_DURATION_S, min(duration, (left - OVERHEAD_S) / 3))
    profile = params.to_profile()
    log_path = ctx.workdir / "linkemu.log"
    link_log = ctx.workdir / linklog.ARTIFACT  # written for a trace link only
    with emulated_link(
        profile, prefix=ctx.prefix, backend=params.backend, log_path=log_path, link_log=link_log
    ) as link:
        ctx.log.info("link %s up (%s backend: %s)", link.prefix, link.backend, link.backend_reason)
        verification = verify_link(link, duration_s=duration)
    verification["emulator_stats"] = link.emulator_stats or None
    out = ctx.workdir / "link_check.json"
    out.write_text(json.dumps(verification, indent=2, default=str))
    ctx.add_artifact(out, "json")
    if log_path.exists():
        ctx.add_artifact(log_path, "log")
    if link_log.exists():
        ctx.add_artifact(link_log, "json")
    for c in verification["checks"]:
        if not c["ok"]:
            ctx.log.warning("check %s outside tolerance: configured %s, measured %s (%s)",
                            c["name"], c["configured"], c["measured"], c["tolerance"])  # fmt: skip
    return TrialResult(
        summary=summary_numbers(verification),
        link=verification,
        provenance={
            "backend": link.backend,
            "backend_reason": link.backend_reason,
            "tools": verification["tools"],
        },
    )


JOB = JobType(
    name="link_check",
    title="Link check",
    description="Builds the emulated link for each profile and measures TCP goodput (iperf3) each "
    "way, RTT idle and under load (ping) and loss (UDP probe): configured vs measured.",
    params=LinkCheckParams,
    requires=frozenset({"netns", "link", "iperf3"}),
    run=run,  # type: ignore[arg-type]
    metrics=(
        Metric("tcp_down_bps", "TCP goodput down", "bit/s"),
        Metric("tcp_up_bps", "TCP goodput up", "bit/s"),
        Metric("rtt_ms", "RTT idle", "ms"),
        Metric("rtt_loaded_ms", "RTT under load", "ms"),
        Metric("loss_pct", "loss (UDP probe)", "%"),
        Metric("mathis_bps", "TCP model (Mathis)", "bit/s"),
        Metric("configured_rate_bps", "configured rate", "bit/s"),
        Metric("configured_rtt_ms", "configured RTT", "ms"),
        Metric("configured_loss_pct", "configured loss", "%"),
        Metric("checks_ok", "all checks passed", ""),
    ),
    charts=(
        ChartSpec(
            key="rate",
            title="Measured TCP goodput vs configured rate",
            x="rate",
            y="tcp_down_bps",
            series="delay",
            log_x=True,
            log_y=True,
            x_label="configured rate (Mbit/s)",
            y_label="TCP goodput down (Mbit/s)",
            x_scale=1e6,
            y_scale=1e6,
            identity=True,
        ),
        ChartSpec(
            key="rtt",
            title="Measured RTT vs configured one-way delay",
            x="delay",
            y="rtt_ms",
            series="rate",
            x_label="configured one-way delay (ms)",
            y_label="RTT idle (ms)",
            x_scale=1e-3,
        ),
        ChartSpec(
            key="loss",
            title="Measured loss vs configured loss",
            x="loss",
            y="loss_pct",
            x_label="configured loss (%)",
            y_label="measured loss (%)",
            identity=True,
        ),
    ),
    timeout_s=300,
    max_attempts=2,
    cli=("qoelab.emulation.cli:register",),
    examples=(
        "qoelab link check --rate 10mbit --delay 25ms --loss 0.5% --json",
        "qoelab run link_check --set rate=10mbit --set delay=20ms --json   # any job type, API validation",
        "qoelab sweep run examples/link_check.yaml --wait",
    ),
)
