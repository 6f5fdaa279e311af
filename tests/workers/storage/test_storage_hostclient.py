"""Swift's client on the host (``swift_client = host``): a real batch run through rclone in the link's
client namespace against the lab's Swift all-in-one, no guest; and what a failed run leaves."""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from qoelab.emulation.profile import LinkProfile
from qoelab.emulation.system import ENV_MARK, find_tool
from qoelab.emulation.topology import emulated_link
from qoelab.errors import ParameterError, QoelabError
from qoelab.storage import hostclient, mounts, targets
from qoelab.storage.swift import swift_target
from qoelab.storage.trial import StorageRun, run_storage


def _skip_reason() -> str | None:
    if os.geteuid() != 0:
        return "needs root (network namespaces, FUSE mounts)"
    for tool, package in (("swift-proxy-server", "swift-proxy"), ("swift-object-server", "swift-object"),
                          ("memcached", "memcached")):  # fmt: skip
        try:
            find_tool(tool, package)
        except QoelabError as err:
            return str(err)
    return hostclient.unusable() or None


_REASON = _skip_reason()
needs_host = pytest.mark.skipif(_REASON is not None, reason=_REASON or "")
MIB = 1 << 20


@pytest.fixture
def prefix() -> Iterator[str]:
    name = "shc" + secrets.token_hex(3)
    yield name
    targets.cleanup_leftovers(name)


def _ours(prefix: str) -> list[str]:
    """Processes still marked with the run's prefix (rclone, the namespace holder, servers)."""
    out = []
    for proc in psutil.process_iter():
        try:
            if (proc.environ().get(ENV_MARK) or "").startswith(prefix):
                out.append(f"{proc.pid} {proc.name()}")
        except (psutil.Error, OSError):
            continue
    return out


@pytest.mark.netns
@needs_host
def test_a_batch_read_through_rclone_on_the_host_crosses_the_link(prefix: str, tmp_path: Path) -> None:
    run = StorageRun(target="swift", family="batch", swift_client="host", form="default",
                     profile=LinkProfile.parse(rate="100mbit", delay="5ms"), file_size=MIB,
                     set_bytes=8 * MIB, threads=(1, 4), limit_s=30.0, warmup=False)  # fmt: skip
    out = run_storage(run, prefix, tmp_path / "run")
    assert out.guest["where"].startswith("host") and out.guest["accel"] is None, out.guest
    assert out.mount["fstype"] == "fuse.rclone" and out.mount["vfs_cache_mode"] == "off", out.mount
    assert [r["threads"] for r in out.rounds] == [1, 4]
    for r in out.rounds:
        assert r["failed"] == 0 and r["bytes"] == 8 * MIB, r
        # Nothing was served from a cache on this side: every byte came across the emulated link.
        assert r["amplification"] >= 1.0, r
        assert 0 < r["mib_s"] < 100 / 8 * 1e6 / MIB * 1.01, r  # under the 100 Mbit/s line rate
        assert r["ceiling_mib_s"] > 0 and r["cpu_client"] is not None, r
    # Each round started on a fresh mount (new connections, nothing kept by the kernel): rclone logs
    # one line per mount, the first mount's and one per round.
    mounts_logged = (tmp_path / "run" / "client" / "rclone.log").read_text().count("poll-interval")
    assert mounts_logged == 1 + len(out.rounds)
    assert _ours(prefix) == []


@pytest.mark.netns
@needs_host
def test_a_run_that_fails_after_the_mount_leaves_no_rclone_or_holder(prefix: str, tmp_path: Path) -> None:
    with emulated_link(LinkProfile.parse(rate="100mbit", delay="1ms"), prefix=prefix) as link:
        (tmp_path / "server").mkdir()
        popen = lambda argv, **kw: link.popen_in("s", argv, **kw)  # noqa: E731
        runner = lambda argv, **kw: link.run_in("s", argv, **kw)  # noqa: E731
        with swift_target(popen, runner, link.server_ip, tmp_path / "server", prefix) as target:
            with (
                pytest.raises(RuntimeError, match="the family failed"),
                hostclient.host_client(link, prefix, tmp_path / "client") as client,
            ):
                mounted = mounts.mount_swift(client.shell, target, home=client.home)
                assert mounted["fstype"] == "fuse.rclone"
                # The mount is the run's own: the host's mount table does not show it.
                assert mounts.MOUNT_POINT not in Path("/proc/self/mounts").read_text()
                assert any(p.endswith(" rclone") for p in _ours(prefix))
                raise RuntimeError("the family failed")
            assert not [p for p in _ours(prefix) if p.endswith((" rclone", " sleep"))]


def test_only_swift_and_the_micro_families_run_on_the_host() -> None:
    """The engine's and the job type's parameters refuse the rest, naming the field."""
    from qoelab.jobs.storage_bench import JOB, StorageBenchParams, requires_for

    profile = LinkProfile.parse(rate="100mbit")
    with pytest.raises(ParameterError, match="swift_client") as err:
        StorageRun(target="nfs", family="batch", swift_client="host", profile=profile)
    assert "got target nfs" in str(err.value)
    with pytest.raises(ParameterError, match="swift_client") as err:
        StorageRun(target="swift", family="varmail", swift_client="host", form="default", profile=profile)
    assert "batch, single, unit" in str(err.value)
    with pytest.raises(ParameterError, match="swift_client"):
        StorageRun(target="swift", family="batch", swift_client="laptop", form="default", profile=profile)
    with pytest.raises(ValueError, match="swift_client") as err:
        StorageBenchParams(target="iscsi", family="batch", swift_client="host")
    assert "got target iscsi" in str(err.value)
    host = StorageBenchParams(target="swift", family="batch", swift_client="host")
    assert {"storage.swift_host", "storage.swift"} <= requires_for(host)
    assert "storage.guest" not in requires_for(host)
    # NFS and iSCSI trials do not store it: their rows join the scopes of both Swift clients.
    assert "swift_client" not in JOB.stored_params(StorageBenchParams(target="nfs", family="batch"))
    assert JOB.stored_params(host)["swift_client"] == "host"
