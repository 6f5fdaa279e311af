"""``qoelab vm check`` and ``qoelab vm prepare``: can this host run VM-mode trials, and their saved guest.

``check`` gives the same answers a trial gets (``qoelab.vm.guest.resolve_accel``: the KVM probe,
cached until the host reboots, and ``QOELAB_VM_ALLOW_TCG``), the image a trial would boot and the
QEMU it would run, and the timeouts that accelerator gets (``qoelab.vm.qemu.guest_timeouts``).
``prepare`` boots the desktop guest to its start page and saves it, as a host's first VM trial
would; the image build runs it as its self-test, so a new image's first trial restores instead of
booting. Registered by the top-level ``qoelab`` command (:func:`register`).
"""

from __future__ import annotations

import argparse
import json
import shutil
import signal
import sys
import tempfile
from dataclasses import asdict, dataclass, field
from typing import Any

from qoelab.errors import QoelabError
from qoelab.vm.qemu import GuestTimeouts, KvmProbe

EXIT_CANNOT_RUN = 1

CHECK_EPILOG = """\
Boots the guest image's kernel under KVM for up to 8 s (once per host boot; the answer is kept in
/run/qoelab/kvm-probe.json), because /dev/kvm existing is not enough: a paravirtual KVM (kvm_pvm)
accepts -accel kvm but never runs the guest. Exit status 0 when VM-mode trials can run here with
the accelerator asked for, 1 when they cannot (the reasons are printed).

examples:
  qoelab vm check               # KVM if it runs guests, else TCG (unless QOELAB_VM_ALLOW_TCG=0)
  qoelab vm check --accel kvm   # a lab host meant for thesis numbers: fail unless KVM runs guests
  qoelab vm check --json
"""


@dataclass
class VmCheck:
    """What ``qoelab vm check`` found; ``problems`` empty means VM-mode trials can run."""

    requested: str
    qemu: str | None = None  # QEMU's version line
    image_dir: str | None = None
    image_current: bool | None = None  # built from the build script and package list in the tree
    kvm: KvmProbe | None = None  # None: not probed (TCG asked for, or no image to probe with)
    accel: str | None = None
    accel_reason: str | None = None
    timeouts: GuestTimeouts | None = None
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "ok": self.ok}


def check_vm(requested: str = "auto") -> VmCheck:
    """Probe this host for VM mode as a trial would (the KVM probe boots a kernel, once per host boot)."""
    from qoelab.emulation.system import find_tool
    from qoelab.vm import guest as vmguest
    from qoelab.vm import throttle
    from qoelab.vm.image import load_image
    from qoelab.vm.qemu import choose_accel, guest_timeouts, tcg_allowed
    from qoelab.vm.snapshot import qemu_version

    found = VmCheck(requested)
    try:
        find_tool("qemu-img", "qemu-utils")  # every trial's overlay
        vmguest.qemu_binary()
        found.qemu = qemu_version()
    except QoelabError as err:
        found.problems.append(str(err))
    image = None
    try:
        image = load_image()
        found.image_dir, found.image_current = str(image.directory), image.is_current()
    except QoelabError as err:
        found.problems.append(str(err))
    if requested != "tcg":
        if image is None or found.qemu is None:
            return found  # the probe boots the image's kernel with QEMU: said above why it cannot
        found.kvm = vmguest._kvm_probe(str(image.kernel))
    try:
        accel, found.accel_reason = choose_accel(requested, found.kvm, tcg_allowed())
    except QoelabError as err:
        found.problems.append(str(err))
        return found
    try:
        quota = throttle.cpu_quota_from_env()
    except QoelabError as err:
        found.problems.append(str(err))
        quota = None
    found.accel, found.timeouts = accel, guest_timeouts(accel, quota)
    return found


PREPARE_EPILOG = """\
Boots the desktop guest in a private namespace until its kiosk has painted the start page, pauses
it and saves its state under /var/tmp/qoelab-vm/snapshots/ (QOELAB_VM_OVERLAY_DIR), keyed by the
image, QEMU, accelerator and machine. Every later VM-mode trial on this host then restores that
state in seconds instead of booting. When the state is saved already, nothing boots. The image
build (make vm-image) runs this under TCG as its self-test. Exit status 0 when the state is saved.

examples:
  qoelab vm prepare                  # the accelerator a trial would get here
  qoelab vm prepare --accel tcg --image-dir vm-images/out --json
"""


@dataclass
class Prepared:
    """The desktop guest's saved state on this host (``made``: booted and saved by this call)."""

    key: str
    directory: str
    accel: str
    accel_reason: str
    made: bool
    boot_to_ready_s: float | None
    save_s: float | None
    state_bytes: int | None


