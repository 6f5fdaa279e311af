"""Enhancement 1 as a BPF sock_ops program (qoelab.thinclient.bpf): it loads, attaches, acts on the
sender's sockets over an emulated link, and leaves nothing behind (docs/thinclient-bpf.md)."""

from __future__ import annotations

import json
import os
import secrets
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from qoelab import jobs
from qoelab.errors import ParameterError
from qoelab.jobtype import TrialContext
from qoelab.params import validate_params
from qoelab.thinclient import replay
from qoelab.thinclient.bpf import loader

pytestmark = pytest.mark.netns
JOB = jobs.get("thinclient_tcp")
JIFFY_US = 4_000  # the RTO is kept in jiffies; CONFIG_HZ=250 here, and 4 ms covers any HZ >= 250


@pytest.fixture(autouse=True)
def _root() -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root to load BPF programs and create network namespaces")
    if not loader.object_path().exists():
        pytest.fail(f"{loader.object_path()} is not built (make deps)")
    ok, reason = loader.available()
    if not ok:
        pytest.fail(f"the kernel cannot run the program: {reason}")


def pins(prefix: str) -> list[str]:
    return sorted(p.name for p in loader.BPFFS.glob(f"qoelab-{prefix}*"))


def cgroups(prefix: str) -> list[str]:
    root = loader.cgroup2_root()
    return sorted(p.name for p in root.glob(f"qoelab-{prefix}*")) if root else []


def attached(cgroup: Path) -> list[dict]:
    out = subprocess.run(["bpftool", "-j", "cgroup", "show", str(cgroup)], capture_output=True, text=True)
    return json.loads(out.stdout or "[]") if out.returncode == 0 else []


