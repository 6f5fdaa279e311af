"""The storage client in the QEMU guest (TCG here) behind the emulated link: it mounts the NFS target
through the link (its metadata operations take at least a round trip each; a short varmail and a
small PostMark run on it), the iSCSI target (ext4 on the LUN, a chosen scheduler, a microbenchmark
round, a single-file read and write and their amplification) and Swift through rclone (a write round in
overwrite mode, read back); one guest for all of it (restored from the host's saved state), skipped
without the image (``make vm-image``)."""

from __future__ import annotations

import dataclasses
import functools
import secrets
import time
from pathlib import Path

import pytest

from qoelab.emulation import LinkProfile, emulated_link
from qoelab.storage import families, iobench, macro, mounts
from qoelab.storage.guest import client_guest
from qoelab.storage.measure import CpuProbe
from qoelab.storage.nfs import nfs_target
from qoelab.storage.scenarios import thesis_tcp
from qoelab.storage.swift import swift_target
from qoelab.storage.targets import cleanup_leftovers, find_servers, iscsi_target
from qoelab.storage.trial import StorageRun

pytestmark = [pytest.mark.slow, pytest.mark.netns]
RTT_MS = 40.0


def test_the_guest_mounts_nfs_iscsi_and_swift_across_the_link(storage_guest_image, tmp_path: Path) -> None:
    prefix = "qsg" + secrets.token_hex(3)
    profile = LinkProfile.parse(rate="100mbit", delay=f"{RTT_MS / 2:g}ms", up_delay=f"{RTT_MS / 2:g}ms",
                                tcp=thesis_tcp())  # fmt: skip
    try:
        with emulated_link(profile, prefix=prefix, backend="userspace") as link:
            popen = functools.partial(link.popen_in, "s")
            run = functools.partial(link.run_in, "s")
            srv, tools = tmp_path / "srv", [iobench.binary()]
            with nfs_target(popen, run, link.server_ip, srv, prefix) as target, iscsi_target(
                popen, run, link.server_ip, srv, prefix, size_bytes=64 << 20
            ) as lun, swift_target(popen, run, link.server_ip, srv, prefix) as swift, client_guest(
                link, prefix, tmp_path / "vm", tools=tools
            ) as client:  # fmt: skip
                # Started from the host's saved headless guest (made here, once, on a fresh host),
                # with the clock set to the host's: the saved one would be minutes or days behind.
                assert client.guest.start == "snapshot", client.guest.provenance()
                assert client.guest.snapshot["kind"] == "headless", client.guest.snapshot
                guest_now = float(client.shell.run("date +%s.%N", timeout=30).stdout)
                assert abs(guest_now - time.time()) < 5, guest_now
                # The guest's TCP is the trial's: read back from its kernel.
                assert client.tcp["sysctl"]["tcp_congestion_control"] == "cubic"
                assert client.tcp["sysctl"]["tcp_no_metrics_save"] == "1"
                # Fig. 3.2's net.core ceilings too: iscsid sets its own SO_RCVBUF, capped by them
                assert client.tcp["sysctl"]["net.core.rmem_max"] == str(16 << 20), client.tcp
                # Fig. 3.2 / §4: the client's TCP offloads off, read back from its NIC
                assert all(client.offloads[k].startswith("off") for k in ("tso", "gso", "gro")), (
                    client.offloads
                )
                mount = mounts.mount_nfs(client.shell, target, link.server_ip)
                assert mount["fstype"] == "nfs4" and "vers=4.2" in mount["options"], mount
                before = link.emulator.stats()
                client.shell.run(f"mkdir {mounts.MOUNT_POINT}/m", timeout=60)
                result = iobench.meta(
                    iobench.MetaSpec(dir=f"{mounts.MOUNT_POINT}/m", n=5, markers=True),
                    prefix=client.shell.prefix_argv(),
                    tool="/usr/local/bin/storage-iobench",
                    timeout=300,
                )
                after = link.emulator.stats()
                assert result.failed == 0 and [o.op for o in result.ops] == list(iobench.META_KINDS)
                # Every mkdir and unlink is a synchronous exchange with the server across the link.
                for kind in ("mkdir", "unlink", "rmdir"):
                    per_op_ms = result.op(kind).ops_seconds / 5 * 1e3
                    print(f"{kind}: {per_op_ms:.1f} ms per operation at RTT {RTT_MS:g} ms")
                    assert per_op_ms >= 0.9 * RTT_MS, (kind, per_op_ms)
                # The traffic went through the emulator (the worker's ssh to the guest does not).
                assert after["up"]["packets"] - before["up"]["packets"] >= 5 * 4
                # The file the guest made is on the server's export.
                client.shell.run(f"touch {mounts.MOUNT_POINT}/from-guest && sync", timeout=60)
                assert (target.export_dir / "from-guest").exists()
                check_macro_families(profile, client, link, CpuProbe(client.shell, prefix, target))
                mounts.unmount(client.shell)
                assert mounts.mounted(client.shell) == {}

                # iSCSI: ext4 on the LUN with bfq (CFQ's stand-in), the thesis' segment length.
                mount = mounts.mount_iscsi(client.shell, lun, link.server_ip, scheduler="bfq")
                assert mount["fstype"] == "ext4" and "[bfq]" in mount["scheduler"], mount
                assert mount["negotiated"].get("MaxRecvDataSegmentLength") == 65536, mount
                tool = "/usr/local/bin/storage-iobench"
                files = f"{mounts.MOUNT_POINT}/set"
                iobench.prepare(iobench.PrepareSpec(dir=files, files=8, size=256 << 10),
                                prefix=client.shell.prefix_argv(), tool=tool, timeout=300)  # fmt: skip
                got = iobench.micro(
                    iobench.MicroSpec(dir=files, op="read", files=8, size=256 << 10, threads=2, form="direct",
                                      unit=64 << 10, drop_caches=True),
                    prefix=client.shell.prefix_argv(), tool=tool, timeout=300,
                )  # fmt: skip
                assert got.serviced == 8 and got.failed == 0 and got.bytes == 8 * (256 << 10)
                check_single_iscsi_read_and_write(profile, client, link, CpuProbe(client.shell, prefix, lun))
                mounts.unmount(client.shell)
                assert "sd" not in client.shell.run("lsblk -n -o NAME", timeout=30).stdout

                # Swift through rclone: whole objects up on close, down on read.
                mount = mounts.mount_swift(client.shell, swift, transfers=4)
                assert mount["fstype"].startswith("fuse") and mount["client"].startswith("rclone"), mount
                # A batch write round (its own directory: no read set) in the thesis' overwrite mode.
                batch_run = StorageRun(target="swift", family="batch", profile=profile, op="write",
                                       form="default", file_size=512 << 10, set_bytes=2 << 20, threads=(2,),
                                       warmup=False)  # fmt: skip
                (wrote,) = families.batch(batch_run, client, link)
                assert wrote["serviced"] == 4 and wrote["failed"] == 0 and set(wrote) == ROUND_KEYS, wrote
                assert wrote["cold_metadata"] is None, wrote  # the tool's option; no family asks for it
                spec = iobench.MicroSpec(dir=f"{mounts.MOUNT_POINT}/batch-{512 << 10}", op="read", files=4,
                                         size=512 << 10, threads=2, drop_caches=True)  # fmt: skip
                read = iobench.micro(spec, prefix=client.shell.prefix_argv(), tool=tool, timeout=300)
                assert read.serviced == 4 and read.failed == 0 and read.bytes == 4 * (512 << 10), read.raw
                listed = run(swift.client_argv("list", "qoelab"), timeout=30).stdout.split()
                # the objects are in the container on the server
                assert len([o for o in listed if o.startswith("batch-")]) == 4, listed
                mounts.unmount(client.shell)
    finally:
        cleanup_leftovers(prefix)
    assert find_servers(prefix) == []


