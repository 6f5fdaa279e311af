"""Job type ``storage_bench``: NFS, iSCSI and Swift behind the emulated WAN, measured as thesis 001 did.

One trial = one run of one family (``qoelab.storage.trial``): the link with the thesis' convention
(an RTT applied as RTT/2 each way, loss and normal jitter on both directions) and its TCP (CUBIC,
16 MiB buffer ceilings, ``tcp_no_metrics_save``; Fig. 3.2), a target started in the server
namespace, the client in the lab's QEMU guest. Sweepable values are one per trial (one thread
count, one n, one access unit), so the dashboard's charts are the thesis' figures with the
parameter on the x axis. docs/storage-bench.md; ../shared/notes/seed-storage-bench.md.
"""

from __future__ import annotations

import dataclasses
import json
import time
from typing import Any, Literal

from pydantic import Field, ValidationInfo, field_validator

from qoelab import params as p
from qoelab.emulation.linkparams import LinkParams
from qoelab.emulation.profile import DELAY_MAX_S, JITTER_MAX_S, RATE_MAX_BPS, LinkProfile
from qoelab.emulation.tcp import TcpSettings
from qoelab.errors import ParameterError
from qoelab.estimate import Estimate
from qoelab.jobtype import ChartSpec, Cleanup, JobType, Metric, Sample, TableSpec, TrialContext, TrialResult
from qoelab.storage import thesis_tables as tt
from qoelab.storage.iobench import META_KINDS
from qoelab.storage.scenarios import THESIS_BUFFER

ROUND_KEYS = ("mib_s", "amplification", "link_bytes", "link_bytes_clean", "link_packets",
              "link_packets_clean", "bytes", "serviced", "failed", "seconds", "ceiling_mib_s", "cpu_client",
              "cpu_server")  # fmt: skip
FAMILY_TITLES = {
    "metadata": "n × mkdir, touch, one ls, unlink, rmdir (Ch. 5)",
    "batch": "a file set read or written whole by a pool of threads (§4.5-§4.6)",
    "single": "one file, access unit = file size (§4.4)",
    "unit": "one file read or written in units of a given size (§4.3)",
    "postmark": "PostMark 1.53 (Table 6.1)",
    "varmail": "FileBench varmail, emulated (Table 6.2)",
    "fileserver": "FileBench fileserver, emulated (Table 6.3)",
}
Family = Literal["metadata", "batch", "single", "unit", "postmark", "varmail", "fileserver"]
# Link fields the thesis' convention replaces: one RTT, loss and jitter on both directions.
ONE_WAY_FIELDS = ("delay", "up_delay", "up_jitter", "up_loss", "up_rate", "gemodel")
TIMEOUT_S = 4 * 3600
FILEBENCH_FILES = {
    "varmail": 1000,
    "fileserver": 10_000,
}  # the stock personalities (notes §4.2)  # metadata at n = 1000 and 250 ms RTT: ~5 × 1000 × 2 RTT


