"""Thesis 001's findings as checks: hand-built storage_bench results that hold, fail and stay undecided."""

from __future__ import annotations

from typing import Any

from qoelab.findings import JOB_REPORTS, REPORT_TITLES, REPORTS, applicable, evaluate, render_markdown
from qoelab.findings.base import Finding, normalise, scopes
from qoelab.findings.sb001_util import clean, net_row, series_label

KIB, MIB = 1024, 1024 * 1024
SPREAD = (-1.0, 0.0, 1.0)  # three repetitions around a mean
KINDS = ("mkdir", "touch", "unlink", "rmdir")
NAMES = [
    "nfs_metadata_two_rtt",
    "swift_metadata_rtt_plus_30ms",
    "swift_metadata_ideal_slowest",
    "iscsi_metadata_rtt_insensitive",
    "iscsi_single_amplification",
    "swift_saturates_lossy_wan",
    "iscsi_lan_swift_wan",
    "deadline_beats_bfq_50ms",
    "postmark_order",
    "varmail_order",
    "fileserver_order",
]
LOSSY = {"rtt": 0.05, "loss": 0.1}
ROWS = {
    "ideal": {},
    "+50 ms": {"rtt": 0.05},
    "+0.1 % loss": LOSSY,
    "realistic": {**LOSSY, "jitter": 0.01},
}


def runs(target: str, family: str, summary: dict[str, float], noise: float = 0.0,
         spread: tuple[float, ...] = SPREAD, **params: Any) -> list[dict[str, Any]]:  # fmt: skip
    """One row per repetition of one point: every summary value moved by ``off * noise``."""
    base = {"target": target, "family": family, "rate": 1e8, "rtt": 0.0, "loss": 0.0, "jitter": 0.0}
    if target == "iscsi":
        base["scheduler"] = "mq-deadline"
    return [
        {
            "params": {**base, **params, "repetition": i},
            "summary": {k: v + off * noise for k, v in summary.items()},
        }
        for i, off in enumerate(spread)
    ]


def meta(target: str, per_op: Any, rtts: tuple[float, ...] = (0.0, 0.02, 0.05), **kw: Any) -> list[dict]:
    """Metadata rows: ``per_op(rtt_ms)`` ms per operation for every kind, n = 1000."""
    out = []
    for r in rtts:
        ms = per_op(r * 1e3)
        summary = {f"{k}_ms_per_op": ms for k in KINDS} | {f"{k}_s": ms for k in KINDS}
        out += runs(target, "metadata", summary, kw.pop("noise", 0.5), rtt=r, meta_n=1000, **kw)
    return out


def named(found: list[Finding], name: str) -> list[Finding]:
    return [f for f in found if f.name == name]


def one(rows: list[dict[str, Any]], name: str) -> Finding:
    (f,) = named(evaluate("sb001", rows), name)
    return f


def test_storage_bench_results_are_read_by_the_sb001_report():
    assert JOB_REPORTS["storage_bench"] == "sb001"
    assert REPORT_TITLES["sb001"] == "Thesis 001 (Ch. 4–6): NFS, iSCSI and Swift behind an emulated WAN"
    assert [c.name for c in REPORTS["sb001"]] == NAMES
    assert all(c.figure for c in REPORTS["sb001"])


def test_rows_are_cleaned_and_named():
    p = clean({"target": "nfs", "family": "batch", "scheduler": "bfq", "form": None})
    assert p == {"target": "nfs", "family": "batch", "form": "direct"}
    assert "form" not in clean({"target": "swift", "family": "batch", "form": "default"})
    assert series_label({"target": "iscsi", "form": "sync", "scheduler": "bfq"}) == "iSCSI (sync, bfq)"
    assert [net_row({"rtt": 0.05, **v}) for v in ({}, {"loss": 0.1}, {"loss": 0.1, "jitter": 0.01})] == [
        "+50 ms",
        "+0.1 % loss",
        "realistic",
    ]
    assert net_row({"rtt": 0.16}) is None and net_row({}) == "ideal"


