"""The storage run's remaining families (single, unit, postmark, varmail, fileserver) and the CPU probe.

Without a guest: the new StorageRun fields are refused naming the field and bound; PostMark's report
(recorded from Debian's PostMark 1.53 in the guest: ``data/postmark-1.53-report.txt``) is parsed;
the CPU probe reads a /proc/stat and a target process's CPU seconds. In the guest they run in
test_storage_guest.py's one boot (a single iSCSI read, a short varmail and PostMark on NFS).
"""

from __future__ import annotations

import secrets
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from qoelab.emulation.profile import LinkProfile
from qoelab.emulation.tcp import TcpSettings
from qoelab.errors import ParameterError
from qoelab.jobs import get as get_job
from qoelab.jobs.storage_bench import META_KINDS, ROUND_KEYS, summarize
from qoelab.storage.macro import parse_postmark, postmark_commands
from qoelab.storage.measure import CpuProbe, busy_fraction, parse_proc_stat
from qoelab.storage.trial import FAMILIES, StorageRun

DATA = Path(__file__).parent / "data"


def profile(rtt_ms: float = 0.0) -> LinkProfile:
    half = f"{rtt_ms / 2:g}ms"
    return LinkProfile.parse(rate="100mbit", delay=half, up_delay=half,
                             tcp=TcpSettings(cc="cubic", no_metrics_save=True))  # fmt: skip


# ---- without a guest ----


def test_the_families_are_all_there() -> None:
    assert FAMILIES == ("metadata", "batch", "single", "unit", "postmark", "varmail", "fileserver")


@pytest.mark.parametrize(
    ("kw", "words"),
    [
        ({"units": ()}, "units: each unit must be 512 B..1 GiB"),
        ({"units": (4096, 256)}, "units: each unit must be 512 B..1 GiB, got [4096, 256]"),
        ({"units": (4096, 1000), "form": "sync"}, None),  # only direct needs multiples of 512
        ({"units": (4096, 1000)}, "units: each a multiple of 512 for direct"),
        ({"family": "unit", "units": (4096, 2 << 20)}, "units: each unit must be at most file_size (1048"),
        ({"postmark_transactions": 0}, "postmark_transactions: must be 1..10000000, got 0"),
        ({"macro_seconds": 0.5}, "macro_seconds: must be 1..86400 s, got 0.5"),
        ({"swift_cache_mode": "sometimes"}, "swift_cache_mode: must be one of off, minimal, writes, full"),
        (
            {"target": "swift", "form": "default", "family": "postmark", "swift_cache_mode": "off"},
            "swift_cache_mode: PostMark appends to and rewrites files",
        ),
        ({"family": "fio"}, "family: must be one of metadata, batch, single, unit, postmark, varmail"),
    ],
)
def test_new_fields_are_refused_naming_the_field_and_bound(kw: dict, words: str | None) -> None:
    args = {"target": "nfs", "family": "single", "profile": profile(), **kw}
    if words is None:
        StorageRun(**args)
        return
    with pytest.raises(ParameterError) as err:
        StorageRun(**args)
    assert words in str(err.value), str(err.value)


def test_defaults_keep_the_old_fields_and_pick_rclones_cache_per_family() -> None:
    run = StorageRun(target="swift", family="batch", profile=profile(), form="default")
    assert run.units == (4096, 65536, 1 << 20, 16 << 20) and run.postmark_transactions == 25000
    assert run.macro_seconds == 120.0 and run.threads == (1, 4, 16) and run.file_size == 1 << 20
    assert run.rclone_cache_mode == "off"  # streams like CloudFuse
    for family in ("postmark", "varmail", "fileserver"):
        macro = StorageRun(target="swift", family=family, profile=profile(), form="default")
        assert macro.rclone_cache_mode == "writes"  # PostMark and the personalities append and seek
    sweep = StorageRun(target="nfs", family="unit", profile=profile(), file_size=16 << 20)
    assert sweep.units[-1] == sweep.file_size


def test_the_postmark_session_is_the_thesis_configuration() -> None:
    text = postmark_commands("/mnt/qoelab/postmark", 25000)
    for line in ("set number 500", "set size 5120 524288", "set transactions 25000", "set buffering false",
                 "set location /mnt/qoelab/postmark"):  # fmt: skip
        assert line in text.splitlines()
    assert text.splitlines()[-2:] == ["run", "quit"]


def test_a_rounds_flags_become_zero_or_one_in_the_summary_and_missing_ones_stay_out() -> None:
    row = {"mib_s": 0.5, "amplification": 10.0, "link_bytes": 18320, "link_bytes_clean": 22780,
           "time_limit_hit": False, "guest_bound": None, "remounted": True, "first_error": None}  # fmt: skip
    got = summarize("single", SimpleNamespace(ops=[], rounds=[row], macro=None, cpu=None))
    assert got == {"mib_s": 0.5, "amplification": 10.0, "link_bytes": 18320.0, "link_bytes_clean": 22780.0,
                   "time_limit_hit": 0.0, "remounted": 1.0}  # fmt: skip