def loopback_sink() -> tuple[socket.socket, threading.Thread]:
    """A listening socket on 127.0.0.1 whose one connection is read to its end in a thread."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)

    def drain() -> None:
        conn, _ = srv.accept()
        with conn:
            while conn.recv(65_536):
                pass

    thread = threading.Thread(target=drain, daemon=True)
    thread.start()
    return srv, thread


def test_loads_attaches_counts_a_loopback_connection_and_leaves_nothing() -> None:
    prefix = "qre" + secrets.token_hex(3)
    srv, thread = loopback_sink()
    port = srv.getsockname()[1]
    code = (
        "import socket,sys,time\ns=socket.create_connection(('127.0.0.1',int(sys.argv[1])))\n"
        "for _ in range(30):\n s.sendall(b'x'*20000); time.sleep(0.002)\ns.close()"
    )
    with loader.rto_ewma(prefix, port, base_us=20_000) as handle:
        assert handle.cgroup.is_dir() and handle.prog.exists()
        assert [row["name"] for row in attached(handle.cgroup)] == ["rto_ewma"]
        assert pins(prefix) == [f"qoelab-{prefix}-maps", f"qoelab-{prefix}-rto"]
        subprocess.run([*loader.sender_prefix(handle.cgroup), sys.executable, "-c", code, str(port)],
                       check=True, timeout=30)  # fmt: skip
        got = loader.counters(handle)
        conns = loader.connections(handle)
        cgroup = handle.cgroup
    srv.close()
    thread.join(timeout=5)
    assert got["sockets"] == 1 and got["samples"] > 0 and got["floor_updates"] > 0
    assert got["setsockopt_failures"] == 0 and got["cb_flag_failures"] == 0
    [row] = conns.values()
    assert row["samples"] == got["samples"] and row["floor_us"] >= 20_000
    # Gone: no pinned program or map, no cgroup, so nothing can be attached any more.
    assert not pins(prefix) and not cgroups(prefix) and not cgroup.exists()


def test_other_ports_are_not_touched() -> None:
    prefix = "qre" + secrets.token_hex(3)
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)
    port = srv.getsockname()[1]
    code = (
        "import socket,sys\ns=socket.create_connection(('127.0.0.1',int(sys.argv[1])))\ns.sendall(b'x'*9000)"
    )
    with loader.rto_ewma(prefix, port + 1 if port < 65_535 else port - 1) as handle:
        subprocess.run([*loader.sender_prefix(handle.cgroup), sys.executable, "-c", code, str(port)],
                       check=True, timeout=30)  # fmt: skip
        got = loader.counters(handle)
    srv.close()
    assert got["sockets"] == 0 and got["samples"] == 0


def test_job_over_an_emulated_link_lowers_and_holds_the_floor(tmp_path: Path) -> None:
    params = validate_params(
        JOB.params, {"pairs": 4, "duration": "6s", "rto_ewma": True, "rto_ewma_floor": "20ms"}
    )
    ctx = TrialContext(trial_id="t", workdir=tmp_path, prefix="qrj" + secrets.token_hex(3))
    result = JOB.run(params, ctx)
    s = result.summary
    assert s["ewma_samples"] > 0 and s["ewma_floor_updates"] > 0
    assert s["ewma_setsockopt_failures"] == 0 and s["ewma_sockets"] == 4
    assert "ewma_resets" in s
    assert result.provenance["rto_ewma"]["counters"]["samples"] == s["ewma_samples"]
    info = replay.tcp_info(tmp_path / "run" / "replay")
    rows = [x.values for x in result.samples if x.kind == "connection"]
    assert len(rows) == 4
    for row in rows:
        conn = info[row["conn"]]
        assert row["ewma_samples"] > 0 and row["ewma_floor_us"] >= 20_000
        # The floor the program set took hold: Linux's RTO left srtt + 200 ms (its default rto_min)
        # and stays at or above srtt + the lowest floor the program may set.
        assert conn["rto_us"] < conn["rtt_us"] + 200_000
        assert conn["rto_us"] + JIFFY_US >= conn["rtt_us"] + 20_000
    assert not pins(ctx.prefix) and not cgroups(ctx.prefix)


def test_at_the_default_floor_the_program_can_only_watch(tmp_path: Path) -> None:
    """rto_ewma_floor = 200 ms (Linux's own rto_min, and the most TCP_BPF_RTO_MIN accepts): no floor
    changes, so Linux's RTO keeps its srtt + 200 ms; the wanted floors above 200 ms are counted."""
    params = validate_params(JOB.params, {"pairs": 2, "duration": "4s", "rto_ewma": True})
    ctx = TrialContext(trial_id="t", workdir=tmp_path, prefix="qrd" + secrets.token_hex(3))
    s = JOB.run(params, ctx).summary
    assert s["ewma_samples"] > 0 and s["ewma_floor_updates"] == 0 and s["ewma_setsockopt_failures"] == 0
    assert s["ewma_kernel_below"] == s["ewma_floor_capped"]
    for conn in replay.tcp_info(tmp_path / "run" / "replay").values():
        assert conn["rto_us"] + JIFFY_US >= conn["rtt_us"] + 200_000


def test_a_raised_floor_does_not_raise_the_rto() -> None:
    """The kernel fact behind docs/thinclient-bpf.md: the floor (icsk_rto_min, here set with the
    TCP_RTO_MIN_US socket option, the same field TCP_BPF_RTO_MIN sets) is only what rttvar decays
    to; raising it again leaves the RTO where it fell."""
    tcp_rto_min_us = 45
    srv, thread = loopback_sink()
    with socket.create_connection(srv.getsockname()) as s:

        def rto_after(n: int) -> int:
            for _ in range(n):
                s.sendall(b"x" * 3000)
                time.sleep(0.001)
            return struct.unpack_from("I", s.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 104), 8)[0]

        try:
            s.setsockopt(socket.IPPROTO_TCP, tcp_rto_min_us, 200_000)
        except OSError:
            pytest.skip("this kernel has no TCP_RTO_MIN_US socket option (6.15+) to show it with")
        assert rto_after(5) >= 200_000
        s.setsockopt(socket.IPPROTO_TCP, tcp_rto_min_us, 10_000)
        low = rto_after(200)
        assert low < 100_000
        s.setsockopt(socket.IPPROTO_TCP, tcp_rto_min_us, 200_000)
        assert rto_after(200) < 100_000  # not back to >= 200 ms
    srv.close()
    thread.join(timeout=5)


def test_refuses_route_rto_min_and_says_why() -> None:
    params = validate_params(JOB.params, {"pairs": 1, "duration": "2s", "rto_ewma": True, "rto_min": "300ms"})
    with pytest.raises(ParameterError) as err:
        JOB.run(params, TrialContext(trial_id="t", workdir=Path("/tmp"), prefix="qrr" + secrets.token_hex(3)))
    assert err.value.field == "rto_ewma" and "rto_min" in str(err.value)


def test_a_killed_owner_leaves_nothing_after_cleanup(tmp_path: Path) -> None:
    from qoelab.runner import cleanup_prefix  # as a restarted worker cleans up

    prefix = "qrk" + secrets.token_hex(3)
    marker = tmp_path / "attached"
    script = (
        "import sys, time; from pathlib import Path; from qoelab.thinclient.bpf import loader\n"
        f"with loader.rto_ewma('{prefix}', 47100):\n"
        f"    Path('{marker}').touch(); time.sleep(120)\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", script], start_new_session=True)
    try:
        deadline = time.monotonic() + 30
        while not marker.exists():
            assert proc.poll() is None, "the owner ended before it could be killed"
            assert time.monotonic() < deadline, "the program was not attached within 30 s"
            time.sleep(0.05)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    assert pins(prefix) and cgroups(prefix)  # the kill left the program pinned and attached ...
    removed = cleanup_prefix(prefix)
    assert any("cgroup" in r for r in removed) and any("bpf pin" in r for r in removed)
    assert not pins(prefix) and not cgroups(prefix)  # ... and the cleanup left nothing