# ---- 1-3: metadata -----------------------------------------------------------------------------------


def test_nfs_two_round_trips_per_operation():
    f = one(meta("nfs", lambda ms: 2 * ms + 1), "nfs_metadata_two_rtt")
    assert f.verdict == "holds", f.reason
    assert "NFS mkdir: slope of ms per op over RTT 2 (CI" in f.reason and "within 1.5–3" in f.reason
    f = one(meta("nfs", lambda ms: ms + 1), "nfs_metadata_two_rtt")
    assert f.verdict == "does not hold"
    assert f.reason.startswith("below 1.5: NFS mkdir: slope of ms per op over RTT 1 (CI")
    f = one(meta("nfs", lambda ms: 2 * ms + 1, rtts=(0.0,)), "nfs_metadata_two_rtt")
    assert f.verdict == "inconclusive"
    assert f.reason == "no NFS metadata trial with RTT > 0 (and no loss) at n = 1000"


def test_each_host_cpus_trials_are_judged_apart_and_rows_without_one_make_their_own_scope():
    fast = [{**r, "host": {"cpu": "Xeon"}} for r in meta("nfs", lambda ms: 2 * ms + 1)]
    slow = [{**r, "host": {"cpu": "EPYC"}} for r in meta("nfs", lambda ms: ms + 30)]
    found = named(evaluate("sb001", fast + slow), "nfs_metadata_two_rtt")
    assert [(f.scope, f.verdict) for f in found] == [({"host": "EPYC"}, "does not hold"),
                                                     ({"host": "Xeon"}, "holds")]  # fmt: skip
    assert found[0].scope_label == "host = EPYC"
    # Pooled, the two machines' slopes would make one wide interval: the report would measure them.
    pooled = one([{k: v for k, v in r.items() if k != "host"} for r in fast + slow], "nfs_metadata_two_rtt")
    assert pooled.scope == {} and pooled.verdict != "holds"
    # Rows from before rows named a CPU are never pooled into a named machine's scope.
    unnamed = meta("nfs", lambda ms: 2 * ms + 1, rtts=(0.1,))
    split = scopes(normalise(fast + slow + unnamed, per_host=True), keep={"rtt", "repetition"})
    assert [(scope, sum(r["params"]["rtt"] == 0.1 for r in rows), len(rows)) for scope, rows in split] == [
        ({"host": "EPYC"}, 0, len(slow)), ({"host": "Xeon"}, 0, len(fast)),
        ({"host": "not recorded"}, len(unnamed), len(unnamed))]  # fmt: skip
    assert all("host" not in r["params"] for r in normalise(fast))  # only when asked for
    # The CPU model alone pools machines: the clock (BogoMIPS / 2) tells two "AMD EPYC" hosts apart.
    clocks = ("4890.81", "5192.29")
    epyc = [{**r, "host": {"cpu": "AMD EPYC", "bogomips": b}} for r, b in zip(slow[:2], clocks, strict=True)]
    assert [r["params"]["host"] for r in normalise(epyc, per_host=True)] == [
        "AMD EPYC @ 2.45 GHz", "AMD EPYC @ 2.60 GHz"]  # fmt: skip
    one_host = one(fast, "nfs_metadata_two_rtt")
    assert one_host.scope == {} and one_host.verdict == "holds"  # nothing to split: no host scope


def test_nfs_two_round_trips_with_one_rtt_is_a_ratio_and_lossy_trials_are_left_out():
    rows = meta("nfs", lambda ms: 2 * ms, rtts=(0.05,))
    rows += meta("nfs", lambda ms: 9 * ms, rtts=(0.05,), loss=1.0)
    f = one(rows, "nfs_metadata_two_rtt")
    assert f.verdict == "holds", f.reason
    assert "ms per op ÷ RTT 2" in f.reason and "one RTT only" in f.reason


