"""Job type ``vose``: what a TCP/IP offload engine would buy, measured without the hardware.

Thesis 000 ch. 3 (paper 004): the offloaded work (the TCP checksum; IPsec's SHA-1, AES and CBC) is
removed on both ends and the emulated device's time T = T_software / speedup is busy-waited
instead. Path ``app`` runs it on application records (vose-pair, C); path ``kernel_csum`` on the
kernel's TCP checksum through veth's offload flag. Validated against a real accelerator pair
(AES-NI / SHA-NI vs software). docs/vose.md; ../shared/notes/seed-vose.md §5.
"""

from __future__ import annotations

import json
import math
import time
from typing import Any, Literal

from pydantic import Field, ValidationInfo, field_validator

from qoelab import params as p
from qoelab.emulation.linkparams import LinkParams
from qoelab.emulation.profile import RATE_MAX_BPS, RATE_MIN_BPS
from qoelab.errors import ParameterError
from qoelab.estimate import Estimate
from qoelab.jobtype import ChartSpec, Cleanup, JobType, Metric, Sample, SeriesPoint, TrialContext, TrialResult
from qoelab.units import require_ascii

SPEEDUP_MAX = 1000.0
DEVICE_PIECES = {
    "checksum": ("csum",),
    "sha1_only": ("sha1",),
    "aes_only": ("aes",),
    "aes_cbc": ("aes", "cbc"),
    "sha1_aes": ("sha1", "aes"),
    "sha1_aes_cbc": ("sha1", "aes", "cbc"),
}
Device = Literal["checksum", "sha1_only", "aes_only", "aes_cbc", "sha1_aes", "sha1_aes_cbc"]


class VoseParams(LinkParams):
    """An unshaped veth path by default (VOSE needs CPU-bound ends); ``rate`` adds a tbf."""

    rate: p.Rate(RATE_MIN_BPS, RATE_MAX_BPS) | None = Field(  # type: ignore[valid-type]
        default=None, description="optional bottleneck rate (tbf on the veth); empty = unshaped"
    )
    tcp_cc: str = Field(default="cubic", description="TCP congestion control (Linux 2.6.30's default: cubic)")
    path: Literal["app", "kernel_csum"] = Field(
        default="app", description="app (records of vose-pair) or kernel_csum (the kernel's TCP checksum)"
    )
    mode: Literal["software", "hardware", "vose", "inf"] = Field(
        default="software",
        description="software (no offload), hardware (AES-NI/SHA-NI; kernel: the offload flag), "
        "vose (skip the work, busy-wait T = T_software / speedup), inf (skip, no wait)",
    )
    device: Device = Field(
        default="sha1_aes_cbc",
        description="what the device takes over: checksum, or one of the thesis' five IPsec devices",
    )
    speedup: float | Literal["inf", "measured"] = Field(
        default=2.0,
        description="vose: device speed / software speed, 1 to 1000, inf (T = 0), or measured (this "
        "host's T_software / T_hardware: AES-NI, SHA-NI; the kernel path's offload flag = inf)",
    )
    speedup_r: float | None = Field(
        default=None, description="vose: the receiver's speedup when it differs (default: speedup)"
    )
    record: int = Field(default=1448, ge=256, le=65536, description="record size on the wire, bytes")
    wait: Literal["busy", "busy_wall", "sleep"] = Field(
        default="busy",
        description="vose: spin on the TSC, deadline moved past interruptions (busy), spin to a wall-clock "
        "deadline (busy_wall, the thesis' loop), or sleep (frees the core, coarse)",
    )
    duration: p.Duration(1.0, 600.0) = Field(default=10.0, description="stream length (thesis: 60s)")  # type: ignore[valid-type]
    cpu_quota: float = Field(
        default=1.0, ge=0.1, le=1.0, description="CPU bandwidth quota per end (the stand-in for frequency)"
    )
    sender_cpu: int = Field(default=0, ge=0, le=1023, description="core the sender is pinned to")
    receiver_cpu: int = Field(
        default=1, ge=0, le=1023, validate_default=True, description="core the receiver is pinned to"
    )
    calibration_samples: int = Field(default=2000, ge=100, le=100000, description="timed records per stage")
    rps: bool = Field(default=True, description="steer each end's receive processing to its own core")
    calibration: Literal["offline", "stream"] = Field(
        default="offline",
        description="T_software from a tight loop on one record before the run (offline) or from the work "
        "timed inside short streams on this path (stream, as the thesis timed its functions in place)",
    )

    @field_validator("speedup", "speedup_r", mode="before")
    @classmethod
    def _speedup_bounds(cls, value: Any, info: ValidationInfo) -> Any:
        # Before the type: a word that is neither a number nor a keyword is one error on the field
        # itself, not one per branch of the union (speedup.float, speedup.literal[...]).
        words = ("inf", "measured") if info.field_name == "speedup" else ("inf",)
        if value in words or (value is None and info.field_name == "speedup_r"):
            return value
        try:
            require_ascii(info.field_name or "speedup", value)  # float() reads full-width digits
        except ParameterError as err:
            raise ValueError(err.message) from None
        try:
            x = math.nan if isinstance(value, bool) else float(value)
        except (TypeError, ValueError):
            x = math.nan
        if not (x == math.inf or 1 <= x <= SPEEDUP_MAX):
            allowed = f"1 to {SPEEDUP_MAX:g}" + (", inf or measured" if len(words) == 2 else " or inf")
            raise ValueError(f"must be {allowed}, got {value!r}")
        return x

    @field_validator("device")
    @classmethod
    def _device_has_hardware(cls, device: str, info: ValidationInfo) -> str:
        if info.data.get("path") == "app" and info.data.get("mode") == "hardware" and device == "checksum":
            raise ValueError(
                "checksum has no accelerated instruction for application records; its hardware case is "
                "the offload flag of path kernel_csum"
            )
        return device

    @field_validator("receiver_cpu")
    @classmethod
    def _own_core(cls, cpu: int, info: ValidationInfo) -> int:
        if cpu == info.data.get("sender_cpu"):
            raise ValueError(f"must differ from sender_cpu ({cpu}): each end has its own core")
        return cpu

    def speedups(self) -> tuple[float | str, float | None]:
        s = math.inf if self.speedup == "inf" else self.speedup
        return s, self.speedup_r

    def to_run(self) -> Any:
        from qoelab.vose.trial import VoseRun

        speedup, speedup_r = self.speedups()
        return VoseRun(path=self.path, mode=self.mode, device=self.device, speedup=speedup,
                       speedup_r=speedup_r, record=self.record, wait=self.wait,
                       duration_s=float(self.duration), cpu_quota=self.cpu_quota, sender_cpu=self.sender_cpu,
                       receiver_cpu=self.receiver_cpu, calibration_samples=self.calibration_samples,
                       rps=self.rps, calibration=self.calibration, profile=self.to_profile())  # fmt: skip