class StorageBenchParams(LinkParams):
    """The thesis' 100 Mbit/s WAN (set ``rtt``, ``loss``, ``jitter``) and its TCP, plus the run."""

    rate: p.Rate(1e6, RATE_MAX_BPS) | None = Field(  # type: ignore[valid-type]
        default=100e6, description="link rate, both directions (the thesis: 100mbit or 1gbit)"
    )
    rtt: p.Duration(0.0, 2 * DELAY_MAX_S) = Field(  # type: ignore[valid-type]
        default=0.0, description="round-trip time, applied as RTT/2 each way (the thesis: 0-250ms)"
    )
    jitter: p.Duration(0.0, JITTER_MAX_S) = Field(  # type: ignore[valid-type]
        default=0.0, description="normal jitter σ on each direction (the thesis' realistic: 10ms)"
    )
    jitter_dist: Literal["uniform", "normal"] = Field(default="normal", description="WANem's default")
    tcp_cc: str = Field(default="cubic", description="TCP congestion control (Fig. 3.2: cubic)")
    tcp_rmem_max: p.Bytes(4096, 1 << 30) | None = Field(  # type: ignore[valid-type]
        default=THESIS_BUFFER, description="receive buffer ceiling (Fig. 3.2: 16 MiB)"
    )
    tcp_wmem_max: p.Bytes(4096, 1 << 30) | None = Field(  # type: ignore[valid-type]
        default=THESIS_BUFFER, description="send buffer ceiling (Fig. 3.2: 16 MiB)"
    )

    target: Literal["nfs", "iscsi", "swift"] = Field(
        default="nfs",
        description="nfs (nfs-ganesha, NFSv4.2), iscsi (tgt, ext4 in the guest), swift (rclone)",
    )
    family: Family = Field(default="metadata", description="what to run: " + "; ".join(
        f"{k}: {v}" for k, v in FAMILY_TITLES.items()))  # fmt: skip
    meta_n: int = Field(default=100, ge=1, le=10_000, description="metadata: operations per kind (1-1000)")
    op: Literal["read", "write"] = Field(default="read", description="batch, single, unit: read or write")
    form: Literal["direct", "sync", "default"] | None = Field(
        default=None,
        description="open() flags: direct or sync for NFS and iSCSI (empty = direct), default for Swift",
    )
    file_size: p.Bytes(512, 1 << 30) = Field(  # type: ignore[valid-type]
        default=1 << 20, description="bytes per file = access unit (the thesis: 4kb, 1mb, 16mb)"
    )
    unit: p.Bytes(512, 1 << 30) = Field(  # type: ignore[valid-type]
        default=64 << 10, description="unit family: bytes per read() or write() (the thesis: 4kb-16mb)"
    )
    set_size: p.Bytes(4096, 16 << 30) = Field(  # type: ignore[valid-type]
        default=64 << 20, description="batch: the file set (the thesis: 2gb; smaller so a sweep fits here)"
    )
    threads: int = Field(default=16, ge=1, le=64, description="batch: worker threads (1-64)")
    # Not ``limit``: that is the link's queue limit (LinkParams), which this job leaves at netem's
    # default of 1000 packets as WANem had it.
    time_limit: p.Duration(1.0, 3600.0) = Field(  # type: ignore[valid-type]
        default=90.0, description="batch, single, unit: time limit per round (the thesis: 90s)"
    )
    scheduler: Literal["mq-deadline", "bfq", "none"] = Field(
        default="mq-deadline",
        description="iSCSI: the guest's block scheduler (mq-deadline for deadline, bfq for the removed CFQ)",
    )
    swift_transfers: int = Field(default=4, ge=1, le=64, description="Swift: rclone's parallel connections")
    swift_client: Literal["guest", "host"] = Field(
        default="guest",
        description="Swift: rclone in the client guest (as NFS and iSCSI), or on the host in the link's "
        "client namespace, free of the TCG guest's CPU ceiling (batch, single, unit)",
    )
    transactions: int = Field(default=25_000, ge=10, le=1_000_000, description="postmark: transactions")
    warmup: bool = Field(
        default=True,
        description="batch, single, unit: warm a new target up first as the thesis did (100 × 1 MiB written, "
        "read, deleted over the unimpaired link)",
    )
    disk_rate: str | None = Field(
        default=None,
        description="throttle the target's disk I/O, MiB/s read/write: 'thesis' (110/100, its HDD), 'R/W' or "
        "one rate (a cgroup block I/O throttle, labelled as such; empty = the host's disk as it is)",
    )
    capture: bool = Field(
        default=False,
        description="keep a capture of the link's server side (headers only) as the trial's pcap; metadata: "
        "each kind's requests decoded from it (NFSv4 operations, SCSI commands, HTTP methods)",
    )
    guest_start: Literal["snapshot", "cold"] = Field(
        default="snapshot",
        description="the client guest: restore the host's saved headless guest (booted once per host and "
        "image, then every trial starts from the same state) or boot it for every trial",
    )
    verify_duration: p.Duration(0.0, 60.0) = Field(  # type: ignore[valid-type]
        default=2.0,
        description="verify the emulated link first, this long per direction (in full once per condition and "
        "host, then a short check; 0 = not at all)",
    )
    files: int | None = Field(
        default=None,
        ge=10,
        le=100_000,
        description="postmark, varmail, fileserver: files in the set (empty = the thesis': 500; the "
        "personality's: 1000, 10000)",
    )
    seconds: p.Duration(1.0, 3600.0) = Field(  # type: ignore[valid-type]
        default=120.0, description="varmail, fileserver: run time after preallocation (the thesis: 120s)"
    )

    @field_validator(*ONE_WAY_FIELDS)
    @classmethod
    def _rtt_convention(cls, value: Any, info: ValidationInfo) -> Any:
        if value not in (None, 0, 0.0, ""):
            raise ValueError("storage_bench takes the thesis' rtt (applied as RTT/2 each way) and one loss "
                             "and jitter for both directions; leave this field out")  # fmt: skip
        return value

    @field_validator("disk_rate")
    @classmethod
    def _disk_rate(cls, value: str | None) -> str | None:
        from qoelab.storage.diskrate import DiskRate

        if value in (None, ""):
            return None
        try:
            return DiskRate.parse(value).describe()
        except ParameterError as err:
            raise ValueError(err.message) from None

    @field_validator("form")
    @classmethod
    def _form_for_target(cls, form: str | None, info: ValidationInfo) -> str | None:
        target = info.data.get("target")
        if target == "swift" and form not in (None, "default"):
            raise ValueError("Swift through a FUSE client has only the default form (notes §3.2)")
        return form

    @field_validator("swift_client")
    @classmethod
    def _host_client_for_swift(cls, client: str, info: ValidationInfo) -> str:
        from qoelab.storage.trial import HOST_FAMILIES

        target, family = info.data.get("target"), info.data.get("family")
        if client == "host" and target not in (None, "swift"):
            raise ValueError(f"host runs only Swift's client (this kernel has no NFS client or iSCSI "
                             f"initiator), got target {target}")  # fmt: skip
        if client == "host" and family is not None and family not in HOST_FAMILIES:
            raise ValueError(f"host runs only the families {', '.join(HOST_FAMILIES)} (the others' tools "
                             f"are the guest's), got {family}")  # fmt: skip
        return client

    @field_validator("unit")
    @classmethod
    def _unit_within_the_file(cls, unit: int, info: ValidationInfo) -> int:
        file_size = info.data.get("file_size")
        if info.data.get("family") == "unit" and file_size is not None and unit > file_size:
            raise ValueError(f"must be at most file_size ({file_size} B), got {unit} B")
        return unit

    @field_validator("set_size")
    @classmethod
    def _set_holds_a_file(cls, set_size: int, info: ValidationInfo) -> int:
        file_size = info.data.get("file_size")
        if file_size is not None and set_size < file_size:
            raise ValueError(f"must be at least file_size ({file_size} B), got {set_size} B")
        return set_size

    def resolved_form(self) -> str:
        return self.form or ("default" if self.target == "swift" else "direct")

    def tcp_settings(self) -> TcpSettings:
        # Fig. 3.2: each connection starts from scratch (tcp_no_metrics_save = 1)
        return dataclasses.replace(super().tcp_settings(), no_metrics_save=True).validate()

    def to_profile(self, seed: int = 1) -> LinkProfile:
        one_way = float(self.rtt) / 2
        return LinkProfile.parse(
            **self.link_rates(), delay=one_way, jitter=self.jitter, loss=self.loss,
            jitter_dist=self.jitter_dist,
            # netem under WANem sorts packets by their jittered time: jitter reorders (scenarios.py)
            reorder=self.reorder or bool(self.jitter), limit=self.limit, **self.queue_settings(),
            outage=self.outage, mtu=self.mtu, seed=seed, tcp=self.tcp_settings(), offload=self.link_offload,
        )  # fmt: skip