def test_swift_thirty_ms_plus_one_rtt():
    f = one(meta("swift", lambda ms: ms + 30), "swift_metadata_rtt_plus_30ms")
    assert f.verdict == "holds", f.reason
    f = one(meta("swift", lambda ms: ms + 200), "swift_metadata_rtt_plus_30ms")
    assert f.verdict == "does not hold"
    assert f.reason.startswith("above 90: Swift mkdir: ms per op − RTT 200")
    f = one(meta("swift", lambda ms: ms + 30, spread=(0.0,)), "swift_metadata_rtt_plus_30ms")
    assert f.verdict == "inconclusive"
    assert f.reason.startswith("n < 2 for Swift mkdir: ms per op − RTT (n = 1)")
    untimed = [{**r, "summary": {"meta_n": 1000.0}} for r in meta("swift", lambda ms: ms + 30)]
    f = one(untimed, "swift_metadata_rtt_plus_30ms")
    assert (f.verdict, f.reason) == ("inconclusive", "no mkdir times at n = 1000 (and 3 more gaps)")


def test_a_kind_the_client_answers_itself_is_no_evidence_about_swift():
    """rclone keeps directories to itself: mkdir takes 2 ms at RTT 50 ms with no packet on the link.
    That kind says nothing of Swift's cost, so the check cannot hold on the other kinds alone."""
    rows = meta("swift", lambda ms: ms + 30)
    for r in rows:
        if r["params"]["rtt"] > 0:
            r["summary"].update(mkdir_ms_per_op=2.0, mkdir_s=2.0, mkdir_packets=0.0)
    f = one(rows, "swift_metadata_rtt_plus_30ms")
    assert f.verdict == "inconclusive", f.reason
    assert f.reason.startswith("Swift mkdir took 2 ms per operation at RTT 20 ms, under one round trip"), (
        f.reason
    )
    # nor is iSCSI compared with a Swift kind that never reached Swift
    iscsi = meta("iscsi", lambda ms: 2 + 0.05 * ms, noise=0.05)
    f = one(rows + iscsi, "iscsi_metadata_rtt_insensitive")
    assert f.verdict == "holds", f.reason


def test_swift_an_order_of_magnitude_slower_on_the_ideal_network():
    ideal = (0.0,)
    nfs, iscsi = (
        meta("nfs", lambda ms: 1.0, ideal, noise=0.1),
        meta("iscsi", lambda ms: 1.2, ideal, noise=0.1),
    )
    f = one(nfs + iscsi + meta("swift", lambda ms: 30.0, ideal), "swift_metadata_ideal_slowest")
    assert f.verdict == "holds", f.reason
    assert f.reason.startswith("all 8 comparisons agree, e.g. 5 × NFS is lower: 5 × NFS 5 vs Swift 30")
    f = one(nfs + meta("swift", lambda ms: 2.0, ideal, noise=0.1), "swift_metadata_ideal_slowest")
    assert f.verdict == "does not hold"
    assert f.reason.startswith("Swift is lower: 5 × NFS 5 vs Swift 2")
    f = one(meta("swift", lambda ms: 30.0, ideal), "swift_metadata_ideal_slowest")
    assert (f.verdict, f.reason) == (
        "inconclusive",
        "no NFS or iSCSI metadata trials at ideal network, n = 1000",
    )
    # rclone keeps directories to itself: a mkdir that sends no packet is the client's, not Swift's
    swift = meta("swift", lambda ms: 30.0, ideal)
    for r in swift:
        r["summary"] |= {"mkdir_ms_per_op": 2.0, "mkdir_packets": 0.0, "touch_packets": 3000.0}
    f = one(nfs + iscsi + swift, "swift_metadata_ideal_slowest")
    assert "mkdir put 0 packets per operation on the link: the client answered without Swift" in f.reason
    assert f.verdict == "inconclusive" and "Swift is lower" not in f.reason, f.reason


