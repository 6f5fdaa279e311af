"""Saved guest states: boot once, save, and start every later trial from the saved state.

A snapshot is the guest booted to its start page (``wait.html``: X up, the kiosk browser painted,
polling for the trial's page server), paused and saved with QEMU's migration to a file, plus a
copy of its disk overlay at that moment. A trial then runs QEMU with ``-incoming`` on a new overlay
over that disk, resumes the guest and only waits for its first page. Under TCG this replaces a
45-60 s boot with a few seconds (docs/vm.md has the measurement).

A headless guest (the storage benchmark's client: the kiosk masked on the kernel command line) is
saved the same way once its sshd answers; its ``kind`` is ``headless`` and its key differs by the
command line. Snapshots are keyed by what the saved machine depends on (image, QEMU version,
accelerator, memory, CPUs, the machine part of the command line) and kept under
``<overlay dir>/snapshots/<key>/``;
a lock file keeps two workers from saving the same one at once. Their disk file is the backing
file of every trial overlay made from them, so it is never written after it is published.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import hashlib
import json
import logging
import secrets
import shutil
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from qoelab.errors import QoelabError
from qoelab.vm.guest import GuestError, check_prefix, running_guest, snapshot_root
from qoelab.vm.image import GuestImage
from qoelab.vm.qemu import GuestSpec, qemu_argv, qemu_binary

log = logging.getLogger("qoelab.vm.snapshot")
FORMAT = 1
SAVE_TIMEOUT_S = 180.0
KEEP = 2  # saved states kept per host and kind (~850 MB each); older ones: replaced images or QEMUs
# How a guest that is not the desktop's says it is ready: given the namespace the snapshot's guest
# boots in, the ``ready`` callback for running_guest (e.g. ssh answers).
ReadyFor = Callable[[str], Callable[..., None]]


class SnapshotError(QoelabError):
    """The guest's state could not be saved."""


@functools.cache
def qemu_version() -> str:
    res = subprocess.run([qemu_binary(), "--version"], capture_output=True, text=True, check=False)
    return res.stdout.splitlines()[0].strip() if res.stdout else "unknown"


def machine_argv(
    image: GuestImage, accel: str, memory_mb: int, extra_append: Sequence[str] = ()
) -> list[str]:
    """The part of QEMU's command line that defines the saved machine (no paths, ports or names)."""
    spec = GuestSpec(
        name="key", accel=accel,  # type: ignore[arg-type]
        overlay=Path("o"), kernel=Path("k"), initrd=Path("i"), console_log=Path("c"), ready_log=Path("r"),
        listen_ip="0.0.0.0", vnc_display=None, spice_port=None, tap="tap", memory_mb=memory_mb,
        extra_append=list(extra_append),
    )  # fmt: skip
    return qemu_argv(spec, "qemu")


def snapshot_key(image: GuestImage, accel: str, memory_mb: int, extra_append: Sequence[str] = ()) -> str:
    doc = {
        "format": FORMAT,
        "disk": image.manifest.get("files", {}).get("disk.qcow2", {}).get("sha256"),
        "kernel": image.manifest.get("files", {}).get("vmlinuz", {}).get("sha256"),
        "qemu": qemu_version(),
        "machine": machine_argv(image, accel, memory_mb, extra_append),
    }
    return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()[:16]


@dataclass(frozen=True)
class Snapshot:
    directory: Path
    meta: dict[str, Any]

    @property
    def disk(self) -> Path:
        return self.directory / "disk.qcow2"

    @property
    def state(self) -> Path:
        return self.directory / "state.bin"

    @property
    def accel(self) -> str:
        return str(self.meta["accel"])

    @property
    def memory_mb(self) -> int:
        return int(self.meta["memory_mb"])

    @property
    def kind(self) -> str:
        return str(self.meta.get("kind", "desktop"))

    @property
    def uptime_at_ready_s(self) -> float | None:
        return self.meta.get("guest_uptime_at_ready_s")

    def usable_for(self, accel: str) -> bool:
        """Whether it can be restored in a guest run under ``accel`` (the chosen one).

        A state saved under another accelerator does not load: the CPU model differs (``-cpu host``
        under KVM, ``max`` under TCG), and so does the accelerator's own part of the saved state.
        Such a snapshot is not used and the guest boots instead.
        """
        return self.accel == accel

    def provenance(self) -> dict[str, Any]:
        keys = ("key", "kind", "created_at", "boot_to_ready_s", "save_s", "state_bytes", "qemu")
        return {k: self.meta.get(k) for k in keys}


def usable_for(snapshot: Snapshot, accel: str) -> bool:
    """Whether ``snapshot`` can be restored in a guest run under ``accel`` (``Snapshot.usable_for``)."""
    return snapshot.usable_for(accel)


def load_snapshot(key: str) -> Snapshot | None:
    d = snapshot_root() / key
    try:
        meta = json.loads((d / "meta.json").read_text())
    except (OSError, ValueError):
        return None
    snap = Snapshot(d, meta)
    return snap if snap.disk.is_file() and snap.state.is_file() else None


def _save(guest: Any, dest: Path, timeout: float) -> None:
    """Pause the guest and write its state to ``dest`` (QEMU migration to a file)."""
    guest.qmp("stop")
    # The default migration bandwidth cap (128 MiB/s) would only slow the save.
    guest.qmp("migrate-set-parameters", **{"max-bandwidth": 1 << 40})
    guest.qmp("migrate", uri=f"exec:cat > {dest}")
    deadline = time.monotonic() + timeout
    while True:
        info = guest.qmp("query-migrate")
        status = info.get("status")
        if status == "completed":
            return
        if status in ("failed", "cancelled"):
            raise SnapshotError(f"saving the guest state failed: {info.get('error-desc', status)}")
        if time.monotonic() > deadline:
            raise SnapshotError(f"saving the guest state took longer than {timeout:.0f} s")
        time.sleep(0.2)


