"""The storage benchmark's targets for real across an emulated link: nfs-ganesha, tgtd with a
file-backed LUN and a Swift all-in-one in the server namespace, checked from the client namespace
with libnfs, libiscsi and python-swiftclient. Each test uses its own prefix (``stt...``, not
``ql...``) and checks that nothing carrying it is left once the target has stopped."""

from __future__ import annotations

import functools
import os
import secrets
from collections.abc import Iterator
from pathlib import Path

import pytest

from qoelab.emulation.profile import LinkProfile
from qoelab.emulation.system import find_tool
from qoelab.emulation.topology import emulated_link
from qoelab.errors import QoelabError
from qoelab.storage import targets
from qoelab.storage.targets import TargetError


def _skip_reason() -> str | None:
    if os.geteuid() != 0:
        return "needs root (network namespaces, mounts, tgtd's control socket)"
    for tool, package in (
        ("ganesha.nfsd", "nfs-ganesha"), ("nfs-ls", "libnfs-utils"), ("tgtd", "tgt"),
        ("iscsi-readcapacity16", "libiscsi-bin"), ("swift-proxy-server", "swift-proxy"),
        ("swift-object-server", "swift-object"), ("memcached", "memcached"), ("swift", "python3-swiftclient"),
    ):  # fmt: skip
        try:
            find_tool(tool, package)
        except QoelabError as err:
            return str(err)
    return None


_REASON = _skip_reason()
pytestmark = [pytest.mark.netns, pytest.mark.skipif(_REASON is not None, reason=_REASON or "")]


@pytest.fixture
def prefix() -> Iterator[str]:
    name = "stt" + secrets.token_hex(3)
    yield name
    targets.cleanup_leftovers(name)


@pytest.fixture
def link(prefix: str) -> Iterator:
    with emulated_link(LinkProfile.parse(rate="100mbit", delay="2ms"), prefix=prefix) as built:
        yield built


def sides(link):
    return functools.partial(link.popen_in, "s"), functools.partial(link.run_in, "s")


def client(link, *argv: str):
    return link.run_in("c", list(argv), timeout=30)


@pytest.mark.parametrize(
    ("backing", "expected"),
    [("auto", "ext4 image"), ("fuse2fs", "ext4 image (fuse2fs mount)"), ("directory", "directory")],
)
def test_nfs_serves_a_file_written_through_the_export_to_the_client(
    link, prefix, tmp_path: Path, backing: str, expected: str
) -> None:
    popen, run = sides(link)
    local = tmp_path / "hello.txt"
    local.write_text("written through NFS\n")
    with targets.nfs_target(popen, run, link.server_ip, tmp_path, prefix, backing=backing) as nfs:
        put = client(link, "nfs-cp", str(local), nfs.libnfs_url("hello.txt"))
        assert put.returncode == 0, put.stderr
        listing = client(link, "nfs-ls", nfs.libnfs_url())
        assert listing.returncode == 0 and "hello.txt" in listing.stdout, listing
        back = client(link, "nfs-cat", nfs.libnfs_url("hello.txt"))
        assert back.stdout == "written through NFS\n"
        assert (nfs.export_dir / "hello.txt").read_text() == "written through NFS\n"
        assert nfs.config["version"].startswith("V4.") and "Graceless = true;" in nfs.config["config_text"]
        assert nfs.config["backing"].startswith(expected), nfs.config
        assert os.path.ismount(nfs.export_dir) == (backing != "directory")
        assert targets.find_servers(prefix)
    assert targets.find_servers(prefix) == []
    assert not list(tmp_path.glob(f"qoelab-{prefix}-nfs-*"))