def requires_for(params: VoseParams) -> frozenset[str]:
    """The pair and ethtool everywhere; the accelerated instruction a hardware run uses."""
    needs = {"netns", "vose"}
    if params.mode == "hardware" and params.path == "app":
        pieces = DEVICE_PIECES[params.device]
        needs |= {"vose.aesni"} if "aes" in pieces else set()
        needs |= {"vose.sha_ni"} if "sha1" in pieces else set()
    return frozenset(needs)


def inapplicable(params: VoseParams) -> frozenset[str]:
    """Speedup and wait shape only vose runs; the kernel path's device is the kernel's checksum."""
    out = set() if params.mode == "vose" else {"speedup", "speedup_r", "wait"}
    if params.path == "kernel_csum":
        out |= {"device", "calibration"}  # the kernel's work cannot be timed in place from user space
    return frozenset(out)


def run(params: VoseParams, ctx: TrialContext) -> TrialResult:
    from qoelab.emulation import linklog
    from qoelab.vose.trial import run_trial

    started = time.time()

    def on_tick(d: dict[str, Any]) -> None:
        rate = 8e-6 * d["bytes"] / max(d["t"], 1e-9)
        ctx.log.info("t = %.0f s: %.1f Mbit/s received, busy-wait %.0f ms", d["t"], rate, d["busy_ns"] / 1e6)

    link_log = ctx.workdir / linklog.ARTIFACT  # written for a trace link only
    out = run_trial(params.to_run(), ctx.prefix, on_tick=on_tick, link_log=link_log)
    if link_log.is_file():
        ctx.add_artifact(link_log, "json")
    detail = ctx.workdir / "vose.json"
    detail.write_text(json.dumps({"summary": out.summary, "sender": out.sender, "receiver": out.receiver,
                                  "calibration": out.calibration.samples(), "provenance": out.provenance},
                                 indent=2, default=str))  # fmt: skip
    ctx.add_artifact(detail, "json")
    samples = [Sample("calibration", i, values) for i, values in enumerate(out.calibration.samples())]
    return TrialResult(
        summary=out.summary,
        samples=samples,  # type: ignore[arg-type]
        series=[SeriesPoint(name, t, v) for name, t, v in out.series],
        link=out.link,
        provenance={**out.provenance, "elapsed_s": time.time() - started},
    )