def test_iscsi_metadata_barely_depends_on_rtt():
    nfs, swift = meta("nfs", lambda ms: 2 * ms + 1), meta("swift", lambda ms: ms + 30)
    f = one(nfs + swift + meta("iscsi", lambda ms: 0.02 * ms + 2), "iscsi_metadata_rtt_insensitive")
    assert f.verdict == "holds", f.reason
    f = one(nfs + meta("iscsi", lambda ms: 2 * ms + 2), "iscsi_metadata_rtt_insensitive")
    assert f.verdict == "does not hold"
    assert f.reason.startswith("above 0.5: iSCSI (mq-deadline) mkdir: RTTs per op (slope) 2")
    f = one(nfs + meta("iscsi", lambda ms: 2.0, rtts=(0.0,)), "iscsi_metadata_rtt_insensitive")
    assert f.verdict == "inconclusive"
    assert f.reason == "iSCSI metadata trials at one RTT only at n = 1000, no loss: a slope needs two"


# ---- 4: amplification --------------------------------------------------------------------------------


def single(op: str, fsize: int, amp: float, **kw: Any) -> list[dict[str, Any]]:
    summary = {"amplification": amp, "mib_s": 1.0, "bytes": float(fsize)}
    return runs("iscsi", "single", summary, kw.pop("noise", 0.5), op=op, form="direct", file_size=fsize, **kw)


def test_iscsi_single_file_amplification():
    rows = (
        single("read", 4 * KIB, 38.0)
        + single("write", 4 * KIB, 52.0)
        + single("read", 64 * KIB, 3.3, noise=0.02)
    )
    rows += single("read", 16 * MIB, 1.07)  # above 256 KiB: left out (header bytes would decide it)
    f = one(rows, "iscsi_single_amplification")
    assert f.verdict == "holds", f.reason
    assert "amplification 38 (the thesis: (148 + 4)/4 = 38)" in f.reason
    assert not any("16 MiB" in r.condition for r in f.rows)
    f = one(single("read", 4 * KIB, 3.0), "iscsi_single_amplification")
    assert f.verdict == "does not hold"
    assert f.reason.startswith("below 74: iSCSI (direct, mq-deadline) overhead (KiB) 8")
    f = one(single("write", 4 * KIB, 52.0, spread=(0.0,)), "iscsi_single_amplification")
    assert f.verdict == "inconclusive" and "n < 2" in f.reason
    unmeasured = [{**r, "summary": {"mib_s": 1.0}} for r in single("read", 4 * KIB, 38.0)]
    f = one(unmeasured, "iscsi_single_amplification")
    assert f.verdict == "inconclusive"
    assert f.reason.startswith("no result for iSCSI (direct, mq-deadline) overhead (KiB) at read, 4 KiB")
    lossy = single("read", 4 * KIB, 38.0, rtt=0.05)
    assert not named(evaluate("sb001", lossy), "iscsi_single_amplification")


# ---- 5-7: throughput ---------------------------------------------------------------------------------


def batch(target: str, mib_s: float, op: str = "read", fsize: int = MIB, threads: int = 16,
          **kw: Any) -> list[dict[str, Any]]:  # fmt: skip
    form = kw.pop("form", None if target == "swift" else "sync")
    summary = {"mib_s": mib_s, "amplification": 1.1} | kw.pop("extra", {})
    p = {"op": op, "file_size": fsize, "threads": threads} | ({"form": form} if form else {})
    return runs(target, "batch", summary, kw.pop("noise", 0.2), **p, **kw)