def test_iscsi_serves_a_file_backed_lun_with_the_thesis_block_size(link, prefix, tmp_path: Path) -> None:
    popen, run = sides(link)
    size = 64 << 20
    with targets.iscsi_target(popen, run, link.server_ip, tmp_path, prefix, size_bytes=size) as lun:
        capacity = client(link, "iscsi-readcapacity16", lun.endpoint)
        assert capacity.returncode == 0, capacity.stderr
        assert "LOGICALBLOCKLENGTHINBYTES:1024" in capacity.stdout.replace(" ", "")
        assert f"Totalsize:{size}" in capacity.stdout.replace(" ", ""), capacity.stdout
        inquiry = client(link, "iscsi-inq", lun.endpoint)
        assert inquiry.returncode == 0, inquiry.stderr
        assert lun.config["target_params"]["MaxRecvDataSegmentLength"] == 65536
        assert lun.config["target_params"]["MaxBurstLength"] == 16777215
        assert "MaxBurstLength" in lun.config["thesis_differences"]
        assert "rdwr" in lun.config["target_show"] and lun.config["backing_store"] == "rdwr"
    assert targets.find_servers(prefix) == []
    assert not list(tmp_path.glob(f"qoelab-{prefix}-iscsi-*"))


def test_swift_stores_and_returns_an_object_through_tempauth(link, prefix, tmp_path: Path) -> None:
    popen, run = sides(link)
    local, back = tmp_path / "obj.bin", tmp_path / "back.bin"
    local.write_bytes(os.urandom(200_000))
    with targets.swift_target(popen, run, link.server_ip, tmp_path, prefix) as swift:
        up = client(link, *swift.client_argv("upload", "--object-name", "obj.bin", "bench", str(local)))
        assert up.returncode == 0, up.stderr
        down = client(link, *swift.client_argv("download", "bench", "obj.bin", "-o", str(back)))
        assert down.returncode == 0 and back.read_bytes() == local.read_bytes(), down.stderr
        listing = client(link, *swift.client_argv("list", "bench"))
        assert listing.stdout.split() == ["obj.bin"]
        assert swift.config["versions"]["swift"].startswith("2.") and swift.config["replicas"] == 1
        assert "egg:swift#tempauth" in swift.config["configs"]["proxy-server.conf"]
        assert targets.find_servers(prefix)
    assert targets.find_servers(prefix) == []
    assert not list(tmp_path.glob(f"qoelab-{prefix}-swift-*"))


def test_a_ganesha_config_it_rejects_fails_with_its_log_tail(link, prefix, tmp_path: Path) -> None:
    popen, run = sides(link)
    bogus = {"Access_Type": "Bogus"}
    with (
        pytest.raises(TargetError, match=r"nfs-ganesha rejected its config: .*Unknown token \(Bogus\)"),
        targets.nfs_target(popen, run, link.server_ip, tmp_path, prefix, export_options=bogus),
    ):
        pass
    assert targets.find_servers(prefix) == []
    assert not list(tmp_path.glob(f"qoelab-{prefix}-nfs-*")) and targets.cleanup_leftovers(prefix) == []


def test_swift_servers_that_cannot_bind_fail_with_their_log_tail(link, prefix, tmp_path: Path) -> None:
    popen, run = sides(link)
    with (
        pytest.raises(TargetError, match=r"Swift .*-server \(exit code .*[Cc]annot assign requested address"),
        targets.swift_target(popen, run, "198.18.0.99", tmp_path, prefix),  # not the namespace's address
    ):
        pass
    assert targets.find_servers(prefix) == []


def test_bad_iscsi_parameters_are_refused_naming_the_field(prefix, tmp_path: Path) -> None:
    bursts = {"first_burst_length": 1 << 20, "max_burst_length": 65536}
    with (
        pytest.raises(QoelabError, match="first_burst_length"),
        targets.iscsi_target(None, None, "127.0.0.1", tmp_path, prefix, **bursts),
    ):
        pass
    with (
        pytest.raises(QoelabError, match="block_size"),
        targets.iscsi_target(None, None, "127.0.0.1", tmp_path, prefix, block_size=1000),
    ):
        pass
    assert not list(tmp_path.glob(f"qoelab-{prefix}-iscsi-*"))


def test_cleanup_by_prefix_ends_a_killed_trials_servers_and_mounts(link, prefix, tmp_path: Path) -> None:
    popen, run = sides(link)
    running = targets.nfs_target(popen, run, link.server_ip, tmp_path, prefix)  # never exited: "killed"
    nfs = running.__enter__()
    assert targets.find_servers(prefix)
    removed = targets.cleanup_leftovers(prefix, roots=(tmp_path,))
    assert any("ganesha" in x for x in removed) and not nfs.directory.exists(), removed
    assert targets.find_servers(prefix) == [] and not os.path.ismount(nfs.export_dir)