def _vs_quota(key: str, title: str, y: str, y_label: str, y_scale: float = 1.0) -> ChartSpec:
    return ChartSpec(key=key, title=title, x="cpu_quota", y=y, series="mode",
                     x_label="CPU quota per end (share of one core; stands in for frequency)",
                     y_label=y_label, y_scale=y_scale)  # fmt: skip


JOB = JobType(
    name="vose",
    title="Offload emulation (VOSE)",
    description="A TCP stream of fixed-size records between two pinned cores; the checksum or IPsec "
    "work per record is done in software, by AES-NI/SHA-NI, or skipped and replaced by a busy-wait "
    "of T = T_software / speedup (VOSE).",
    params=VoseParams,
    requires=frozenset({"netns", "vose"}),
    requires_for=requires_for,  # type: ignore[arg-type]
    inapplicable=inapplicable,  # type: ignore[arg-type]
    run=run,  # type: ignore[arg-type]
    metrics=(
        Metric("throughput_bps", "throughput (receiver goodput)", "bit/s"),
        Metric("cpu_sender", "sender core busy (/proc/stat)", ""),
        Metric("cpu_receiver", "receiver core busy (/proc/stat)", ""),
        Metric("busy_fraction", "sender's time in emulated-device waits", ""),
        Metric("busy_fraction_receiver", "receiver's time in emulated-device waits", ""),
        Metric("T_S_ns", "emulated device time per record, sender", "ns"),
        Metric("T_R_ns", "emulated device time per record, receiver", "ns"),
        Metric("T_S_software_ns", "software time of the device's work, sender", "ns"),
        Metric("T_R_software_ns", "software time of the device's work, receiver", "ns"),
        Metric("thread_cpu_sender", "sender thread CPU (user + sys) per second", ""),
        Metric("thread_cpu_receiver", "receiver thread CPU (user + sys) per second", ""),
        Metric("records", "records received and verified", ""),
        Metric("work_ns_sender", "record work timed in the stream, sender (median)", "ns"),
        Metric("work_ns_receiver", "record work timed in the stream, receiver (median)", "ns"),
    ),
    charts=(
        _vs_quota(
            "fig35",
            "Figs. 3.5/3.6: throughput vs CPU quota",
            "throughput_bps",
            "throughput (Gbit/s)",
            1e9,
        ),
        _vs_quota("fig37", "Figs. 3.7/3.8: sender CPU vs CPU quota", "cpu_sender", "sender core busy"),
        _vs_quota("fig39", "Figs. 3.9/3.10: receiver CPU vs CPU quota", "cpu_receiver", "receiver core busy"),
        ChartSpec(
            key="fig311",
            title="Fig. 3.11: throughput vs speedup (dashed: software, hardware)",
            x="speedup",
            y="throughput_bps",
            series="mode",
            log_x=True,
            x_label="speedup factor",
            y_label="throughput (Gbit/s)",
            y_scale=1e9,
        ),
        ChartSpec(
            key="fig312",
            title="Fig. 3.12: throughput vs speedup per IPsec device",
            x="speedup",
            y="throughput_bps",
            series="device",
            log_x=True,
            x_label="speedup factor",
            y_label="throughput (Gbit/s)",
            y_scale=1e9,
        ),
        ChartSpec(
            key="goodput_t",
            title="Goodput over time",
            x="t",
            y="goodput_bps",
            series="mode",
            source="series",
            x_label="time (s)",
            y_label="goodput (Gbit/s)",
            y_scale=1e9,
        ),
    ),  # fmt: skip
    timeout_s=900,
    max_attempts=1,
    probes=("qoelab.vose.capability:probe",),
    cleanups=(Cleanup("qoelab.vose.quota:remove_leftover_quotas", after_link=True),),
    reports=("qoelab.findings.ch3:REPORT",),
    presets="qoelab.vose.presets:CHAPTER",
    estimate=Estimate("qoelab.estimate:for_duration"),
    cli=("qoelab.vose.cli:register",),
    examples=(
        "qoelab vose validate --primitive aes",
        "qoelab run vose --set path=app --set mode=software --set duration=3s",
    ),
)