def test_swift_fills_the_lossy_wan_while_nfs_and_iscsi_crawl():
    wan = batch("swift", 11.0, **LOSSY) + batch("nfs", 2.0, **LOSSY) + batch("iscsi", 3.0, **LOSSY)
    f = one(wan, "swift_saturates_lossy_wan")
    assert f.verdict == "holds", f.reason
    assert "Swift's share of the line rate 0.923" in f.reason
    fast = batch("swift", 11.0, **LOSSY) + batch("nfs", 8.0, **LOSSY) + batch("iscsi", 3.0, **LOSSY)
    f = one(fast, "swift_saturates_lossy_wan")
    assert f.verdict == "does not hold"
    assert f.reason.startswith("above 4: NFS (sync) MiB/s 8")
    bound = batch("swift", 6.0, extra={"guest_bound": 1.0, "ceiling_mib_s": 7.0}, **LOSSY)
    f = one(bound + batch("nfs", 2.0, **LOSSY) + batch("iscsi", 3.0, **LOSSY), "swift_saturates_lossy_wan")
    assert f.verdict == "inconclusive"
    assert f.reason.startswith(
        "3 of 3 Swift trials at 1 MiB, 16 threads, RTT 50 ms, loss 0.1 % are guest-bound (within 80 % of "
        "the client guest's own ceiling of 7 MiB/s"
    )
    f = one(batch("swift", 11.0, **LOSSY) + batch("nfs", 2.0, **LOSSY), "swift_saturates_lossy_wan")
    assert (f.verdict, f.reason) == ("inconclusive", "no iSCSI batch reads at RTT 50 ms, loss 0.1 %")


def test_swift_below_the_line_refutes_only_where_its_unimpaired_ceiling_is_above_it():
    crawl = batch("nfs", 2.0, **LOSSY) + batch("iscsi", 3.0, **LOSSY)
    slow = batch("swift", 5.0, **LOSSY) + crawl  # a share of 0.42 at 50 ms + 0.1 %
    # The client fills the link on the ideal network (11.5 MiB/s, 0.96): the WAN made it slow.
    f = one(slow + batch("swift", 11.5), "swift_saturates_lossy_wan")
    assert f.verdict == "does not hold", f.reason
    assert f.reason.startswith("below 0.8: Swift's share of the line rate 0.419")
    # Issue 32: the emulated guest's Swift reads 8.5 MiB/s (0.71) without any impairment.
    f = one(slow + batch("swift", 8.5), "swift_saturates_lossy_wan")
    assert f.verdict == "inconclusive", f.reason
    assert "Swift's unimpaired ceiling in this lab is 0.713 share of the line rate" in f.reason
    assert "below the 0.8 share the claim needs" in f.reason
    # No ideal-network Swift trials: nothing shows the client could fill the link at all.
    f = one(slow, "swift_saturates_lossy_wan")
    assert f.verdict == "inconclusive", f.reason
    assert "no unimpaired Swift trials at 1 MiB, 16 threads show that this client can reach" in f.reason
    # Ideal-network NFS and iSCSI rows are not part of this check (only Swift's, as its ceiling).
    assert one(slow + batch("swift", 11.5) + batch("nfs", 11.0), "swift_saturates_lossy_wan").verdict == (
        "does not hold"
    )


def test_a_host_client_swift_is_judged_apart_with_the_guests_nfs_and_iscsi_rows():
    """swift_client = host: rclone without the guest's CPU ceiling. Its rows make their own scope,
    which the NFS and iSCSI rows (no such parameter, or a dumped one) join; older Swift rows ran in
    the guest and stay in the guest's scope."""
    crawl = batch("nfs", 2.0, **LOSSY, swift_client="guest") + batch("iscsi", 3.0, **LOSSY)
    guest = batch("swift", 5.0, **LOSSY) + batch("swift", 8.5)  # no swift_client: the guest's
    host = batch("swift", 10.5, **LOSSY, swift_client="host") + batch("swift", 11.5, swift_client="host")
    found = named(evaluate("sb001", crawl + guest + host), "swift_saturates_lossy_wan")
    by_client = {f.scope["swift_client"]: f for f in found}
    assert set(by_client) == {"guest", "host"}, [f.scope for f in found]
    assert by_client["guest"].verdict == "inconclusive"  # its ceiling, 8.5 MiB/s, is below the line
    assert by_client["host"].verdict == "holds", by_client["host"].reason
    assert by_client["host"].trials == 12 and by_client["guest"].trials == 12
    slow = batch("swift", 7.0, **LOSSY, swift_client="host") + batch("swift", 11.5, swift_client="host")
    (f,) = [f for f in named(evaluate("sb001", crawl + slow), "swift_saturates_lossy_wan")]
    assert f.verdict == "does not hold", f.reason
    assert f.reason.startswith("below 0.8: Swift's share of the line rate 0.587"), f.reason