def make_snapshot(image: GuestImage, accel: str, prefix: str, memory_mb: int, workdir: Path,
                  ready_timeout: float | None = None, *, extra_append: Sequence[str] = (),
                  ready_for: ReadyFor | None = None) -> Snapshot:  # fmt: skip
    """Boot a guest to its start page in a private namespace, save it, publish it under its key.

    ``accel``: the chosen accelerator (kvm or tcg); ``ready_timeout`` defaults to its boot ceiling.
    A headless guest passes its kernel arguments (``extra_append``) and how it says it is ready
    (``ready_for``, given the namespace it boots in).
    """
    from pyroute2 import netns

    from qoelab.emulation.system import create_netns

    check_prefix(prefix)
    key = snapshot_key(image, accel, memory_mb, extra_append)
    root = snapshot_root()
    root.mkdir(parents=True, exist_ok=True)
    # The temporary directory carries the trial prefix: a worker killed meanwhile leaves it to
    # cleanup_snapshot_leftovers. The namespace too (``<prefix>v``, found by the link cleanup).
    tmp = root / f"{prefix}-{secrets.token_hex(4)}.tmp"
    tmp.mkdir()
    ns = f"{prefix}v"
    create_netns(ns)  # `ip netns add`: no forked pyroute2 helper
    try:
        t0 = time.monotonic()
        booting = running_guest(
            prefix, workdir, ns=ns, image=image, accel=accel, vnc_display=None, spice_port=None,
            memory_mb=memory_mb, extra_append=extra_append,
            ready=None if ready_for is None else ready_for(ns),
            ready_timeout=ready_timeout,  # None: the accelerator's ceiling, scaled to a CPU quota if held
        )  # fmt: skip
        with booting as guest:
            booted = time.monotonic() - t0
            t1 = time.monotonic()
            _save(guest, tmp / "state.bin", SAVE_TIMEOUT_S)
            # The migration flushed the disk and QEMU no longer writes it: copy the overlay as it is.
            shutil.copyfile(guest.overlay, tmp / "disk.qcow2")
            save_s = time.monotonic() - t1
            meta = {
                "format": FORMAT, "key": key, "kind": "headless" if extra_append else "desktop",
                "accel": guest.accel, "memory_mb": memory_mb, "extra_append": list(extra_append),
                "qemu": qemu_version(), "image_input_hash": image.manifest.get("input_hash"),
                "created_at": int(time.time()), "boot_to_ready_s": round(booted, 2),
                "save_s": round(save_s, 2), "state_bytes": (tmp / "state.bin").stat().st_size,
                "guest_uptime_at_ready_s": guest.guest_uptime_at_ready_s,
            }  # fmt: skip
        (tmp / "meta.json").write_text(json.dumps(meta, indent=1) + "\n")
        final = root / key
        if final.exists():  # made meanwhile by someone else: keep theirs, it may be in use
            shutil.rmtree(tmp)
        else:
            tmp.rename(final)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    finally:
        with contextlib.suppress(OSError):
            netns.remove(ns)
    snap = load_snapshot(key)
    if snap is None:
        raise SnapshotError(f"snapshot {key} vanished right after it was saved")
    prune_snapshots(keep=KEEP)
    log.info("snapshot %s saved: boot %.1f s, save %.1f s, %d MB", key, meta["boot_to_ready_s"],
             meta["save_s"], meta["state_bytes"] >> 20)  # fmt: skip
    return snap


def get_snapshot(
    image: GuestImage, accel: str, prefix: str, memory_mb: int, workdir: Path, *,
    extra_append: Sequence[str] = (), ready_for: ReadyFor | None = None,
) -> Snapshot:  # fmt: skip
    """The saved state for this image/QEMU/machine, made now (once per host) when missing."""
    key = snapshot_key(image, accel, memory_mb, extra_append)
    snap = load_snapshot(key)
    if snap is not None:
        return snap
    root = snapshot_root()
    root.mkdir(parents=True, exist_ok=True)
    with open(root / f"{key}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another worker may be saving it right now
        snap = load_snapshot(key)
        if snap is not None:
            return snap
        try:
            return make_snapshot(image, accel, prefix, memory_mb, workdir, extra_append=extra_append,
                                 ready_for=ready_for)  # fmt: skip
        except GuestError as err:
            raise SnapshotError(f"cannot make the guest snapshot: {err}") from None


def prune_snapshots(keep: int = KEEP) -> list[str]:
    """Remove all but the ``keep`` newest snapshots of each kind (a host keeps its desktop and its
    headless guest). Safe while trials use them: QEMU and ``cat`` hold their files open, and Linux
    keeps an unlinked open file until it is closed."""
    root = snapshot_root()
    if not root.is_dir():
        return []
    snaps = [s for d in root.iterdir() if d.is_dir() and (s := load_snapshot(d.name)) is not None]
    snaps.sort(key=lambda s: s.meta.get("created_at", 0), reverse=True)
    kept: dict[str, int] = {}
    old_ones = []
    for snap in snaps:
        kept[snap.kind] = kept.get(snap.kind, 0) + 1
        if kept[snap.kind] > keep:
            old_ones.append(snap)
    removed = []
    for old in old_ones:
        shutil.rmtree(old.directory, ignore_errors=True)
        (root / f"{old.directory.name}.lock").unlink(missing_ok=True)
        removed.append(str(old.directory))
    return removed