def check_macro_families(profile: LinkProfile, client, link, probe: CpuProbe) -> None:
    """On the NFS mount: a short varmail (preallocated with the link unimpaired, run emulated) and a
    small PostMark (20 files, 50 transactions; the thesis' 500 and 25000 in the job's defaults)."""
    run = StorageRun(target="nfs", family="varmail", profile=profile, macro_seconds=4, macro_files=200)
    m = macro.filebench(run, client, link, probe)
    print({k: v for k, v in m.items() if k != "flowops"})
    assert m["benchmark"] == "varmail" and m["iops"] > 0 and m["seconds"] == pytest.approx(4, abs=1.5), m
    assert m["files"] == 200 and sum(m["ops"].values()) == m["total_ops"] > 0 and m["link_bytes"] > 0, m
    assert "emulat" in m["emulation"]
    reasons = [sw["reason"] for sw in link.switches[-2:]]
    assert reasons == ["filebench preallocation", "end of filebench preallocation"], reasons
    assert link.profile == profile  # back to the emulated link for the run phase
    assert 0.0 < m["cpu"]["cpu_client"] <= 1.0 and m["cpu"]["cpu_server"] > 0, m["cpu"]

    run = StorageRun(target="nfs", family="postmark", profile=profile, postmark_transactions=50,
                     postmark_files=20)  # fmt: skip
    pm = macro.postmark(run, client, link, probe)
    print({k: v for k, v in pm.items() if k != "report"})
    assert pm["benchmark"] == "postmark" and pm["transactions"] == 50 and pm["seconds"] >= 1, pm
    assert pm["created"] >= 20 and pm["link_bytes"] > 20 * 5120, pm
    assert pm["tps"] is None or pm["tps"] > 0