def test_the_lan_ranking_leaves_out_a_host_client_swift():
    """iscsi_lan_swift_wan ranks the clients against each other: a native rclone against the TCG
    guest's iSCSI would rank the CPUs, so host-client rows are not part of it."""
    host = [{**r, "params": {**r["params"], "swift_client": "host"}} for r in lan_wan() if
            r["params"]["target"] == "swift"]  # fmt: skip
    others = [r for r in lan_wan() if r["params"]["target"] != "swift"]
    f = one(others + host, "iscsi_lan_swift_wan")
    assert f.verdict == "inconclusive" and "swift_client" not in f.scope, (f.verdict, f.scope)
    assert f.trials == len(others)
    assert one(lan_wan() + host, "iscsi_lan_swift_wan").verdict == "holds"


def lan_wan(iscsi_wan: float = 0.5, swift_lan: float = 1.5) -> list[dict[str, Any]]:
    k4 = {"fsize": 4 * KIB}
    rows = batch("iscsi", 10.0, form="direct", **k4) + batch("nfs", 3.0, form="direct", **k4)
    rows += batch("swift", swift_lan, **k4) + batch("iscsi", 20.0, op="write", form="direct", **k4)
    rows += batch("nfs", 2.0, op="write", form="direct", **k4) + batch("swift", 2.5, op="write", **k4)
    rows += batch("swift", 2.0, **k4, **LOSSY) + batch("iscsi", iscsi_wan, form="direct", **k4, **LOSSY)
    return rows


def test_iscsi_best_on_the_lan_and_swift_above_it_on_the_lossy_wan():
    f = one(lan_wan(), "iscsi_lan_swift_wan")
    assert f.verdict == "holds", f.reason
    assert f.reason.startswith("all 5 comparisons agree")
    # Swift below iSCSI on the WAN refutes the claim only where this client's Swift, unimpaired,
    # reads faster than iSCSI's impaired rate: here it reads 6 MiB/s on the ideal network.
    f = one(lan_wan(iscsi_wan=4.0, swift_lan=6.0), "iscsi_lan_swift_wan")
    assert f.verdict == "does not hold", f.reason
    assert f.reason.startswith(
        "Swift is lower: iSCSI (direct, mq-deadline) 4 MiB/s vs Swift 2 MiB/s at RTT 50 ms"
    )
    # Issue 32: Swift's unimpaired 1.5 MiB/s is below iSCSI's impaired 4: a client artefact, not a refutation.
    f = one(lan_wan(iscsi_wan=4.0), "iscsi_lan_swift_wan")
    assert f.verdict == "inconclusive", f.reason
    assert (
        "Swift's unimpaired ceiling in this lab is 1.5 MiB/s (CI 1–2, ideal network, n = 3) at read, "
        "16 threads, below the 4.5 MiB/s iSCSI (direct, mq-deadline) reached on the impaired network"
    ) in f.reason, f.reason
    lan_only = [r for r in lan_wan() if r["params"]["rtt"] == 0]
    f = one(lan_only, "iscsi_lan_swift_wan")
    assert f.verdict == "inconclusive"
    assert f.reason.startswith("no reads with ≥ 16 threads at RTT ≥ 50 ms with loss (the WAN half)")