def prepare_vm(requested: str = "auto", image_dir: str | None = None) -> Prepared:
    """Find or make the desktop guest's saved state for the accelerator a trial gets here."""
    from pathlib import Path

    from qoelab.emulation.system import new_prefix
    from qoelab.vm.guest import GuestError, overlay_dir, resolve_accel
    from qoelab.vm.image import load_image
    from qoelab.vm.qemu import DEFAULT_MEMORY_MB
    from qoelab.vm.snapshot import SnapshotError, get_snapshot, load_snapshot, snapshot_key

    image = load_image(Path(image_dir) if image_dir else None)
    accel, reason = resolve_accel(requested, image)
    key = snapshot_key(image, accel, DEFAULT_MEMORY_MB)
    made = load_snapshot(key) is None
    overlay_dir().mkdir(parents=True, exist_ok=True)
    workdir = Path(tempfile.mkdtemp(prefix="prepare-", dir=overlay_dir()))
    try:
        snap = get_snapshot(image, accel, new_prefix("qlvp"), DEFAULT_MEMORY_MB, workdir)
    except (SnapshotError, GuestError) as err:  # the guest's logs stay for a look
        raise SnapshotError(f"{err} (the guest's logs: {workdir})") from None
    shutil.rmtree(workdir, ignore_errors=True)
    meta = snap.meta
    return Prepared(key=snap.directory.name, directory=str(snap.directory), accel=accel,
                    accel_reason=reason, made=made, boot_to_ready_s=meta.get("boot_to_ready_s"),
                    save_s=meta.get("save_s"), state_bytes=meta.get("state_bytes"))  # fmt: skip


def cmd_prepare(args: argparse.Namespace) -> int:
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # unwind: stop QEMU, drop the namespace
    done = prepare_vm(args.accel, args.image_dir)
    if args.json:
        print(json.dumps(asdict(done), indent=2))
    elif done.made:
        mb = (done.state_bytes or 0) >> 20
        print(f"saved the desktop guest ({done.accel}): page shown {done.boot_to_ready_s} s after QEMU "
              f"started, saved in {done.save_s} s, {mb} MB: {done.directory}")  # fmt: skip
    else:
        print(f"the desktop guest ({done.accel}) is saved already: {done.directory}")
    return 0


def render(found: VmCheck) -> str:
    accel = f" under {found.accel.upper()}" if found.accel else ""
    verdict = f"VM mode can run here{accel}" if found.ok else "VM mode cannot run here"
    lines = [f"{verdict} (accel {found.requested} asked for)"]
    lines.append(f"  QEMU:        {found.qemu or 'not found'}")
    if found.image_dir is None:
        lines.append("  image:       not found")
    else:
        state = "current" if found.image_current else "stale (built from other inputs): run make vm-image"
        lines.append(f"  image:       {found.image_dir}, {state}")
    if found.kvm is None:
        why = "TCG asked for" if found.requested == "tcg" else "it needs QEMU and the image's kernel"
        lines.append(f"  KVM:         not probed ({why})")
    else:
        runs = "runs" if found.kvm.usable else "does not run"
        lines.append(f"  KVM:         {runs} guests: {found.kvm.reason}")
    if found.accel is not None:
        reason = found.accel_reason or ""
        if found.kvm is not None:  # the probe's words are on the KVM line already
            reason = reason.replace(f" ({found.kvm.reason})", "")
        lines.append(f"  accelerator: {found.accel} ({reason})")
    t = found.timeouts
    if t is not None:
        held = "" if t.cpu_quota is None else f" (QEMU held to {t.cpu_quota:g} cores: x{1 / t.cpu_quota:.3g})"
        lines.append(
            f"  timeouts:    boot to page {t.boot_ready_s:.0f} s, restore {t.restore_s:.0f} s, "
            f"VNC/SPICE setup {t.client_setup_s:.0f} s, X2Go setup {t.x2go_setup_s:.0f} s{held}"
        )
    lines += [f"  problem:     {p}" for p in found.problems]
    return "\n".join(lines)


def cmd_check(args: argparse.Namespace) -> int:
    found = check_vm(args.accel)
    print(json.dumps(found.to_json(), indent=2) if args.json else render(found))
    return 0 if found.ok else EXIT_CANNOT_RUN


def _command(sub: Any, name: str, summary: str, description: str, epilog: str, purpose: str) -> Any:
    """One ``vm`` subcommand with the options both have: ``--accel`` (for ``purpose``) and ``--json``."""
    cmd = sub.add_parser(name, help=summary, description=description, epilog=epilog,
                         formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    cmd.add_argument(
        "--accel", choices=("auto", "kvm", "tcg"), default="auto",
        help=f"the accelerator to {purpose} (default auto: KVM if it runs guests, else TCG)",
    )  # fmt: skip
    cmd.add_argument("--json", action="store_true", help="print the result as JSON")
    return cmd


def register(subparsers: Any) -> None:
    """Add ``vm`` with ``check`` and ``prepare`` to an argparse subparsers object."""
    vm = subparsers.add_parser("vm", help="VM server mode: this host's QEMU, guest image and accelerator")
    sub = vm.add_subparsers(dest="vm_command", metavar="COMMAND", required=True)
    check = _command(
        sub, "check", "can VM-mode trials run here, under KVM or TCG, and with which timeouts",
        "Check QEMU, the guest image and the accelerator a VM-mode trial would get here.",
        CHECK_EPILOG, "check for",
    )  # fmt: skip
    check.set_defaults(func=cmd_check)
    prepare = _command(
        sub, "prepare", "boot the desktop guest once and save it, so that VM-mode trials here restore it",
        "Save the desktop guest's state for the accelerator a trial gets here.", PREPARE_EPILOG,
        "save it for",
    )  # fmt: skip
    prepare.add_argument("--image-dir", metavar="DIR", help="the guest image (default: vm-images/out)")
    prepare.set_defaults(func=cmd_prepare)
