"""storage-iobench (thesis 001's benchmark tool) on real directories: accounting, forms, metadata,
the FileBench emulation and bad options. Every run is short; nothing sleeps for a fixed time."""

from __future__ import annotations

import errno
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from qoelab.errors import ParameterError
from qoelab.storage import iobench
from qoelab.storage.iobench import FilebenchSpec, MetaSpec, MicroSpec, PrepareSpec

REPO = Path(__file__).resolve().parents[3]
VARMAIL_FLOWOPS = ["deletefile1", "createfile2", "appendfilerand2", "fsyncfile2", "closefile2", "openfile3",
                   "readfile3", "appendfilerand3", "fsyncfile3", "closefile3", "openfile4", "readfile4",
                   "closefile4"]  # fmt: skip
FILESERVER_FLOWOPS = ["createfile1", "wrtfile1", "closefile1", "openfile1", "appendfilerand1", "closefile2",
                      "openfile2", "readfile1", "closefile3", "deletefile1", "statfile1"]  # fmt: skip


@pytest.fixture(scope="module", autouse=True)
def built() -> None:
    """The tool, built now if missing or stale (make is incremental), else skip why."""
    if not os.environ.get("QOELAB_STORAGE_IOBENCH"):
        subprocess.run(["make", "-s", "-C", str(REPO / "workers/qoelab/storage/csrc")], check=False)
    if not iobench.binary().exists():
        pytest.skip(iobench.NOT_BUILT)


def tool(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(iobench.binary()), *args], capture_output=True, text=True, timeout=30)


def hand_made(d: Path, files: int, size: int) -> list[Path]:
    """The set's layout written by hand: f0000000.. (dNNNN/ buckets only past 4,096 files)."""
    d.mkdir(parents=True, exist_ok=True)
    paths = [d / f"f{i:07d}" for i in range(files)]
    for i, p in enumerate(paths):
        p.write_bytes(bytes([i % 251]) * size)
    return paths


def test_a_read_round_services_every_file_once_and_moves_files_times_size(tmp_path: Path) -> None:
    hand_made(tmp_path / "set", 12, 8192)
    seen: list[dict] = []
    r = iobench.micro(MicroSpec(str(tmp_path / "set"), "read", 8192, 12, threads=4), on_line=seen.append)
    assert (r.serviced, r.failed, r.not_started, r.bytes) == (12, 0, 0, 12 * 8192)
    assert r.complete and not r.time_limit_hit and r.first_error is None
    assert [t.thread for t in r.per_thread] == [0, 1, 2, 3]
    assert sum(t.serviced for t in r.per_thread) == 12
    assert sum(t.bytes for t in r.per_thread) == r.bytes
    assert 0 < r.internal_s <= r.outer_s
    assert r.mib_s == pytest.approx(r.bytes / 2**20 / r.internal_s, rel=1e-6)
    assert seen[0]["event"] == "start" and r.raw["event"] == "result"


def test_the_access_unit_splits_a_file_into_calls_without_changing_the_bytes(tmp_path: Path) -> None:
    hand_made(tmp_path, 3, 10_000)  # not a multiple of the unit: the last call is short
    r = iobench.micro(MicroSpec(str(tmp_path), "read", 10_000, 3, unit=4096))
    assert (r.serviced, r.bytes, r.unit) == (3, 30_000, 4096)


def test_missing_unreadable_and_short_files_are_failed_ops_excluded_from_the_bytes(tmp_path: Path) -> None:
    paths = hand_made(tmp_path, 10, 4096)
    paths[1].unlink()
    paths[4].unlink()
    paths[6].unlink()
    paths[6].mkdir()  # read() of a directory fails with EISDIR
    paths[8].write_bytes(b"x" * 100)  # short: ends before the set's size
    r = iobench.micro(MicroSpec(str(tmp_path), "read", 4096, 10, threads=3))
    assert (r.serviced, r.failed, r.not_started) == (6, 4, 0)
    assert r.bytes == 6 * 4096 and not r.complete
    assert sum(t.failed for t in r.per_thread) == 4
    assert sum(t.serviced for t in r.per_thread) == 6
    assert any(s in r.first_error for s in ("No such file", "Is a directory", "ended after"))