def sched(scheduler: str, mib_s: float, **kw: Any) -> list[dict[str, Any]]:
    return batch("iscsi", mib_s, **{"fsize": 16 * MIB, "threads": 8, **kw}, scheduler=scheduler, rtt=0.05)


def test_deadline_resists_latency_better_than_bfq():
    f = one(sched("mq-deadline", 9.0) + sched("bfq", 3.0), "deadline_beats_bfq_50ms")
    assert f.verdict == "holds", f.reason
    assert "bfq/mq-deadline 0.333" in f.reason
    f = one(sched("mq-deadline", 3.0) + sched("bfq", 9.0), "deadline_beats_bfq_50ms")
    assert f.verdict == "does not hold"
    assert f.reason.startswith(
        "0.8 × mq-deadline is lower: bfq 9 MiB/s vs 0.8 × mq-deadline 2.4 MiB/s at 16 MiB, 8 threads"
    )
    # Issue 32: two equal schedulers decide it (bfq is not "much slower"); "deadline above bfq"
    # could never be shown by any number of runs.
    equal = sched("mq-deadline", 8.24, noise=0.05) + sched("bfq", 8.25, noise=0.05)
    f = one(equal, "deadline_beats_bfq_50ms")
    assert f.verdict == "does not hold", f.reason
    assert "bfq/mq-deadline 1 (the thesis: CFQ about 1/3" in f.reason
    f = one(sched("mq-deadline", 9.0), "deadline_beats_bfq_50ms")
    assert f.verdict == "inconclusive" and f.reason.startswith("no bfq trials at 16 MiB, 8 threads")
    # Direct reads, 4 KiB files and one thread are not the thesis' claim.
    left_out = (
        sched("bfq", 3.0, form="direct") + sched("bfq", 3.0, fsize=4 * KIB) + sched("bfq", 3.0, threads=1)
    )
    assert not named(evaluate("sb001", left_out), "deadline_beats_bfq_50ms")


# ---- 8: macrobenchmarks ------------------------------------------------------------------------------

POSTMARK = {  # Table 6.1, 100 Mbit/s: NFS, iSCSI CFQ, iSCSI deadline, Swift (s)
    "ideal": (1642, 23, 20, 3781),
    "+50 ms": (11681, 22, 22, 15506),
    "+0.1 % loss": (14248, 22, 21, 19005),
    "realistic": (15643, 22, 21, 11841),
}
VARMAIL = {
    "ideal": (463, 3783, 3817, 161),
    "+50 ms": (41, 626, 629, 102),
    "+0.1 % loss": (40, 318, 362, 104),
    "realistic": (37, 291, 348, 99),
}
FILESERVER = {
    "ideal": (322, 2121, 2166, 98),
    "+50 ms": (35, 1416, 1776, 98),
    "+0.1 % loss": (31, 377, 419, 104),
    "realistic": (29, 384, 367, 98),
}


def macro(family: str, metric: str, table: dict[str, tuple[float, ...]], skip: str = "") -> list[dict]:
    rows = []
    for row, (nfs, cfq, deadline, swift) in table.items():
        net = ROWS[row]
        for target, value, extra in (("nfs", nfs, {}), ("iscsi", cfq, {"scheduler": "bfq"}),
                                     ("iscsi", deadline, {}), ("swift", swift, {})):  # fmt: skip
            if target != skip:
                rows += runs(target, family, {metric: value}, value * 0.01, **net, **extra)
    return rows


