"""``qoelab storage bench``: bad options name the field and bound without booting anything; a real
metadata run prints per-operation times tied to the RTT, with the link's packets and bytes."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from qoelab.vm.image import MissingImageError, load_image


def bench(*args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "qoelab.cli", "storage", "bench", *args]
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--target", "ceph"], "target: must be one of nfs, iscsi, swift"),
        (["--target", "nfs", "--family", "unit"], "family: must be one of metadata"),
        (["--target", "nfs", "--n", "0"], "meta_n: each n must be 1..10000"),
        (["--target", "nfs", "--n", "ten"], "--n: takes comma-separated counts"),
        (
            ["--target", "nfs", "--scenario", "lan"],
            "scenario: must be one of ideal, latency, loss, realistic",
        ),
        (["--target", "nfs", "--rtt", "fast"], "--rtt/--loss/--jitter"),
    ],
)
def test_bad_options_are_refused_naming_the_field(args: list[str], words: str) -> None:
    res = bench(*args, timeout=60)
    assert res.returncode == 2 and words in res.stderr, res.stderr


@pytest.mark.slow
@pytest.mark.netns
def test_a_metadata_run_ties_operation_times_to_the_rtt() -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root (namespaces, the guest's tap)")
    try:
        if not (load_image().directory / "root-key").is_file():
            pytest.skip("the guest image predates the storage client: run make vm-image")
    except MissingImageError as err:
        pytest.skip(f"no guest image: run make vm-image ({err})")
    res = bench("--target", "nfs", "--family", "metadata", "--rtt", "40ms", "--n", "2", "--json")
    assert res.returncode == 0, res.stderr[-2000:]
    data = json.loads(res.stdout)
    assert data["target"] == "nfs" and data["rtt_ms"] == pytest.approx(40.0)
    assert [o["op"] for o in data["ops"]] == ["mkdir", "touch", "ls", "unlink", "rmdir"]
    for op in data["ops"]:
        assert op["failed"] == 0 and op["packets"] > 0 and op["bytes"] > 0, op
        assert op["per_op_ms"] >= 0.9 * 40.0, op  # a synchronous exchange across the link each
    assert (
        data["mount"]["fstype"] == "nfs4"
        and data["guest"]["tcp"]["sysctl"]["tcp_congestion_control"] == "cubic"
    )
