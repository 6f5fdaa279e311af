"""``qoelab storage bench`` for real, with the client guest (one lane runs the guest tests one after
another: tests/fixtures/lanes.py): a metadata run prints per-operation times tied to the RTT, with the
link's packets and bytes, and a run killed while the guest boots leaves nothing after the cleanup."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from fixtures.storage_guest import storage_bench as bench

pytestmark = [pytest.mark.slow, pytest.mark.netns]


def test_a_metadata_run_ties_operation_times_to_the_rtt(storage_guest_image, tmp_path: Path) -> None:
    pcap = tmp_path / "link.pcap"
    res = bench("--target", "nfs", "--family", "metadata", "--rtt", "40ms", "--n", "2",
                "--capture", str(pcap), "--json")  # fmt: skip
    assert res.returncode == 0, res.stderr[-2000:]
    data = json.loads(res.stdout)
    # the capture at the link names each kind's NFSv4 operations (one per file at least)
    ops = {o["op"]: o["request_ops"] for o in data["ops"]}
    assert pcap.stat().st_size > 0 and "CREATE x2" in ops["mkdir"] and "OPEN x2" in ops["touch"], ops
    assert "READDIR" in ops["ls"] and "REMOVE x2" in ops["unlink"] and "REMOVE x2" in ops["rmdir"], ops
    assert data["target"] == "nfs" and data["rtt_ms"] == pytest.approx(40.0)
    assert [o["op"] for o in data["ops"]] == ["mkdir", "touch", "ls", "unlink", "rmdir"]
    for op in data["ops"]:
        assert op["failed"] == 0 and op["packets"] > 0 and op["bytes"] > 0, op
        assert op["per_op_ms"] >= 0.9 * 40.0, op  # a synchronous exchange across the link each
    assert (
        data["mount"]["fstype"] == "nfs4"
        and data["guest"]["tcp"]["sysctl"]["tcp_congestion_control"] == "cubic"
    )
    assert data["guest"]["start"] == "snapshot" and data["guest"]["snapshot"]["kind"] == "headless", data[
        "guest"
    ]


def test_a_killed_run_leaves_nothing_after_cleanup(storage_guest_image) -> None:
    """SIGKILL while the guest boots: the worker's cleanup by prefix removes the guest, the targets'
    servers and mounts, the namespaces and the ssh sockets."""
    import signal
    import tempfile
    import time

    from qoelab.emulation.cleanup import leftovers
    from qoelab.runner import cleanup_prefix
    from qoelab.storage.targets import find_servers
    from qoelab.vm.guest import find_qemu_processes

    before = set(os.listdir("/run/netns")) if os.path.isdir("/run/netns") else set()
    # cold: a boot, killed in the middle (a snapshot start is over in seconds)
    argv = [sys.executable, "-m", "qoelab.cli", "storage", "bench", "--target", "nfs", "--rtt", "10ms",
            "--guest-start", "cold"]  # fmt: skip
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    prefix = ""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        new = sorted(n for n in set(os.listdir("/run/netns")) - before if n.startswith("qsb"))
        if new and find_qemu_processes(new[0][:-1]):
            prefix = new[0][:-1]  # the namespaces are <prefix>c and <prefix>s
            break
        time.sleep(0.2)
    assert prefix, "the run never reached the guest's boot"
    assert find_servers(prefix), "ganesha should be serving by then"
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    cleanup_prefix(prefix)
    assert not find_qemu_processes(prefix) and not find_servers(prefix)
    assert not any(leftovers(prefix).values()), leftovers(prefix)
    assert not list(Path(tempfile.gettempdir()).glob(f"qssh-{prefix}*"))
    assert not [m for m in Path("/proc/mounts").read_text().splitlines() if prefix in m]