def test_postmark_iscsi_an_order_of_magnitude_ahead():
    f = one(macro("postmark", "postmark_s", POSTMARK), "postmark_order")
    assert f.verdict == "holds", f.reason
    assert f.reason.startswith("all 19 comparisons agree")
    slow = dict(POSTMARK, ideal=(1642, 500, 20, 3781))
    f = one(macro("postmark", "postmark_s", slow), "postmark_order")
    assert f.verdict == "does not hold"
    assert f.reason.startswith("NFS is lower: 10 × iSCSI (bfq) 5000 vs NFS 1642 at the ideal row")
    f = one(macro("postmark", "postmark_s", POSTMARK, skip="swift"), "postmark_order")
    assert f.verdict == "inconclusive"
    assert f.reason.startswith("no Swift PostMark trials at the ideal row")


def test_varmail_orderings_follow_table_6_2():
    f = one(macro("varmail", "iops", VARMAIL), "varmail_order")
    assert f.verdict == "holds", f.reason
    nfs_fast = dict(VARMAIL, **{"+50 ms": (200, 626, 629, 102)})
    f = one(macro("varmail", "iops", nfs_fast), "varmail_order")
    assert f.verdict == "does not hold"
    assert f.reason.startswith("Swift is lower: NFS 200 vs Swift 102 at the +50 ms row")
    f = one(macro("varmail", "iops", VARMAIL, skip="swift"), "varmail_order")
    assert f.verdict == "inconclusive" and "no Swift varmail trials" in f.reason


def test_fileserver_orderings_and_a_flat_swift_follow_table_6_3():
    f = one(macro("fileserver", "iops", FILESERVER), "fileserver_order")
    assert f.verdict == "holds", f.reason
    sagging = dict(FILESERVER, realistic=(29, 384, 367, 40))
    f = one(macro("fileserver", "iops", sagging), "fileserver_order")
    assert f.verdict == "does not hold"
    assert f.reason.startswith("Swift realistic is lower: 0.7 × Swift ideal 68.6 vs Swift realistic 40")
    no_ideal = {k: v for k, v in FILESERVER.items() if k != "ideal"}
    f = one(macro("fileserver", "iops", no_ideal), "fileserver_order")
    assert f.verdict == "inconclusive"
    assert f.reason.startswith("no ideal-network Swift fileserver trials to compare the other rows with")


def test_other_network_rows_are_not_the_tables():
    rows = runs("nfs", "varmail", {"iops": 40.0}, 1.0, rtt=0.16)
    assert not named(evaluate("sb001", rows), "varmail_order")


# ---- all together ------------------------------------------------------------------------------------


def test_a_mixed_set_runs_every_check_and_renders():
    rows = meta("nfs", lambda ms: 2 * ms + 1) + meta("swift", lambda ms: ms + 30)
    rows += meta("iscsi", lambda ms: 0.02 * ms + 2)
    rows += single("read", 4 * KIB, 38.0) + lan_wan() + sched("mq-deadline", 9.0) + sched("bfq", 3.0)
    rows += batch("swift", 11.0, **LOSSY) + batch("nfs", 2.0, **LOSSY) + batch("iscsi", 3.0, **LOSSY)
    rows += macro("postmark", "postmark_s", POSTMARK) + macro("varmail", "iops", VARMAIL)
    rows += macro("fileserver", "iops", FILESERVER)
    rows += runs("nfs", "varmail", {"iops": 400.0}, 1.0, rate=1e9)  # a 1 Gbit/s scope with NFS only
    assert [c.name for c in applicable("sb001", rows)] == NAMES
    found = evaluate("sb001", rows)
    assert {f.name for f in found} == set(NAMES)
    by = {(f.name, f.scope_label): f for f in found}
    assert by[("varmail_order", "rate = 1000 Mbit/s")].verdict == "inconclusive"
    wrong = [
        (f.name, f.scope_label, f.reason)
        for f in found
        if f.verdict != "holds" and "1000" not in f.scope_label
    ]
    assert not wrong, wrong
    text = render_markdown(found, REPORT_TITLES["sb001"])
    assert text.startswith("## Thesis 001 (Ch. 4–6)") and "| condition | series | quantity |" in text
    assert [f for f in evaluate("sb001", []) if f.verdict != "inconclusive"] == []