def test_prepare_creates_the_set_and_a_write_round_deletes_it_first(tmp_path: Path) -> None:
    d = tmp_path / "new"
    p = iobench.prepare(PrepareSpec(str(d), 5000, 7, threads=3))
    assert (p.mode, p.serviced, p.bytes) == ("prepare", 7, 35_000)
    assert sorted(f.name for f in d.iterdir()) == [f"f{i:07d}" for i in range(7)]
    assert all(f.stat().st_size == 5000 for f in d.iterdir())
    w = iobench.micro(MicroSpec(str(d), "write", 6000, 7, threads=2, form="sync"))
    assert w.deleted_before == 7
    assert (w.serviced, w.bytes, w.write_mode) == (7, 42_000, "delete")
    assert all(f.stat().st_size == 6000 for f in d.iterdir())


def test_overwrite_mode_keeps_the_files_and_rewrites_them_in_place(tmp_path: Path) -> None:
    paths = hand_made(tmp_path, 4, 3000)
    inodes = [p.stat().st_ino for p in paths]
    r = iobench.micro(MicroSpec(str(tmp_path), "write", 2048, 4, write_mode="overwrite"))
    assert (r.serviced, r.bytes, r.deleted_before) == (4, 8192, 0)
    assert [p.stat().st_ino for p in paths] == inodes
    assert all(p.stat().st_size == 2048 for p in paths)  # truncated: rclone needs O_TRUNC


def test_a_tiny_time_limit_stops_handing_out_jobs_and_flags_the_round(tmp_path: Path) -> None:
    r = iobench.micro(MicroSpec(str(tmp_path), "write", 65536, 2000, form="sync", limit_s=0.001))
    assert r.time_limit_hit and not r.complete
    assert r.not_started > 0
    assert r.serviced + r.failed + r.not_started == 2000
    assert r.bytes == r.serviced * 65536


def test_past_4096_files_the_set_spans_subdirectories_of_4096(tmp_path: Path) -> None:
    d = tmp_path / "big"
    iobench.prepare(PrepareSpec(str(d), 0, 4097, threads=8))
    assert sorted(x.name for x in d.iterdir()) == ["d0000", "d0001"]
    assert len(list((d / "d0000").iterdir())) == 4096
    assert [x.name for x in (d / "d0001").iterdir()] == ["f0004096"]
    r = iobench.micro(MicroSpec(str(d), "read", 0, 4097, threads=4))
    assert (r.serviced, r.failed, r.bytes) == (4097, 0, 0)


def test_a_round_over_part_of_a_bucketed_set_finds_its_files_by_the_set_s_layout(tmp_path: Path) -> None:
    iobench.prepare(PrepareSpec(str(tmp_path), 10, 4100, threads=8))
    r = iobench.micro(MicroSpec(str(tmp_path), "read", 10, 3, set_files=4100))
    assert (r.serviced, r.failed, r.bytes, r.set_files) == (3, 0, 30, 4100)
    flat = iobench.micro(MicroSpec(str(tmp_path), "read", 10, 3))  # laid out for 3: f0000000 at the top
    assert (flat.serviced, flat.failed) == (0, 3) and "No such file" in flat.first_error


@pytest.fixture
def direct_dir():
    """A directory on the repo's disk (tmpfs refuses O_DIRECT), or skip with the reason."""
    base = Path("/var/tmp") if Path("/var/tmp").is_dir() else REPO
    d = Path(tempfile.mkdtemp(prefix="iobench-direct-", dir=base))
    try:
        probe = d / "probe"
        probe.write_bytes(b"\0" * 4096)
        try:
            os.close(os.open(probe, os.O_RDONLY | os.O_DIRECT))
        except OSError as e:
            if e.errno == errno.EINVAL:
                pytest.skip(f"the filesystem under {base} refuses O_DIRECT")
            raise
        probe.unlink()
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