FAMILY_PARAMS: dict[str, frozenset[str]] = {
    "metadata": frozenset({"meta_n"}),
    "batch": frozenset({"op", "form", "file_size", "set_size", "threads", "time_limit", "warmup"}),
    "single": frozenset({"op", "form", "file_size", "time_limit", "warmup"}),
    "unit": frozenset({"op", "form", "file_size", "unit", "time_limit", "warmup"}),
    "postmark": frozenset({"transactions", "files"}),
    "varmail": frozenset({"seconds", "files"}),
    "fileserver": frozenset({"seconds", "files"}),
}
RUN_PARAMS = frozenset().union(*FAMILY_PARAMS.values())


def inapplicable(params: StorageBenchParams) -> frozenset[str]:
    """A family's own knobs only; the scheduler for iSCSI, the connection count and form for Swift."""
    out = set(RUN_PARAMS - FAMILY_PARAMS[params.family])
    if params.target != "iscsi":
        out.add("scheduler")
    if params.target != "swift":
        out |= {"swift_transfers", "swift_client"}
    else:
        out.add("form")
    return frozenset(out)


def requires_for(params: StorageBenchParams) -> frozenset[str]:
    """The userspace link, the client guest and the target's servers (qoelab.capabilities)."""
    client = "storage.swift_host" if params.swift_client == "host" else "storage.guest"
    caps = {"netns", "userspace_link", client, f"storage.{params.target}"}
    if params.disk_rate:
        caps.add("storage.disk_rate")
    return frozenset(caps)


