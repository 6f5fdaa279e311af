"""Job type ``rd_qoe``: one slow-motion remote-desktop trial (thesis ch. 4) over an emulated link.

A trial builds the link, verifies it briefly (stored as the trial's ``link``), runs the namespace
desktop with one protocol's server and native client, clicks through the workload pages one update
at a time under capture and records one sample per screen update (T, X, X/T, pixel time, ...).
The charts reproduce the thesis' Figs. 4.6-4.8 from the per-trial means (mean ± 95 % CI over the
repetitions, as the thesis averaged 10 runs per condition).

``workload: typing`` types into an editor page instead (``qoelab.rd.keystrokes``): one ``keystroke``
sample per key, its echo timed like an update. For both workloads the capture is classified by
paper 002's flow rule (``qoelab.thinclient.classify``) into provenance ``thinclient_classify`` and
the ``tc_*`` summary values.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any, Literal

from pydantic import ConfigDict, Field, ValidationInfo, field_validator

from qoelab import params as p
from qoelab.emulation.linkparams import LinkParams
from qoelab.estimate import Estimate
from qoelab.hostfacts import cpu_provenance
from qoelab.jobtype import ChartSpec, Cleanup, JobType, Metric, TrialContext, TrialResult
from qoelab.rd.flows import classification_metrics, classify_capture
from qoelab.rd.keystrokes import DEFAULT_GAP_S
from qoelab.rd.keystrokes import MAX_KEYSTROKES as MAX_TYPED
from qoelab.rd.samples import keystroke_samples, summarise, update_samples

PROTOCOLS = ("vnc", "spice", "x2go")
# What a worker must report for each protocol (qoelab.rd.capability.RD_TOOLS). The SPICE server
# (Xorg + spiceqxl) has no capability flag of its own yet; run_bench names its package when missing.
PROTOCOL_CAPS: dict[str, frozenset[str]] = {
    "vnc": frozenset({"rd.vnc.server", "rd.vnc.client"}),
    "spice": frozenset({"rd.spice.server", "rd.spice.client"}),
    "x2go": frozenset({"rd.x2go.server", "rd.x2go.client"}),
}
COMMON_CAPS = frozenset({"netns", "link", "iperf3", "tshark", "rd.desktop", "rd.input"})
# server vm: QEMU and the guest image instead of the namespace desktop's servers (the guest has them).
VM_CAPS: dict[str, frozenset[str]] = {
    "vnc": frozenset({"vm", "rd.vnc.client"}),
    "spice": frozenset({"vm", "rd.spice.client"}),
    "x2go": frozenset({"vm", "nft", "rd.x2go.client"}),
}


# The New-sweep form's groups of parameters, in order (JSON-schema metadata only: ``x-group`` on each
# field, ``x-groups`` on the model; validation does not read them).
PARAM_GROUPS = (
    ("link", "Link", "the emulated path, its TCP settings and the link verification"),
    (
        "protocol",
        "Protocol settings",
        "the remote-desktop protocol, where its server runs, and each protocol's knobs",
    ),
    (
        "driver",
        "Slow-motion driver",
        "the workload (pages or typing), silence and pause per update, timeouts",
    ),
    ("recording", "Recording", "WebM videos for recorded-mode ratings"),
)


def _group(name: str) -> dict[str, str]:
    return {"x-group": name}


def _schema_groups(schema: dict[str, Any]) -> None:
    """The groups in order, and the shared link fields (declared in LinkParams) in the link group."""
    schema["x-groups"] = [{"name": n, "title": t, "description": d} for n, t, d in PARAM_GROUPS]
    for name in LinkParams.model_fields:
        schema.get("properties", {}).get(name, {}).setdefault("x-group", "link")


class RdQoeParams(LinkParams):
    """The link (shared fields), the protocol and its settings, and the slow-motion driver's knobs."""

    model_config = ConfigDict(json_schema_extra=_schema_groups)

    protocol: Literal["vnc", "spice", "x2go"] = Field(
        description="remote-desktop protocol", json_schema_extra=_group("protocol")
    )
    server: Literal["namespace", "vm"] = Field(
        default="namespace",
        description="where the desktop runs: the server network namespace, or a QEMU guest in it "
        "(VNC and SPICE by QEMU itself, X2Go by x2goserver in the guest)",
        json_schema_extra=_group("protocol"),
    )
    vm_start: Literal["snapshot", "cold"] = Field(
        default="snapshot",
        description="server vm: restore the guest from the host's saved state (made once per host and "
        "image), or boot it for every trial",
        json_schema_extra=_group("protocol"),
    )
    seed: int = Field(
        default=1,
        ge=0,
        le=2**31 - 1,
        description="workload pages and link PRNG seed",
        json_schema_extra=_group("driver"),
    )
    quiet: p.Duration(0.05, 10.0) = Field(  # type: ignore[valid-type]
        default=0.5,
        description="Q: server silence that ends an update",
        json_schema_extra=_group("driver"),
    )
    pause: p.Duration(0.0, 60.0) = Field(
        default=0.5, description="P: pause after each update", json_schema_extra=_group("driver")
    )  # type: ignore[valid-type]
    update_timeout: p.Duration(1.0, 600.0) = Field(  # type: ignore[valid-type]
        default=30.0,
        description="an update not finished after this long is recorded as timed out",
        json_schema_extra=_group("driver"),
    )
    verify_duration: p.Duration(1.0, 30.0) = Field(  # type: ignore[valid-type]
        default=2.0,
        description="seconds per TCP test of the link verification at the trial's start",
        json_schema_extra=_group("link"),
    )
    verify: Literal["once", "every"] = Field(
        default="once",
        description="link verification: once = in full on a worker host's first trial of this condition "
        "(per hour), then a 10-ping check of RTT; every = in full on every trial (docs/throughput.md)",
        json_schema_extra=_group("link"),
    )
    record: bool = Field(
        default=False,
        description="record the client display and a locally rendered reference as WebM videos "
        "(recorded-mode ratings); costs CPU during the trial and about the trial's length again after it",
        json_schema_extra=_group("recording"),
    )
    # After the durations and record: its validator checks the time budget with them.
    pages: int = Field(
        default=5,
        ge=1,
        le=100,
        description="screen updates (clicks) per trial",
        json_schema_extra=_group("driver"),
    )
    # After pages, record and server: the validators below read them.
    workload: Literal["pages", "typing"] = Field(
        default="pages",
        description="pages: click through the workload pages, one screen update at a time (thesis "
        "ch. 4); typing: type seeded text into an editor page at a typist's rate, one keystroke echo "
        "per sample (paper 002's interactive flows; docs/rd-benchmark.md)",
        json_schema_extra=_group("driver"),
    )
    typing_gap: p.Duration(0.05, 5.0) = Field(  # type: ignore[valid-type]
        default=DEFAULT_GAP_S,
        description="typing: mean gap between keystrokes (gamma-distributed, seeded; 0.27 s = paper "
        "002's t_II, about 45 words per minute)",
        json_schema_extra=_group("driver"),
    )
    keystrokes: int = Field(
        default=40,
        ge=1,
        le=MAX_TYPED,
        description="typing: keystrokes per trial",
        json_schema_extra=_group("driver"),
    )
    vnc_server: Literal["x11vnc", "tigervnc"] = Field(
        default="x11vnc",
        description="VNC server program (x11vnc on Xvfb, or TigerVNC Xvnc)",
        json_schema_extra=_group("protocol"),
    )
    vnc_qemu_adaptive: bool = Field(
        default=True,
        description="server vm, VNC: QEMU's adaptive tight encoding (its default: JPEG only for areas that "
        "change often, so slow-motion updates go lossless); false adds -vnc non-adaptive=on",
        json_schema_extra=_group("protocol"),
    )
    vnc_compresslevel: int = Field(
        default=9,
        ge=0,
        le=9,
        description="TightVNC viewer -compresslevel",
        json_schema_extra=_group("protocol"),
    )
    vnc_quality: int = Field(
        default=5,
        ge=0,
        le=9,
        description="TightVNC viewer JPEG -quality",
        json_schema_extra=_group("protocol"),
    )
    spice_image_compression: Literal["auto_glz", "auto_lz", "quic", "glz", "lz", "off"] = Field(
        default="auto_glz",
        description="SPICE server image compression",
        json_schema_extra=_group("protocol"),
    )
    x2go_link: Literal["modem", "isdn", "adsl", "wan", "lan"] = Field(
        default="adsl",
        description="X2Go link quality",
        json_schema_extra=_group("protocol"),
    )
    x2go_pack: str = Field(
        default="16m-jpeg-9", description="X2Go compression method", json_schema_extra=_group("protocol")
    )
    x2go_irlimit: int = Field(
        default=1_000_000,
        ge=0,
        le=10**9,
        description="nxagent -irlimit (kB/s): above any link rate, so a page drawn at link adsl is sent at "
        "once; 0 = stock nxagent, which holds it ~4 s on an idle desktop (docs/rd-benchmark.md)",
        json_schema_extra=_group("protocol"),
    )

    @field_validator("x2go_pack")
    @classmethod
    def _pack_is_one_word(cls, value: str) -> str:
        # Passed to pyhoca-cli --pack: one NX method name such as 16m-jpeg-9, nothing else.
        if not re.fullmatch(r"[a-z0-9][a-z0-9-]{0,39}", value):
            raise ValueError(f"must be an NX pack method such as 16m-jpeg-9, got {value!r}")
        return value

    @field_validator("vnc_qemu_adaptive")
    @classmethod
    def _adaptive_is_a_qemu_setting(cls, adaptive: bool, info: ValidationInfo) -> bool:
        if not adaptive and info.data.get("server") != "vm":
            raise ValueError("applies to server vm only (QEMU's own VNC server)")
        return adaptive

    @field_validator("pages")
    @classmethod
    def _fits_the_time_limit(cls, pages: int, info: ValidationInfo) -> int:
        # Worst case: every update runs to its timeout. Refuse at sweep creation, not after 30 min.
        d = info.data
        if not all(k in d for k in ("update_timeout", "pause", "quiet", "verify_duration")):
            return pages  # another field is already invalid and reported
        per_update = d["update_timeout"] + d["pause"] + d["quiet"]
        setup = VM_SETUP_BUDGET_S if d.get("server") == "vm" else SETUP_BUDGET_S
        fixed = setup + 2 * d["verify_duration"] + 10
        if d.get("record"):
            # The reference replays the clicks at the same moments, then both videos are encoded.
            per_update *= 2
            fixed += RECORD_BUDGET_S
        worst = pages * per_update + fixed
        if worst > TIMEOUT_S:
            most = int((TIMEOUT_S - fixed) // per_update)
            raise ValueError(
                f"must be at most {most} with update_timeout {d['update_timeout']:g} s (every update may "
                f"run to its timeout and the trial limit is {TIMEOUT_S} s), got {pages}"
            )
        return pages

    @field_validator("workload")
    @classmethod
    def _typing_runs_in_the_namespace(cls, workload: str, info: ValidationInfo) -> str:
        if workload == "typing" and info.data.get("server") == "vm":
            raise ValueError("typing runs on the namespace desktop only (server namespace), not server vm")
        if workload == "typing" and info.data.get("record"):
            raise ValueError("typing has no recorded mode: set record to false")
        return workload

    @field_validator("keystrokes")
    @classmethod
    def _keystrokes_fit_the_time_limit(cls, keystrokes: int, info: ValidationInfo) -> int:
        d = info.data
        if d.get("workload") != "typing" or not all(
            k in d for k in ("typing_gap", "quiet", "verify_duration")
        ):
            return keystrokes
        # Gaps average typing_gap; allow twice that per key, plus the focus click and the last echo.
        fixed = SETUP_BUDGET_S + 2 * d["verify_duration"] + 10 + 8 * d["quiet"]
        per_key = 2 * d["typing_gap"] + 0.1  # + xdotool's own time per key
        if keystrokes * per_key + fixed > TIMEOUT_S:
            most = int((TIMEOUT_S - fixed) // per_key)
            raise ValueError(
                f"must be at most {most} with typing_gap {d['typing_gap']:g} s (the trial limit is "
                f"{TIMEOUT_S} s), got {keystrokes}"
            )
        return keystrokes

    def settings(self) -> dict[str, Any]:
        """The protocol's settings for ``run_bench`` (only the chosen protocol's are used)."""
        if self.protocol == "vnc":
            qemu = {"qemu_adaptive": self.vnc_qemu_adaptive} if self.server == "vm" else {}
            return {"server": self.vnc_server, "compresslevel": self.vnc_compresslevel,
                    "quality": self.vnc_quality, **qemu}  # fmt: skip
        if self.protocol == "spice":
            return {"image_compression": self.spice_image_compression}
        return {"link": self.x2go_link, "pack": self.x2go_pack, "irlimit": self.x2go_irlimit}


def requires_for(params: RdQoeParams) -> frozenset[str]:
    """What a host must report to run this trial: the protocol's tools, or VM mode's."""
    caps = VM_CAPS if params.server == "vm" else PROTOCOL_CAPS
    return COMMON_CAPS | caps[params.protocol]


SPICE_IMAGE_COMPRESSION = ("auto_glz", "auto_lz", "quic", "glz", "lz", "off")
X2GO_LINKS = ("modem", "isdn", "adsl", "wan", "lan")
# Fixed costs of a trial besides the clicks: desktop + viewer start (X2Go's SSH login is the
# slowest, ~12 s), teardown, the link verification's pings and UDP probes.
SETUP_BUDGET_S = 60.0
# server == "vm": KVM probe + guest boot to the first page under TCG (~60 s measured), with margin.
VM_SETUP_BUDGET_S = 300.0
TIMEOUT_S = 1800  # the job type's hard limit per trial attempt
GUEST_LOGS = (".log", ".err", ".png")  # VM mode: console log, QEMU's stderr, the last screen
RECORD_BUDGET_S = 120.0  # reference browser start and WebM encoding when `record` is on


def run(params: RdQoeParams, ctx: TrialContext) -> TrialResult:
    from qoelab.emulation import linklog
    from qoelab.emulation.reuse import measured_or_reused, verify_condition
    from qoelab.emulation.topology import emulated_link
    from qoelab.rd.bench import BenchRequest, run_bench

    profile = params.to_profile(seed=params.seed)
    log_path = ctx.workdir / "linkemu.log"
    link_log = ctx.workdir / linklog.ARTIFACT  # written for a trace link only
    trial_dir = ctx.workdir / "rd"
    phases: dict[str, float] = {}  # where a trial's wall time goes (benchmarks/throughput)
    clock = time.monotonic()
    try:
        with emulated_link(profile, prefix=ctx.prefix, log_path=log_path, link_log=link_log) as link:
            phases["link_s"] = time.monotonic() - clock
            ctx.log.info("link %s up (%s backend: %s)", link.prefix, link.backend, link.backend_reason)
            clock = time.monotonic()
            # The work root is the host's: verified conditions outlive the trial's own directory.
            verification = verify_condition(
                link, float(params.verify_duration), ctx.workdir.parent / "verified-links", params.verify
            )
            phases["verify_s"] = time.monotonic() - clock
            for c in verification["checks"]:
                if not c["ok"]:
                    ctx.log.warning("link check %s outside tolerance: configured %s, measured %s",
                                    c["name"], c["configured"], c["measured"])  # fmt: skip
            request = BenchRequest.across(
                link,
                params.protocol,
                trial_dir,
                pages=params.pages,
                seed=params.seed,
                quiet_s=float(params.quiet),
                pause_s=float(params.pause),
                update_timeout_s=float(params.update_timeout),
                settings=params.settings(),
                prefix=ctx.prefix,
                record=params.record,
                workload=params.workload,
                keystrokes=params.keystrokes,
                typing_gap_s=float(params.typing_gap),
            )
            clock = time.monotonic()
            if params.server == "vm":
                from qoelab.vm.bench import run_vm_bench

                result = run_vm_bench(request, log=ctx.log, start=params.vm_start)
            else:
                result = run_bench(request, log=ctx.log)
            phases["bench_s"] = time.monotonic() - clock
            clock = time.monotonic()
        phases["link_teardown_s"] = time.monotonic() - clock
    finally:
        # Logs go up with a failed trial too (the runner uploads ctx.artifacts whatever happens).
        # VM mode: the guest's console log, QEMU's stderr and its last screen (a guest that never
        # got ready fails the trial with the console's tail; the whole log is here).
        guest_files = [f for f in sorted((trial_dir / "vm").glob("*")) if f.suffix in GUEST_LOGS]
        for path in [*sorted((trial_dir / "logs").glob("*")), *guest_files, log_path]:
            if path.is_file():
                ctx.add_artifact(path, "image" if path.suffix == ".png" else "log")
        if link_log.is_file():
            ctx.add_artifact(link_log, "json")
    verification["emulator_stats"] = link.emulator_stats or None
    (ctx.workdir / "link_check.json").write_text(json.dumps(verification, indent=2, default=str))
    logged = {a.path for a in ctx.artifacts}
    for path in map(Path, result["artifacts"]):
        if path not in logged:
            kinds = {".pcap": "pcap", ".json": "json", ".log": "log", ".webm": "video"}
            ctx.add_artifact(path, kinds.get(path.suffix, "file"))
    ctx.add_artifact(ctx.workdir / "link_check.json", "json")
    if (trial_dir / "result.json").exists():
        ctx.add_artifact(trial_dir / "result.json", "json")
    if result.get("updates") is None:
        from qoelab.errors import QoelabError

        raise QoelabError(result.get("analysis_error") or "the packet analysis produced no updates")
    if params.workload == "typing":
        samples = keystroke_samples(result["updates"], result.get("typing") or {})
    else:
        samples = update_samples(result["updates"])
    summary = summarise(samples, result["timings"])
    classified = classify_capture(trial_dir / "capture.pcap", link.server_ip, params.protocol, result)
    summary.update(classification_metrics(classified))
    for name in ("tcp_down_bps", "rtt_ms"):
        value = measured_or_reused(verification, name)
        if value is not None:
            summary[f"link_{name}"] = float(value)
    summary["link_checks_ok"] = 1.0 if verification["ok"] else 0.0
    summary["link_verified_in_full"] = 1.0 if verification.get("mode", "full") == "full" else 0.0
    phases.update(split_bench_time(phases.pop("bench_s"), result["timings"]))
    summary.update({k: round(v, 3) for k, v in phases.items() if k not in summary})
    return TrialResult(
        summary=summary,
        samples=samples,
        link=verification,
        provenance={
            "server": params.server,
            "protocol": params.protocol,
            # T above a few Mbit/s is this CPU's drawing time: ch4 judges each machine apart.
            "host_cpu": cpu_provenance(),
            "settings": result["settings"],
            "tools": {**verification.get("tools", {}), **{k: v for k, v in result["versions"].items()}},
            "backend": link.backend,
            "backend_reason": link.backend_reason,
            "mapping": result.get("mapping"),
            "analysis": result.get("analysis"),
            **({"recordings": _recording_provenance(result["recordings"])} if "recordings" in result else {}),
            **({"vm": result["vm"]} if "vm" in result else {}),
            **({"typing": result["typing"]} if "typing" in result else {}),
            "thinclient_classify": classified,
            "phases": {k: round(v, 3) for k, v in phases.items()},
        },
    )


def split_bench_time(bench_s: float, timings: dict[str, float]) -> dict[str, float]:
    """The session's share of a trial: desktop and client set-up, the clicks (with Q and P),
    recording, teardown, and the rest (the packet analysis)."""
    out = {
        "setup_s": timings.get("setup_s", 0.0),
        "run_s": timings.get("run_s", 0.0),
        "record_s": timings.get("record_s", 0.0),
        "teardown_s": timings.get("teardown_s", 0.0),
    }
    out["analysis_s"] = max(0.0, bench_s - sum(out.values()))
    return out


def _recording_provenance(rec: dict[str, Any]) -> dict[str, Any]:
    """File names, the first-frame check against the reference and the recording error, if any (the
    full metadata is in the .json artifacts)."""
    files = {k: [Path(f).name for f in v] for k, v in rec.get("files", {}).items()}
    extra = {k: rec[k] for k in ("stimulus_check", "error") if rec.get(k)}
    return {"files": files, **extra}


def _t_vs(x: str, key: str, title: str, x_label: str, x_scale: float = 1.0, log_x: bool = False) -> ChartSpec:
    # T vs delay/loss are faceted by rate: the thesis draws Figs. 4.7/4.8 as panels (a) 1 Mbit/s
    # and (b) 10 Mbit/s; T vs rate (Fig. 4.6) is not.
    return ChartSpec(key=key, title=title, x=x, y="T_ms", series="protocol", log_x=log_x,
                     facet=None if x == "rate" else "rate",
                     x_label=x_label, y_label="response time T (ms)", x_scale=x_scale)  # fmt: skip


JOB = JobType(
    name="rd_qoe",
    title="Remote-desktop QoE (slow motion)",
    description="A real VNC, SPICE or X2Go session over the emulated link; a driver clicks through "
    "workload pages one update at a time and the client-side capture gives per update the response "
    "time T, the transferred bytes X and X/T (thesis ch. 4), with the screen's own settling time beside.",
    params=RdQoeParams,
    requires=COMMON_CAPS,
    requires_for=requires_for,
    run=run,  # type: ignore[arg-type]
    stimuli=True,
    metrics=(
        Metric("T_ms", "response time T (mean)", "ms"),
        Metric("bytes_down", "transfer size X (mean)", "B"),
        Metric("rate_bps", "transfer rate X/T (mean)", "bit/s"),
        Metric("pixel_ms", "screen settled after click (mean)", "ms"),
        Metric("T_ms_median", "response time T (median)", "ms"),
        Metric("bytes_down_median", "transfer size X (median)", "B"),
        Metric("rate_bps_median", "transfer rate X/T (median)", "bit/s"),
        Metric("bytes_up", "client→server bytes (mean)", "B"),
        Metric("n", "updates", ""),
        Metric("n_timed_out", "updates timed out", ""),
        Metric("n_disagree", "updates where pixel and packet time disagree", ""),
        Metric("setup_s", "trial setup: desktop, server and client", "s"),
        Metric("run_s", "the clicks, with Q and P", "s"),
        Metric("teardown_s", "trial teardown: session", "s"),
        Metric("link_s", "link set-up", "s"),
        Metric("verify_s", "link verification", "s"),
        Metric("analysis_s", "packet analysis", "s"),
        Metric("link_teardown_s", "link teardown", "s"),
        Metric("link_tcp_down_bps", "link: TCP goodput down", "bit/s"),
        Metric("link_rtt_ms", "link: RTT idle", "ms"),
        Metric("echo_ms", "typing: keystroke echo time (mean)", "ms"),
        Metric("echo_ms_median", "typing: keystroke echo time (median)", "ms"),
        Metric("tc_alpha", "paper 002: P(interactive → bulk), α", ""),
        Metric("tc_beta", "paper 002: P(bulk → interactive), β", ""),
        Metric("tc_c_B", "paper 002: segments per bulk flow, c_B", ""),
        Metric("tc_p_I", "paper 002: share of interactive flows, p_I", ""),
    ),
    charts=(
        _t_vs(
            "rate",
            "fig46_T",
            "Fig. 4.6 (a): response time T vs bandwidth",
            "bandwidth (Mbit/s)",
            x_scale=1e6,
            log_x=True,
        ),  # fmt: skip
        ChartSpec(
            key="fig46_X",
            title="Fig. 4.6 (b): transfer size X vs bandwidth",
            x="rate",
            y="bytes_down",
            series="protocol",
            log_x=True,
            x_label="bandwidth (Mbit/s)",
            y_label="transfer size X (KB)",
            x_scale=1e6,
            y_scale=1e3,
        ),  # fmt: skip
        ChartSpec(
            key="fig46_rate",
            title="Fig. 4.6 (c): transfer rate X/T vs bandwidth",
            x="rate",
            y="rate_bps",
            series="protocol",
            log_x=True,
            x_label="bandwidth (Mbit/s)",
            y_label="X/T (Mbit/s)",
            x_scale=1e6,
            y_scale=1e6,
        ),  # fmt: skip
        _t_vs(
            "delay",
            "fig47_T",
            "Fig. 4.7: response time T vs one-way delay",
            "one-way delay (ms)",
            x_scale=1e-3,
        ),  # fmt: skip
        _t_vs("loss", "fig48_T", "Fig. 4.8: response time T vs packet loss", "loss (%)", log_x=True),
    ),
    timeout_s=TIMEOUT_S,
    max_attempts=2,
    probes=("qoelab.vm.capability:probe", "qoelab.rd.capability:probe"),
    cleanups=(
        Cleanup("qoelab.rd.cleanup:cleanup_leftovers"),
        Cleanup("qoelab.vm.guest:cleanup_leftovers"),
    ),
    reports=("qoelab.findings.ch4:REPORT", "qoelab.findings.ch4_dcr:REPORT"),
    presets="qoelab.rd.presets:CHAPTER",
    estimate=Estimate("qoelab.rd.estimate:estimate", metrics=("T_ms", "n")),
    cli=("qoelab.rd.analyze_cli:register", "qoelab.rd.bench_cli:register", "qoelab.vm.cli:register"),
    examples=(
        "qoelab rd bench --protocol spice --rate 1mbit --delay 10ms --pages 3",
        "qoelab rd analyze capture.pcap --clicks clicks.json",
        "qoelab vm check --accel kvm",
        "qoelab sweep run --preset ch4-fig46 --size quick",
        "qoelab report ch4 12 13 > findings.md",
    ),
)