def test_the_direct_form_reads_and_writes_through_o_direct(direct_dir: Path) -> None:
    w = iobench.micro(MicroSpec(str(direct_dir), "write", 65536, 5, threads=2, form="direct", unit=16384))
    assert (w.form, w.serviced, w.failed, w.bytes) == ("direct", 5, 0, 5 * 65536), w.first_error
    r = iobench.micro(MicroSpec(str(direct_dir), "read", 65536, 5, threads=3, form="direct", unit=16384))
    assert (r.serviced, r.failed, r.bytes) == (5, 0, 5 * 65536), r.first_error


def test_meta_runs_each_kind_n_times_in_order_with_phase_markers(tmp_path: Path) -> None:
    seen: list[dict] = []
    r = iobench.meta(MetaSpec(str(tmp_path), 7, markers=True), on_line=seen.append)
    assert [o.op for o in r.ops] == ["mkdir", "touch", "ls", "unlink", "rmdir"]
    assert [(o.n, o.done, o.failed) for o in r.ops] == [(7, 7, 0), (7, 7, 0), (1, 1, 0), (7, 7, 0), (7, 7, 0)]
    assert r.op("ls").entries == 14
    assert all(o.seconds == pytest.approx(o.ops_seconds + o.sync_seconds, abs=1e-6) for o in r.ops)
    assert [(m.kind, m.edge) for m in r.markers] == [
        (k, e) for k in iobench.META_KINDS for e in ("start", "end")
    ]
    edges = [m.realtime_ns for m in r.markers]
    assert edges == sorted(edges)
    rounds = [e["op"] for e in seen if e["event"] == "round"]
    assert rounds == list(iobench.META_KINDS)
    assert list(tmp_path.iterdir()) == []


def test_meta_runs_a_part_of_the_sequence_so_a_fuse_client_can_be_remounted_before_ls(tmp_path: Path) -> None:
    a = iobench.meta(MetaSpec(str(tmp_path), 3, kinds=("mkdir", "touch")))
    assert [o.op for o in a.ops] == ["mkdir", "touch"] and len(list(tmp_path.iterdir())) == 6
    b = iobench.meta(MetaSpec(str(tmp_path), 3, kinds=("ls",)))
    assert b.op("ls").entries == 6
    c = iobench.meta(MetaSpec(str(tmp_path), 3, kinds=("unlink", "rmdir")))
    assert c.failed == 0 and list(tmp_path.iterdir()) == []


def test_meta_refuses_a_directory_that_is_not_empty(tmp_path: Path) -> None:
    (tmp_path / "x").touch()
    with pytest.raises(iobench.IobenchError, match="--dir: must be empty"):
        iobench.meta(MetaSpec(str(tmp_path), 1))


@pytest.mark.parametrize(
    ("personality", "names", "extra"),
    [("varmail", VARMAIL_FLOWOPS, {}), ("fileserver", FILESERVER_FLOWOPS, {"mean_size": 16384})],
)
def test_the_filebench_emulation_runs_its_flowops_and_reports_iops(
    tmp_path: Path, personality: str, names: list[str], extra: dict
) -> None:
    seen: list[dict] = []
    spec = FilebenchSpec(personality, str(tmp_path), seconds=2, threads=4, files=200, interval_s=0.5, **extra)
    r = iobench.filebench(spec, on_line=seen.append, timeout=60)
    assert r.personality == personality and "emulated" in r.emulation and "FileBench" in r.emulation
    assert [f.name for f in r.flowops] == names
    assert r.ops > 0 and all(f.ops > 0 for f in r.flowops)
    assert r.ops == sum(f.ops for f in r.flowops)
    assert r.iops == pytest.approx(r.ops / r.seconds, rel=1e-6)
    assert r.errors == 0, r.first_error
    assert r.seconds == pytest.approx(2, abs=0.5)
    assert any(e["event"] == "progress" for e in seen)
    read = sum(f.bytes for f in r.flowops if f.op == "readwholefile")
    assert read == r.read_bytes > 0 and r.write_bytes > 0
    if personality == "fileserver":
        assert r.raw["dir_levels"] == 1  # 200 files, width 20: 10 directories of 20
        assert all(p.is_dir() for p in (tmp_path / "fileserver").iterdir())
    else:
        assert r.raw["dir_levels"] == 0


