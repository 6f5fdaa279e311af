"""Thesis 001's experiments (``storage_bench``): NFS, iSCSI and Swift behind an emulated WAN, from
the batch reads of Figs. 4.5-4.10 to the metadata operations of Ch. 5 and Tables 6.1-6.3."""

from __future__ import annotations

from typing import Any

from qoelab.preset import SIZES, Chapter, Preset

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

CHAPTER = Chapter("sb001", "Thesis 001: NFS, iSCSI and Swift behind an emulated WAN", SB001)
