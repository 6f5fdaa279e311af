"""``qoelab storage bench``: bad options name the field and bound without booting anything (the real
runs, which boot the client guest, are in test_storage_cli_guest.py)."""

from __future__ import annotations

import pytest

from fixtures.storage_guest import storage_bench as bench


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--target", "ceph"], "target: Input should be 'nfs', 'iscsi' or 'swift'"),
        (["--target", "nfs", "--family", "fio"], "family: Input should be 'metadata', 'batch', 'single'"),
        (["--target", "nfs", "--n", "0"], "meta_n: Input should be greater than or equal to 1"),
        (["--target", "nfs", "--n", "ten"], "--n: takes comma-separated counts"),
        (
            ["--target", "nfs", "--scenario", "lan"],
            "scenario: must be one of ideal, latency, loss, realistic",
        ),
        (["--target", "nfs", "--rtt", "fast"], "rtt: cannot read 'fast' as a duration"),
        (
            ["--target", "nfs", "--family", "batch", "--file-size", "1000"],
            "file_size: must be 512 B..1 GiB (a multiple",
        ),
        (["--target", "swift", "--family", "batch", "--form", "direct"], "form: Swift through a FUSE client"),
        (
            ["--target", "nfs", "--family", "batch", "--threads", "1,100"],
            "threads: Input should be less than or",
        ),
        (["--target", "nfs", "--disk-rate", "0/5"], "disk_rate: read rate must be 1..100000 MiB/s, got 0"),
        (
            ["--target", "nfs", "--family", "unit", "--units", "4kb,32mb"],
            "unit: must be at most file_size (16777216 B)",
        ),
        (
            ["--target", "nfs", "--family", "unit", "--units", "4kb,0"],
            "units: each unit must be 512 B..1 GiB",
        ),
        (
            ["--target", "nfs", "--family", "postmark", "--transactions", "lots"],
            "transactions: Input should be a valid integer",
        ),
        (["--target", "nfs", "--family", "varmail", "--seconds", "0s"], "seconds: must be at least 1s"),
    ],
)
def test_bad_options_are_refused_naming_the_field(args: list[str], words: str) -> None:
    res = bench(*args, timeout=60)
    assert res.returncode == 2 and words in res.stderr, res.stderr