def test_wait_before_run_pauses_after_preallocation_until_the_caller_says_go(tmp_path: Path) -> None:
    seen: list[str] = []
    spec = FilebenchSpec("varmail", str(tmp_path), seconds=0.3, threads=2, files=20, wait_before_run=True)
    go = lambda: seen.append("go")  # noqa: E731
    r = iobench.filebench(spec, on_line=lambda e: seen.append(e["event"]), before_run=go)
    assert seen[:3] == ["prealloc_done", "go", "start"]
    assert r.ops > 0


def test_dropcache_syncs_and_writes_3_where_the_kernel_reads_it(tmp_path: Path, monkeypatch) -> None:
    target = tmp_path / "drop_caches"  # never the host's real cache: other experiments run here
    target.write_text("")
    monkeypatch.setenv("QOELAB_IOBENCH_DROP_CACHES", str(target))
    assert iobench.drop_caches() >= 0
    assert target.read_text() == "3\n"
    monkeypatch.setenv("QOELAB_IOBENCH_DROP_CACHES", str(tmp_path / "nowhere" / "drop_caches"))
    with pytest.raises(iobench.IobenchError, match="dropcache: open .*No such file"):
        iobench.drop_caches()


def test_cold_metadata_on_a_file_system_that_cannot_freeze_is_reported_and_the_round_runs(
    tmp_path: Path, monkeypatch
) -> None:
    """tmpfs, like NFS and FUSE, has no freeze: the round reads on and says so. (Never the host's own
    disk: freezing it would stall everything else here. The guest test freezes ext4 on iSCSI.)"""
    shm = Path(tempfile.mkdtemp(prefix="iobench-ckpt-", dir="/dev/shm"))
    try:
        hand_made(shm, 2, 4096)
        target = tmp_path / "drop_caches"
        target.write_text("")
        monkeypatch.setenv("QOELAB_IOBENCH_DROP_CACHES", str(target))
        r = iobench.micro(MicroSpec(str(shm), "read", 4096, 2, drop_caches=True, cold_metadata=True))
        assert (r.cold_metadata, r.serviced, target.read_text()) == ("unsupported", 2, "3\n")
        assert iobench.micro(MicroSpec(str(shm), "read", 4096, 2, drop_caches=True)).cold_metadata is None
    finally:
        shutil.rmtree(shm, ignore_errors=True)
    with pytest.raises(ParameterError, match="cold_metadata: only with drop_caches"):
        MicroSpec(str(shm), "read", 4096, 2, cold_metadata=True)


