"""apt-bdl, its driver and the storage targets, for real on loopback: nbdkit, tgtd and the helper.

Transfers stay small (nbdkit's rate filter caps the NBD target; iSCSI phases read a few MB) and
every wait is for a condition with a generous deadline. Each test names its processes with its
own prefix (``bdlt...``, not ``ql...``: a qoelab worker starting here cleans ``ql*``) and checks
that nothing carrying it is left.
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import psutil
import pytest

from qoelab.apt import bdl, targets
from qoelab.apt.bdl import BdlError, BlockDeviceLayer, Report, SessionLostError, SessionOpenError
from qoelab.emulation.cleanup import cleanup_leftovers, leftovers
from qoelab.emulation.system import find_tool, marked_env
from qoelab.errors import MissingToolError, QoelabError

REPO = Path(__file__).resolve().parents[3]
MB = 1_000_000
STRIPE = 131072
REQUEST = 8 * STRIPE
RATE = 400_000_000  # bit/s: the NBD target's cap, so a phase of 20 MB takes a fraction of a second


def _skip_reason() -> str | None:
    if os.geteuid() != 0:
        return "needs root (tgtd's control socket in /var/run/tgtd, cleanup by prefix)"
    for tool, package in (("nbdkit", "nbdkit"), ("tgtd", "tgt"), ("tgtadm", "tgt")):
        try:
            find_tool(tool, package)
        except QoelabError as err:
            return str(err)
    if not bdl.binary_path().exists():
        subprocess.run(["make", "-s", "-C", str(REPO / "workers" / "qoelab" / "apt" / "csrc")], check=False)
    return None if bdl.binary_path().exists() else bdl.NOT_BUILT


_REASON = _skip_reason()
pytestmark = [pytest.mark.netns, pytest.mark.skipif(_REASON is not None, reason=_REASON or "")]


@pytest.fixture
def prefix() -> Iterator[str]:
    name = "bdlt" + secrets.token_hex(3)
    yield name
    cleanup_leftovers(name)


def nothing_left(prefix: str) -> bool:
    return leftovers(prefix)["processes"] == []


def read_until(
    layer: BlockDeviceLayer, done: Callable[[Report], bool], timeout: float = 20.0
) -> list[Report]:
    """Reports up to and including the first that satisfies ``done``."""
    seen = []
    for report in layer.reports(until=time.monotonic() + timeout):
        seen.append(report)
        if done(report):
            return seen
    raise AssertionError(f"no report satisfied the condition within {timeout} s; last: {seen[-1:]}")


def check_counts(reports: list[Report], readahead: int) -> None:
    """Every piece is a whole stripe; completed requests and completed bytes agree.

    Bytes beyond the completed requests belong to requests still open: each has a piece in flight
    (so at most inflight / STRIPE of them) or is the one being issued, and each has at most a
    request's bytes done. A slow session holds a piece of every open request, so under load that
    is more than the read-ahead window."""
    for r in reports:
        assert all(b % STRIPE == 0 for b in r.bytes), r
        open_requests = r.inflight // STRIPE + 1
        assert r.requests * REQUEST <= r.total <= (r.requests + open_requests) * REQUEST, r
        assert 0 <= r.inflight <= readahead + STRIPE, r


def grow_from_two_to_all(layer: BlockDeviceLayer, phase_bytes: int, readahead: int) -> None:
    n = layer.sessions
    first = read_until(layer, lambda r: r.total >= phase_bytes)
    assert all(r.active == 2 and r.bytes[2:] == (0,) * (n - 2) for r in first), first[-1]
    assert all(b > 0 for b in first[-1].bytes[:2])
    mark = first[-1].total
    layer.set_active(n)
    second = read_until(layer, lambda r: all(b > 0 for b in r.bytes) and r.total >= mark + phase_bytes)
    # reports read while set_active waited for its answer still show sessions 2.. idle
    changed = next(i for i, r in enumerate(second) if r.active == n)
    assert all(r.bytes[2:] == (0,) * (n - 2) for r in second[:changed])
    assert all(b > 0 for b in second[-1].bytes[2:])
    check_counts(first + second, readahead)


def test_nbd_sessions_beyond_the_active_ones_read_only_after_set_active(prefix: str) -> None:
    port = targets.free_port()
    size = 64 << 20
    readahead = 32 * STRIPE
    options = dict(stripe=STRIPE, request=REQUEST, readahead=readahead, report_ms=50, prefix=prefix)
    with (
        targets.nbd_target(None, "127.0.0.1", port, size, prefix=prefix, rate_bps=RATE) as target,
        BlockDeviceLayer("nbd", target.uri, 4, 2, **options) as layer,
    ):
        assert target.uri == f"nbd://127.0.0.1:{port}"
        assert layer.ready["sessions"] == 4 and layer.size == size
        assert layer.ready["can_multi_conn"] is True  # nbdkit's memory plugin says so
        assert len(leftovers(prefix)["processes"]) == 2  # nbdkit and apt-bdl carry the marker
        grow_from_two_to_all(layer, 20 * MB, readahead)
        assert layer.bytes_per_session() == list(layer.latest.bytes)
        assert layer.close() == 0
        assert layer.close() == 0  # idempotent
    assert target.proc.poll() is not None and not target.workdir.exists()
    assert nothing_left(prefix)


def test_iscsi_sessions_beyond_the_active_ones_read_only_after_set_active(prefix: str) -> None:
    port, control = targets.free_port(), targets.free_control_port()
    readahead = 16 * STRIPE
    target = targets.iscsi_target(None, targets.run_local, "127.0.0.1", port, None, prefix, control)
    initiator = f"iqn.2026-11.org.qoelab:{prefix}-c"
    # tgtd's null store is not rate-limited: short reports keep each phase to a few tens of MB
    options = dict(stripe=STRIPE, request=REQUEST, readahead=readahead, report_ms=20, prefix=prefix)
    with target, BlockDeviceLayer("iscsi", target.uri, 3, 2, initiator=initiator, **options) as layer:
        assert target.uri == f"iscsi://127.0.0.1:{port}/iqn.2026-11.org.qoelab:{prefix}/1"
        assert layer.ready == {
            "event": "ready",
            "sessions": 3,
            "size": targets.TGT_NULL_SIZE,
            "protocol": "iscsi",
            "block_size": 512,
        }
        adm = [find_tool("tgtadm"), "-C", str(control), "--lld", "iscsi", "--tid", "1"]
        shown = targets.run_local([*adm, "--op", "show", "--mode", "conn"]).stdout
        assert shown.count("Initiator:") == 3  # one session per connection, each its own name
        assert f"{prefix}-c:0" in shown and f"{prefix}-c:2" in shown
        grow_from_two_to_all(layer, 8 * MB, readahead)
        assert layer.close() == 0
    sockets = [Path(f"/var/run/tgtd/socket.{control}"), Path(f"/var/run/tgtd/socket.{control}.lock")]
    assert not any(p.exists() for p in sockets)
    assert nothing_left(prefix)


def test_reads_wrap_at_the_end_of_the_device(prefix: str) -> None:
    size = 5 * STRIPE + 512  # the last piece before the wrap is 512 bytes
    port = targets.free_port()
    with (
        targets.nbd_target(None, "127.0.0.1", port, size, "null", prefix=prefix, rate_bps=RATE) as target,
        BlockDeviceLayer(
            "nbd", target.uri, 2, 2, request=2 * STRIPE, readahead=4 * STRIPE, prefix=prefix
        ) as layer,
    ):
        # ten laps without a read past the end (libnbd and nbdkit would refuse it: session_lost)
        last = read_until(layer, lambda r: r.total >= 10 * size)[-1]
        assert last.requests * 2 * STRIPE <= last.total <= (last.requests + 3) * 2 * STRIPE
        assert layer.close() == 0
    assert nothing_left(prefix)


def test_a_port_where_nothing_listens_is_one_sentence_at_once(prefix: str) -> None:
    port = targets.free_port()
    t0 = time.monotonic()
    with pytest.raises(SessionOpenError) as err:
        BlockDeviceLayer("nbd", f"nbd://127.0.0.1:{port}", 4, 1, prefix=prefix).start()
    assert time.monotonic() - t0 < 5
    assert str(err.value).startswith(f"cannot open a session to the NBD target at 127.0.0.1:{port}: ")
    assert "refused" in str(err.value) and err.value.opened == 0
    with pytest.raises(SessionOpenError, match=f"iSCSI target at 127.0.0.1:{port}: .*refused"):
        BlockDeviceLayer("iscsi", f"iscsi://127.0.0.1:{port}/iqn.2026-11.org.qoelab:x/1", 2, 1).start()
    assert nothing_left(prefix)


def test_an_address_that_never_answers_fails_within_the_connect_timeout(prefix: str) -> None:
    # A listener on loopback whose accept queue is full: the kernel drops further SYNs, so a
    # connect neither succeeds nor is refused (no traffic leaves this machine).
    import socket

    with socket.socket() as silent, socket.socket() as filler:
        silent.bind(("127.0.0.1", 0))
        silent.listen(0)
        filler.connect(silent.getsockname())  # the one connection backlog 0 allows, never accepted
        port = silent.getsockname()[1]
        t0 = time.monotonic()
        with pytest.raises(SessionOpenError, match=rf"NBD target at 127\.0\.0\.1:{port} did not answer"):
            BlockDeviceLayer(
                "nbd", f"nbd://127.0.0.1:{port}", 2, 1, connect_timeout_s=0.5, prefix=prefix
            ).start()
        assert time.monotonic() - t0 < 5
    assert nothing_left(prefix)


def test_a_target_that_accepts_fewer_sessions_says_how_many(prefix: str) -> None:
    port = targets.free_port()
    with targets.nbd_target(
        None, "127.0.0.1", port, 1 << 20, "null", prefix=prefix, max_connections=3
    ) as target:
        with pytest.raises(SessionOpenError) as err:
            BlockDeviceLayer("nbd", target.uri, 5, 1, prefix=prefix).start()
        assert err.value.opened == 3
        assert str(err.value).startswith(
            f"the NBD target at 127.0.0.1:{port} accepted 3 sessions and refused the 4th: "
        )
    assert nothing_left(prefix)


@pytest.mark.parametrize("protocol", ["nbd", "iscsi"])
def test_a_target_killed_mid_run_surfaces_as_a_lost_session(prefix: str, protocol: str) -> None:
    port = targets.free_port()
    if protocol == "nbd":
        target = targets.nbd_target(None, "127.0.0.1", port, 16 << 20, prefix=prefix, rate_bps=RATE)
    else:
        control = targets.free_control_port()
        target = targets.iscsi_target(None, None, "127.0.0.1", port, None, prefix, control)
    options = dict(readahead=8 * STRIPE, report_ms=20, prefix=prefix)
    with target, BlockDeviceLayer(protocol, target.uri, 2, 2, **options) as layer:
        read_until(layer, lambda r: r.bytes[0] > 0 and r.bytes[1] > 0)
        target.proc.kill()
        with pytest.raises(SessionLostError) as err:
            read_until(layer, lambda r: False)
        assert err.value.session in (0, 1)
        proto = "NBD" if protocol == "nbd" else "iSCSI"
        assert str(err.value).startswith(
            f"session {err.value.session} to the {proto} target at 127.0.0.1:{port}"
        )
        assert layer.latest is not None and layer.latest.total > 0  # the last report was read
        with pytest.raises(SessionLostError):  # it stays failed
            layer.set_active(1)
        assert layer.close() == bdl.EXIT_LOST
    assert nothing_left(prefix)


def test_sigterm_ends_the_helper_at_once_and_it_dies_with_its_parent(prefix: str) -> None:
    port = targets.free_port()
    with targets.nbd_target(None, "127.0.0.1", port, 8 << 20, "null", prefix=prefix, rate_bps=RATE) as target:
        argv = [str(bdl.binary_path()), "--protocol", "nbd", "--uri", target.uri, "--sessions", "2"]
        argv += ["--active", "2", "--readahead", str(4 * STRIPE), "--tag", prefix]
        proc = subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=marked_env(prefix)
        )
        assert json.loads(proc.stdout.readline())["event"] == "ready"
        proc.terminate()
        assert proc.wait(timeout=5) == 0
        assert proc.stdout.read().rstrip().endswith('{"event":"bye"}')
        proc.stdin.close()
        proc.stdout.close()
    # A fresh target: nbdkit 1.32 may abort (raw_send_socket: Assertion `sock >= 0') when a client
    # resets its connection with replies in flight, which is what closing at once does.
    port = targets.free_port()
    with targets.nbd_target(None, "127.0.0.1", port, 8 << 20, "null", prefix=prefix, rate_bps=RATE) as target:
        # A parent that is SIGKILLed takes the helper with it (PR_SET_PDEATHSIG), stdin or not.
        parent = textwrap.dedent(f"""
            import sys, time
            from qoelab.apt.bdl import BlockDeviceLayer
            layer = BlockDeviceLayer("nbd", {target.uri!r}, 2, 1, readahead={4 * STRIPE}, prefix={prefix!r})
            layer.start()
            print(layer.pid, flush=True)
            time.sleep(60)
        """)
        child = subprocess.Popen([sys.executable, "-c", parent], stdout=subprocess.PIPE, text=True)
        helper = int(child.stdout.readline())
        child.kill()
        child.wait()
        child.stdout.close()
        deadline = time.monotonic() + 10
        while psutil.pid_exists(helper) and psutil.Process(helper).status() != psutil.STATUS_ZOMBIE:
            assert time.monotonic() < deadline, "apt-bdl outlived its parent"
            time.sleep(0.05)
    assert nothing_left(prefix)


@pytest.mark.parametrize(
    ("args", "option"),
    [
        (["--sessions", "0"], "--sessions"),
        (["--active", "9"], "--active"),
        (["--stripe", "1000"], "--stripe"),
        (["--readahead", "4096", "--stripe", "8192"], "--readahead"),
        (["--report-ms", "soon"], "--report-ms"),
        (["--uri", "iscsi://h/iqn.x/1"], "--uri"),
        (["--bogus"], "--bogus"),
        (["extra"], "extra"),
        (["--tag"], "--tag"),
    ],
)
def test_bad_helper_options_exit_2_naming_the_option(args: list[str], option: str) -> None:
    base = {"--protocol": "nbd", "--uri": "nbd://127.0.0.1:1", "--sessions": "4", "--active": "2"}
    argv = [str(bdl.binary_path())]
    for key, value in base.items():
        if key not in args:
            argv += [key, value]
    out = subprocess.run(argv + args, capture_output=True, text=True, timeout=10, stdin=subprocess.DEVNULL)
    assert out.returncode == 2
    assert out.stdout == ""
    assert out.stderr.startswith(f"apt-bdl: {option}: ") and out.stderr.count("\n") == 1, out.stderr


def test_missing_required_options_and_the_driver_sentence(tmp_path: Path) -> None:
    out = subprocess.run(
        [str(bdl.binary_path()), "--protocol", "nbd"], capture_output=True, text=True, timeout=10
    )
    assert (out.returncode, out.stderr) == (2, "apt-bdl: --uri: required\n")
    log = tmp_path / "bdl.log"
    log.write_text("an earlier run\n")
    with pytest.raises(BdlError) as err:
        BlockDeviceLayer("nbd", "nbd://127.0.0.1:1", 2, 1, stripe=1000, log_path=log).start()
    assert str(err.value) == (
        "the block-device layer rejected its arguments: --stripe: must be a multiple of 512, got 1000"
    )
    assert log.read_text().endswith("apt-bdl: --stripe: must be a multiple of 512, got 1000\n")


def test_stdin_commands_and_eof(prefix: str) -> None:
    port = targets.free_port()
    with targets.nbd_target(None, "127.0.0.1", port, 8 << 20, "null", prefix=prefix, rate_bps=RATE) as target:
        argv = [str(bdl.binary_path()), "--protocol", "nbd", "--uri", target.uri, "--sessions", "3"]
        argv += ["--active", "1", "--readahead", str(4 * STRIPE), "--report-ms", "1000", "--tag", prefix]
        proc = subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=marked_env(prefix)
        )
        assert json.loads(proc.stdout.readline())["event"] == "ready"
        proc.stdin.write("active 4\nfrobnicate\nactive 3\n")
        proc.stdin.close()  # EOF: quit
        events = [json.loads(line) for line in proc.stdout if '"report"' not in line]
        assert proc.wait(timeout=15) == 0
    assert events == [
        {"event": "bad_command", "line": "active 4"},
        {"event": "bad_command", "line": "frobnicate"},
        {"event": "active", "active": 3},
        {"event": "bye"},
    ]
    assert nothing_left(prefix)


def test_targets_that_cannot_start_say_why(prefix: str, tmp_path: Path) -> None:
    port, control = targets.free_port(), targets.free_control_port()
    log = tmp_path / "nbdkit.log"
    with targets.nbd_target(None, "127.0.0.1", port, 1 << 20, "null", prefix=prefix, log_path=log) as first:
        with pytest.raises(
            targets.TargetError, match=f"nbdkit could not serve on 127.0.0.1:{port}: .*in use"
        ):
            targets.nbd_target(None, "127.0.0.1", port, 1 << 20, "null", prefix=prefix)
        with pytest.raises(
            targets.TargetError, match=f"tgtd could not serve iSCSI on 127.0.0.1:{port}: .*in use"
        ):
            targets.iscsi_target(None, None, "127.0.0.1", port, None, prefix, control)
        assert first.proc.poll() is None
        in_use = f"control port {control} is in use by another tgtd"
        with (
            targets.iscsi_target(None, None, "127.0.0.1", targets.free_port(), None, prefix, control),
            pytest.raises(targets.TargetError, match=in_use),
        ):
            targets.iscsi_target(None, None, "127.0.0.1", targets.free_port(), None, prefix, control)
    assert log.exists()  # a caller's log is kept
    assert not Path(f"/var/run/tgtd/socket.{control}").exists()
    assert nothing_left(prefix)


def test_missing_programs_name_their_debian_package(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    def no_tool(name: str, package: str | None = None) -> str:
        raise MissingToolError(name, package)

    monkeypatch.setattr(targets, "find_tool", no_tool)
    with pytest.raises(
        MissingToolError, match="nbdkit is not installed; install the Debian package 'nbdkit'"
    ):
        targets.nbd_target(None, "127.0.0.1", 1, 1 << 20, prefix="bdltmissing")
    with pytest.raises(MissingToolError, match="tgtd is not installed; install the Debian package 'tgt'"):
        targets.iscsi_target(None, None, "127.0.0.1", 1, None, "bdltmissing", 20000)
    monkeypatch.setenv(bdl.ENV_BINARY, str(tmp_path / "apt-bdl"))
    with pytest.raises(BdlError, match=r"apt-bdl is not built; run `make deps`"):
        BlockDeviceLayer("nbd", "nbd://127.0.0.1:1", 1, 1).start()


@pytest.mark.parametrize("protocol", ["nbd", "iscsi"])
def test_a_target_that_stops_answering_surfaces_as_a_lost_session(prefix: str, protocol: str) -> None:
    # SIGSTOP: the target's kernel still ACKs, so TCP never reports anything; only the missing
    # replies show it (a silent path looks the same).
    port = targets.free_port()
    if protocol == "nbd":
        target = targets.nbd_target(None, "127.0.0.1", port, 16 << 20, prefix=prefix, rate_bps=RATE)
    else:
        target = targets.iscsi_target(
            None, None, "127.0.0.1", port, None, prefix, targets.free_control_port()
        )
    options = dict(readahead=8 * STRIPE, report_ms=20, prefix=prefix, stall_timeout_s=1.0)
    with target, BlockDeviceLayer(protocol, target.uri, 2, 2, **options) as layer:
        read_until(layer, lambda r: r.bytes[0] > 0 and r.bytes[1] > 0)
        target.proc.send_signal(signal.SIGSTOP)
        try:
            with pytest.raises(
                SessionLostError, match=r"no read completed for \d+\.\d s with \d+ bytes outstanding"
            ):
                read_until(layer, lambda r: False)
        finally:
            target.proc.send_signal(signal.SIGCONT)
        assert layer.close() == bdl.EXIT_LOST
    assert nothing_left(prefix)