ROUND_KEYS = {"family", "op", "form", "file_size", "files", "threads", "mib_s", "serviced", "failed",
              "time_limit_hit", "seconds", "bytes", "link_bytes", "link_packets", "link_bytes_clean",
              "link_packets_clean", "cold_metadata", "amplification", "first_error", "ceiling_mib_s",
              "guest_bound", "cpu_client", "cpu_server"}  # fmt: skip


def check_single_iscsi_read_and_write(profile: LinkProfile, client, link, probe: CpuProbe) -> None:
    """One 64 KiB file read with O_DIRECT over iSCSI, then written: ext4's metadata and iSCSI's PDUs
    put more on the link than the file (notes §5.7: (148 + s)/s read, (204 + s)/s write)."""
    run = StorageRun(target="iscsi", family="single", profile=profile, op="read", form="direct",
                     file_size=64 << 10, warmup=False)  # fmt: skip
    (row,) = families.single(run, client, link, probe=probe)
    print(row)
    assert row["family"] == "single" and row["serviced"] == 1 and row["failed"] == 0, row
    assert set(row) == ROUND_KEYS | {"remounted"} and row["remounted"] is True, row
    moved = row["link_bytes"] + row["link_bytes_clean"]  # the round and the cache-clean sync after it
    assert row["bytes"] == 64 << 10 and row["amplification"] == pytest.approx(moved / (64 << 10))
    # After the remount nothing of ext4's metadata is cached: the look-up reads at least one block.
    assert row["link_bytes"] > row["bytes"] + 4096 and row["ceiling_mib_s"] > 0, row
    assert 0.0 <= row["cpu_client"] <= 1.0 and row["cpu_server"] >= 0.0, row
    reasons = [sw["reason"] for sw in link.switches[-6:]]
    assert reasons == ["warm-up and file", "end of warm-up and file", "reheat", "end of reheat", "remount",
                       "end of remount"], reasons  # fmt: skip
    # A write round makes its own directory (it has no file set to read) and deletes before rewriting.
    run = dataclasses.replace(run, op="write")
    (row,) = families.single(run, client, link, probe=probe)
    print(row)
    assert row["serviced"] == 1 and row["failed"] == 0 and row["bytes"] == 64 << 10, row
    assert row["amplification"] > 1 and row["ceiling_mib_s"] is None, row
    assert row["link_bytes_clean"] > 0, row  # ext4 commits the new inode and bitmaps at the sync