READ = ["micro", "--dir", ".", "--op", "read", "--files", "1"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ([*READ, "--size", "1", "--threads", "0"], "--threads: 1..64, got 0"),
        ([*READ, "--size", "1", "--threads", "65"], "--threads: 1..64, got 65"),
        ([*READ, "--size", "1", "--files", "0"], "--files: 1..100000000, got 0"),
        ([*READ, "--size", "1x"], "--size: a size in bytes"),
        ([*READ, "--size", "1", "--limit", "0"], "--limit: 0.001..86400 s, got 0"),
        ([*READ, "--size", "1", "--op", "peek"], "--op: read or write, got 'peek'"),
        ([*READ, "--size", "4096", "--form", "fast"], "--form: default, sync or direct, got 'fast'"),
        ([*READ, "--size", "4096", "--form", "direct", "--unit", "1000"],
         "--unit: a multiple of 512 with --form direct, got 1000"),
        (READ, "--size: required"),
        ([*READ, "--size", "1", "--dir", "/nonexistent/x"], "--dir: not a directory"),
        ([*READ, "--size", "1", "--files", "5", "--set-files", "4"],
         "--set-files: at least --files (5), got 4"),
        (["micro", "--bogus"], "micro: unknown option --bogus"),
        (["prepare", "--dir", ".", "--size", "1", "--files", "1", "--form", "direct"],
         "--form is not an option of prepare"),
        (["meta", "--dir", ".", "--n", "0"], "--n: 1..1000000, got 0"),
        (["meta", "--dir", ".", "--n", "1", "--kinds", "mkdir,ls"], "--kinds: a contiguous part"),
        (["meta", "--dir", ".", "--n", "1", "--kinds", "chmod"], "--kinds: a comma list"),
        (["varmail", "--dir", ".", "--threads", "300"], "--threads: 1..256, got 300"),
        (["fileserver", "--dir", ".", "--prealloc", "101"], "--prealloc: 0..100, got 101"),
        (["varmail", "--dir", ".", "--seconds", "0"], "--seconds: 0.1..86400 s, got 0"),
        ([*READ, "--size", "1", "--cold-metadata"], "--cold-metadata: only with --drop-caches"),
        (["dropcache", "now"], "dropcache: takes no options"),
        (["format"], "a subcommand: prepare, micro, meta, varmail, fileserver or dropcache, got 'format'"),
    ],
)  # fmt: skip
def test_bad_options_exit_2_naming_the_option_and_its_bound(args: list[str], message: str) -> None:
    p = tool(*args)
    assert p.returncode == 2
    assert p.stdout == ""
    assert p.stderr.startswith("storage-iobench: ") and message in p.stderr, p.stderr


def test_the_specs_reject_what_the_tool_would_naming_the_field() -> None:
    with pytest.raises(ParameterError, match="threads: 1..64, got 0"):
        MicroSpec("/x", "read", 4096, 1, threads=0)
    with pytest.raises(ParameterError, match="unit: a multiple of 512"):
        MicroSpec("/x", "read", 4096, 1, form="direct", unit=100)
    with pytest.raises(ParameterError, match="kinds"):
        MetaSpec("/x", 1, kinds=("touch", "mkdir"))
    with pytest.raises(ParameterError, match="personality"):
        FilebenchSpec("webserver", "/x")  # type: ignore[arg-type]


def test_an_argv_prefix_runs_the_tool_through_another_program(tmp_path: Path) -> None:
    hand_made(tmp_path, 2, 100)
    prefix = ["sh", "-c", 'exec "$@"', "sh"]  # stands in for ["ssh", "root@guest", "--"]
    r = iobench.micro(MicroSpec(str(tmp_path), "read", 100, 2), prefix=prefix)
    assert (r.serviced, r.bytes) == (2, 200)


def test_an_overrun_kills_the_tool_and_says_so(tmp_path: Path) -> None:
    spec = FilebenchSpec("varmail", str(tmp_path), seconds=60, threads=1, files=10)
    with pytest.raises(iobench.IobenchError, match="overran its 0.5 s timeout"):
        iobench.filebench(spec, timeout=0.5)


def test_a_missing_binary_says_how_to_build_it(monkeypatch, tmp_path: Path) -> None:
    monkeypatch.setenv("QOELAB_STORAGE_IOBENCH", str(tmp_path / "absent"))
    with pytest.raises(iobench.IobenchError, match="storage-iobench is not built"):
        iobench.micro(MicroSpec(str(tmp_path), "read", 1, 1))