def test_every_summary_value_is_a_declared_metric_so_the_dashboard_can_chart_it() -> None:
    declared = {m.name for m in get_job("storage_bench").metrics}
    ops = [{"op": k, "n": 10, "seconds": 1.0, "per_op_ms": 100.0, "failed": 0, "packets": 40, "bytes": 4000,
            "requests": 20} for k in META_KINDS]  # fmt: skip
    meta = summarize("metadata", SimpleNamespace(ops=ops, rounds=[], macro=None, cpu={"cpu_client": 0.2}))
    row = {k: 1.0 for k in ROUND_KEYS} | {"time_limit_hit": False, "guest_bound": True, "remounted": True}
    rounds = summarize("single", SimpleNamespace(ops=[], rounds=[row], macro=None, cpu=None))
    macro = {fam: summarize(fam, SimpleNamespace(ops=[], rounds=[], macro=m, cpu=None)) for fam, m in (
        ("postmark", {"seconds": 10.0, "tps": 50.0}), ("varmail", {"iops": 300.0}))}  # fmt: skip
    assert "link_packets_clean" in rounds and "mkdir_failed" in meta and macro["varmail"] == {"iops": 300.0}
    for got in (meta, rounds, *macro.values()):
        assert set(got) <= declared, set(got) - declared


def test_postmark_report_is_parsed() -> None:
    """A report of Debian's PostMark 1.53 (500 files, 5-512 KiB, 200 transactions, unbuffered) as it
    printed it in the guest on an NFS mount."""
    report = (DATA / "postmark-1.53-report.txt").read_text()
    got = parse_postmark(report)
    assert got["seconds"] >= 1 and got["transaction_seconds"] is not None
    assert got["seconds"] >= got["transaction_seconds"]
    if got["transaction_seconds"]:
        assert got["tps"] == 200 // got["transaction_seconds"]
    assert got["created"] >= 500 and got["deleted"] == got["created"]
    assert got["created_alone"] == 500 and got["deleted_alone"] is not None
    assert got["read"] is not None and got["appended"] is not None
    assert got["read_mb"] > 0 and got["written_mb"] > 0
    # The recorded run: 56 s total, 15 s of transactions at 13 per second, 606 files created.
    assert (got["seconds"], got["transaction_seconds"], got["tps"], got["created"]) == (56, 15, 13, 606)
    assert got["read_mb"] == pytest.approx(26.04) and got["written_mb"] == pytest.approx(173.81)


def test_a_report_without_a_time_is_an_error() -> None:
    from qoelab.storage.macro import PostmarkError

    with pytest.raises(PostmarkError, match="no 'seconds total' line"):
        parse_postmark("pm>Error: cannot create /mnt/qoelab/postmark/s0/1\npm>")


def test_proc_stat_busy_fraction() -> None:
    before = parse_proc_stat("cpu  100 0 100 800 0 0 0 0 0 0\ncpu0 1 2 3 4\n")
    after = parse_proc_stat("cpu  150 0 150 850 50 0 0 0 0 0\n")
    assert before == (1000, 800, 0) and after == (1200, 850, 50)
    assert busy_fraction(before, after) == (pytest.approx(0.5), pytest.approx(0.25))
    assert busy_fraction(after, after) == (0.0, 0.0)
    real = parse_proc_stat(Path("/proc/stat").read_text())
    assert real[0] > real[1] > 0


class _HostShell:
    """A GuestShell stand-in that runs the command here (this host's /proc/stat)."""

    def run(self, command: str, timeout: float = 30) -> subprocess.CompletedProcess[str]:
        return subprocess.run(command, shell=True, capture_output=True, text=True, timeout=timeout,
                              check=True)  # fmt: skip


def test_the_cpu_probe_counts_the_targets_processes() -> None:
    """A busy target process for 0.6 s: its CPU seconds are counted; the client side is a fraction."""
    spin = "import sys, time\nsys.stdin.readline()\nt = time.process_time()\n" \
           "while time.process_time() - t < 0.6: pass\ntime.sleep(30)"  # fmt: skip
    proc = subprocess.Popen([sys.executable, "-c", spin], stdin=subprocess.PIPE, text=True)
    try:
        target = SimpleNamespace(processes={"spinner": proc})
        probe = CpuProbe(_HostShell(), "qsf" + secrets.token_hex(2), target)  # type: ignore[arg-type]
        time.sleep(0.3)  # the interpreter's start-up before the mark
        with probe.phase() as cpu:
            assert proc.stdin is not None
            proc.stdin.write("go\n")
            proc.stdin.flush()
            time.sleep(1.5)
    finally:
        proc.kill()
        proc.wait()
    assert 0.0 <= cpu["cpu_client"] <= 1.0 and cpu["server_processes"] == 1, cpu
    assert 0.55 <= cpu["cpu_server"] <= 1.0, cpu  # the 0.6 s of spinning
    assert cpu["wall_s"] >= 1.5


# ---- with the guest (root, the image) ----