def storage_run(params: StorageBenchParams) -> Any:
    """The engine's run description of these parameters."""
    from qoelab.storage.trial import StorageRun

    extra: dict[str, Any] = {}
    if params.family == "unit":
        extra["units"] = (int(params.unit),)
    if params.family == "postmark":
        extra["postmark_transactions"] = params.transactions
        if params.files is not None:
            extra["postmark_files"] = params.files
    if params.family in ("varmail", "fileserver"):
        extra["macro_seconds"] = float(params.seconds)
        extra["macro_files"] = params.files
    if params.disk_rate:
        from qoelab.storage.diskrate import DiskRate

        extra["disk_rate"] = DiskRate.parse(params.disk_rate)
    return StorageRun(
        target=params.target, family=params.family, profile=params.to_profile(), meta_n=(params.meta_n,),
        scheduler=params.scheduler, swift_transfers=params.swift_transfers, swift_client=params.swift_client,
        op=params.op,
        form=params.resolved_form(), file_size=int(params.file_size), set_bytes=int(params.set_size),
        threads=(params.threads,), limit_s=float(params.time_limit), lun_bytes=lun_bytes(params),
        warmup=params.warmup, guest_start=params.guest_start, **extra,
    )  # fmt: skip


def lun_bytes(params: StorageBenchParams) -> int:
    """The backing file system (NFS's ext4 image, iSCSI's LUN; sparse): 1 GiB, or three times what
    the family writes, so ext4's metadata, the journal and a rewrite always fit."""
    data = {
        "batch": int(params.set_size),
        "single": int(params.file_size),
        "unit": int(params.file_size),
        "fileserver": (params.files or FILEBENCH_FILES["fileserver"]) * 128 * 1024,  # mean 128 KiB
        "varmail": (params.files or FILEBENCH_FILES["varmail"]) * 16 * 1024,  # mean 16 KiB
        "postmark": (params.files or 500) * 517 * 512,  # sizes 5 KiB-512 KiB: mean 258.5 KiB
    }.get(params.family, 0)
    return max(1 << 30, -(-3 * data // (1 << 20)) << 20)


def summarize(family: str, out: Any) -> dict[str, float]:
    """The trial's summary metrics from the engine's output (the names the findings and charts read)."""
    summary: dict[str, float] = {}
    if family == "metadata":
        for row in out.ops:
            kind = row["op"]
            summary[f"{kind}_s"] = row["seconds"]
            summary[f"{kind}_ms_per_op"] = row["per_op_ms"]
            summary[f"{kind}_failed"] = row["failed"]
            for key in ("packets", "bytes", "requests"):
                if row.get(key) is not None:
                    summary[f"{kind}_{key}"] = row[key]
        if out.ops:
            summary["meta_n"] = out.ops[0]["n"]
    elif out.rounds:
        row = out.rounds[-1]  # one round per trial: the job's values are single
        summary.update({k: float(row[k]) for k in ROUND_KEYS if row.get(k) is not None})
        for flag in ("time_limit_hit", "guest_bound", "remounted"):
            if row.get(flag) is not None:
                summary[flag] = float(bool(row[flag]))
    macro = getattr(out, "macro", None) or {}
    if family == "postmark" and macro:
        summary.update({"postmark_s": macro["seconds"], "postmark_tps": macro["tps"]})
    elif family in ("varmail", "fileserver") and macro:
        summary["iops"] = macro["iops"]
    cpu = getattr(out, "cpu", None) or {}  # metadata and macro: the phase's; the rest stays in provenance
    for key in ("cpu_client", "cpu_server"):
        if isinstance(cpu.get(key), int | float):
            summary.setdefault(key, float(cpu[key]))
    return {k: float(v) for k, v in summary.items() if v is not None}


def run(params: StorageBenchParams, ctx: TrialContext) -> TrialResult:
    from qoelab.emulation import linklog
    from qoelab.hostfacts import cpu_provenance
    from qoelab.storage.trial import run_storage

    started = time.time()

    def on_row(row: dict[str, Any]) -> None:
        ctx.log.info("%s", json.dumps({k: v for k, v in row.items() if not isinstance(v, dict | list)},
                                      default=str))  # fmt: skip

    run = storage_run(params)
    # Full verifications outlive the trial in the host's work root (qoelab.emulation.reuse).
    run = dataclasses.replace(run, verify_s=float(params.verify_duration) or None,
                              verified_links=ctx.workdir.parent / "verified-links",
                              capture_path=ctx.workdir / "link.pcap" if params.capture else None)  # fmt: skip
    out = run_storage(run, ctx.prefix, ctx.workdir / "run", on_row=on_row)
    samples = [Sample("op", i, _flat(row)) for i, row in enumerate(out.ops)]
    samples += [Sample("round", i, _flat(row)) for i, row in enumerate(out.rounds)]
    if (ctx.workdir / "run" / linklog.ARTIFACT).is_file():  # a trace link's log
        ctx.add_artifact(ctx.workdir / "run" / linklog.ARTIFACT, "json")
    detail = ctx.workdir / "storage_bench.json"
    detail.write_text(json.dumps(_as_json(out), indent=2, default=str))
    ctx.add_artifact(detail, "json")
    if run.capture_path is not None and run.capture_path.exists():
        ctx.add_artifact(run.capture_path, "pcap")
    return TrialResult(
        summary=summarize(params.family, out),
        samples=samples,
        link=out.link,
        provenance={
            "target": out.target,
            "mount": out.mount,
            "client": out.guest,
            "macro": {k: v for k, v in (getattr(out, "macro", None) or {}).items() if k != "raw"},
            "cpu": getattr(out, "cpu", None) or {},
            # Under TCG the guest client is as fast as this CPU: the findings judge each model apart.
            "host_cpu": cpu_provenance(),
            "substitutions": substitutions(params),
            "elapsed_s": round(time.time() - started, 2),
        },
    )


def substitutions(params: StorageBenchParams) -> list[str]:
    """What runs here in place of the thesis' own, said on every result (issue 17)."""
    out = ["client: Debian 12 kernel in the lab's QEMU guest (KVM or TCG: see client.accel), not a host"]
    if params.target == "nfs":
        out.append("server: nfs-ganesha (VFS FSAL) in place of the kernel's nfsd")
    elif params.target == "iscsi":
        stands = {"mq-deadline": " stands in for deadline", "bfq": " stands in for CFQ (removed from Linux)"}
        out.append(f"scheduler: {params.scheduler}" + stands.get(params.scheduler, ""))
    else:
        out.append("client: rclone mount in place of CloudFuse; Swift 2.30 all-in-one, one replica")
    if params.family in ("varmail", "fileserver"):
        out.append("FileBench is not packaged: its personality is emulated by storage-iobench")
    return out


def _flat(row: dict[str, Any]) -> dict[str, float | int | str | None]:
    return {k: v for k, v in row.items() if isinstance(v, int | float | str) or v is None}


def _as_json(out: Any) -> dict[str, Any]:
    return {k: getattr(out, k) for k in ("ops", "rounds", "macro", "cpu", "mount", "target", "guest", "link")
            if hasattr(out, k)}  # fmt: skip


# The metrics' headings in the dashboard's selectors: a family reports only its own group.
META, ROUND = "metadata (per kind)", "whole-file rounds: unit, single, batch"
CPU, MACRO = "CPU", "macrobenchmarks: PostMark, FileBench"


def _vs(key: str, title: str, x: str, y: str, x_label: str = "", y_label: str = "", **kw: Any) -> ChartSpec:
    return ChartSpec(key=key, title=title, x=x, y=y, series=kw.pop("series", "target"), x_label=x_label,
                     y_label=y_label, **kw)  # fmt: skip


RTT_MS = {"x_label": "RTT (ms)", "x_scale": 1e-3}
POSTMARK_SOURCE = "the thesis' (500 files, 25,000 transactions)"
FILEBENCH_SOURCE = "the thesis' (FileBench 1.4.9.1, stock personality, IOPS after 120 s)"

CHARTS = (
    _vs("fig46", "Figs. 4.5-4.7: batch throughput vs threads",
        "threads", "mib_s", "threads", "throughput (MiB/s)", log_x=True, facet="file_size"),
    _vs("fig44", "Fig. 4.4: single-threaded batch throughput vs file size",
        "file_size", "mib_s", "file size (KiB)", "throughput (MiB/s)", log_x=True, x_scale=1024),
    _vs("fig48", "Fig. 4.8: iSCSI schedulers, throughput vs threads",
        "threads", "mib_s", "threads",
        "throughput (MiB/s)", series="scheduler", log_x=True, facet="file_size"),
    _vs("fig410", "Fig. 4.10: batch throughput vs RTT",
        "rtt", "mib_s", y_label="throughput (MiB/s)", facet="file_size", **RTT_MS),
    _vs("fig42", "Fig. 4.2: throughput vs access unit (one file)",
        "unit", "mib_s", "access unit (KiB)", "throughput (MiB/s)", log_x=True, x_scale=1024),
    _vs("fig43", "Fig. 4.3: single-file throughput vs file size",
        "file_size", "mib_s", "file size (KiB)", "throughput (MiB/s)", log_x=True, x_scale=1024),
    _vs("fig49", "Fig. 4.9: amplification vs file size",
        "file_size", "amplification", "file size (KiB)",
        "link bytes / file bytes", log_x=True, log_y=True, x_scale=1024),
    _vs("fig51", "Fig. 5.1: mkdir time per operation vs RTT",
        "rtt", "mkdir_ms_per_op", y_label="ms per mkdir", **RTT_MS),
    _vs("fig51n", "Fig. 5.1a: mkdir completion time vs n",
        "meta_n", "mkdir_s", "operations n", "completion time (s)", log_x=True, log_y=True),
    _vs("fig51loss", "Fig. 5.1d: mkdir completion time vs loss",
        "loss", "mkdir_s", "loss (%)", "completion time (s)"),
    _vs("fig52", "Fig. 5.2: packets on the link for n mkdir",
        "meta_n", "mkdir_packets", "operations n", "packets", log_x=True, log_y=True),
    _vs("tab61", "Table 6.1: PostMark completion time vs RTT",
        "rtt", "postmark_s", y_label="completion time (s)", **RTT_MS),
    _vs("fig61", "Fig. 6.1 / Tables 6.2-6.3: FileBench IOPS vs RTT",
        "rtt", "iops", y_label="IOPS", log_y=True, facet="family", **RTT_MS),
)  # fmt: skip

JOB = JobType(
    name="storage_bench",
    title="Storage benchmark (NFS, iSCSI, Swift)",
    description="What applications see of NFS, iSCSI and Swift behind an emulated WAN (thesis 001): "
    "metadata operations, whole-file reads and writes by a pool of threads, PostMark and FileBench's "
    "personalities, with a kernel client in the QEMU guest and the target in the server namespace.",
    params=StorageBenchParams,
    requires=frozenset(),
    requires_for=requires_for,  # type: ignore[arg-type]
    inapplicable=inapplicable,  # type: ignore[arg-type]
    run=run,  # type: ignore[arg-type]
    metrics=(
        *(Metric(f"{k}_ms_per_op", f"{k}: time per operation", "ms", META) for k in META_KINDS),
        *(Metric(f"{k}_s", f"{k}: completion time", "s", META) for k in META_KINDS),
        *(Metric(f"{k}_packets", f"{k}: packets on the link", "", META) for k in META_KINDS),
        *(Metric(f"{k}_bytes", f"{k}: bytes on the link", "B", META) for k in META_KINDS),
        *(Metric(f"{k}_requests", f"{k}: protocol requests captured", "", META) for k in META_KINDS),
        *(Metric(f"{k}_failed", f"{k}: failed operations", "", META) for k in META_KINDS),
        Metric("meta_n", "metadata: operations per kind", "", META),
        Metric("mib_s", "application throughput", "MiB/s", ROUND),
        Metric("bytes", "bytes the application moved", "B", ROUND),
        Metric("serviced", "whole-file operations serviced", "", ROUND),
        Metric("seconds", "the round's time inside the tool", "s", ROUND),
        Metric("link_bytes", "bytes on the link in both directions during the round", "B", ROUND),
        Metric("link_packets", "packets on the link in both directions during the round", "", ROUND),
        Metric("link_bytes_clean", "bytes on the link in the cache-clean sync after it", "B", ROUND),
        Metric("link_packets_clean", "packets on the link in the cache-clean sync after it", "", ROUND),
        Metric("amplification", "link bytes (single: + cache-clean sync) / application bytes", "", ROUND),
        Metric("failed", "failed operations", "", ROUND),
        Metric("time_limit_hit", "round stopped by the time limit", "", ROUND),
        Metric("ceiling_mib_s", "the guest's throughput with no emulator in the way", "MiB/s", ROUND),
        Metric("guest_bound", "within 80 % of the guest's ceiling", "", ROUND),
        Metric("remounted", "single on iSCSI: LUN remounted before the round (metadata cold)", "", ROUND),
        Metric("cpu_client", "client (guest) CPU busy", "", CPU),
        Metric("cpu_server", "server CPU", "s", CPU),
        Metric("postmark_s", "PostMark completion time", "s", MACRO),
        Metric("postmark_tps", "PostMark transactions per second", "1/s", MACRO),
        Metric("iops", "FileBench personality IOPS", "1/s", MACRO),
    ),
    charts=CHARTS,
    tables=tuple(
        TableSpec(
            key=key,
            title=title,
            y=y,
            where={"family": family},
            reference=tt.reference(ref),
            row_label=tt.network_label,
            column_label=tt.system_label,
            rows=tt.NETWORKS,
            columns=tt.SYSTEMS,
            reference_title=source,
        )
        for key, title, family, y, ref, source in (
            (
                "table61",
                "Table 6.1: PostMark completion time (s)",
                "postmark",
                "postmark_s",
                "postmark_s",
                POSTMARK_SOURCE,
            ),
            (
                "table61tps",
                "Table 6.1: PostMark transactions per second",
                "postmark",
                "postmark_tps",
                "postmark_tps",
                POSTMARK_SOURCE,
            ),
            (
                "table62",
                "Table 6.2: FileBench varmail (IOPS)",
                "varmail",
                "iops",
                "varmail",
                FILEBENCH_SOURCE,
            ),
            (
                "table63",
                "Table 6.3: FileBench fileserver (IOPS)",
                "fileserver",
                "iops",
                "fileserver",
                FILEBENCH_SOURCE,
            ),
        )
    ),  # fmt: skip
    timeout_s=TIMEOUT_S,
    max_attempts=1,
    probes=("qoelab.vm.capability:probe", "qoelab.storage.capability:probe"),
    cleanups=(
        Cleanup("qoelab.vm.guest:cleanup_leftovers"),
        Cleanup("qoelab.storage.targets:cleanup_leftovers", after_link=True),
    ),
    reports=("qoelab.findings.sb001:REPORT",),
    presets="qoelab.storage.presets:CHAPTER",
    estimate=Estimate("qoelab.storage.estimate:estimate"),
    cli=("qoelab.storage.cli:register", "qoelab.vm.cli:register"),
    examples=("qoelab storage bench --target nfs --family metadata --rtt 50ms",),
)
