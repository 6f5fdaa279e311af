"""KVM readiness without KVM: every path where a KVM host and a TCG host differ, tested on this host."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from test_vm_units import spec  # the same GuestSpec the QEMU command-line tests build

from qoelab.errors import ParameterError
from qoelab.vm import guest as vmguest
from qoelab.vm.image import input_hash
from qoelab.vm.qemu import AcceleratorError, KvmProbe, choose_accel, qemu_argv

# KVM readiness: this host's KVM (kvm_pvm) runs no guest, so every path where KVM and TCG differ is
# tested here with a probe that says KVM works (or a fake QEMU that boots "under KVM").


def _kvm_host(monkeypatch, usable: bool, reason: str = "guest kernel booted under KVM") -> list[str]:
    """``qoelab.vm.guest``'s cached KVM probe answers ``usable``; returns the kernels it was asked about."""
    asked: list[str] = []

    def probe(kernel: str) -> KvmProbe:
        asked.append(kernel)
        return KvmProbe(usable, reason, 2.5)

    monkeypatch.setattr(vmguest, "_kvm_probe", probe)
    monkeypatch.delenv("QOELAB_VM_ALLOW_TCG", raising=False)
    return asked


def test_the_exact_qemu_command_line_under_kvm_and_under_tcg(tmp_path: Path) -> None:
    kvm = qemu_argv(spec(tmp_path, accel="kvm", vnc_display=None, spice_port=None), "qemu")
    assert kvm == [
        "qemu", "-name", "qvt-0a1b2c3d", "-accel", "kvm", "-nodefaults", "-no-user-config",
        "-machine", "q35", "-cpu", "host", "-m", "1536", "-smp", "2",
        "-kernel", str(tmp_path / "vmlinuz"), "-initrd", str(tmp_path / "initrd.img"),
        "-append", "root=/dev/vda rw console=ttyS0 loglevel=4 video=800x600",
        "-drive", f"file={tmp_path / 'o.qcow2'},format=qcow2,if=virtio,cache=unsafe",
        "-vga", "std", "-display", "none", "-serial", f"file:{tmp_path / 'c.log'}",
        "-chardev", f"file,id=ready,path={tmp_path / 'r.log'}", "-serial", "chardev:ready",
        "-device", "virtio-rng-pci", "-device", "qemu-xhci,id=xhci", "-device", "usb-tablet,bus=xhci.0",
        "-nic", "none",
    ]  # fmt: skip
    tcg = qemu_argv(spec(tmp_path, accel="tcg", vnc_display=None, spice_port=None), "qemu")
    assert [(i, a, b) for i, (a, b) in enumerate(zip(kvm, tcg, strict=True)) if a != b] == [
        (4, "kvm", "tcg"),
        (10, "host", "max"),
    ]


def test_a_host_whose_kvm_runs_guests_gets_kvm_host_cpu_and_kvm_timeouts(tmp_path: Path, monkeypatch) -> None:
    from qoelab.vm.image import GuestImage
    from qoelab.vm.qemu import KVM_TIMEOUTS, guest_timeouts

    asked = _kvm_host(monkeypatch, usable=True)
    image = GuestImage(tmp_path, {"input_hash": "x"})
    accel, why = vmguest.resolve_accel("auto", image)
    assert (accel, why) == ("kvm", "guest kernel booted under KVM") and asked == [str(image.kernel)]
    assert vmguest.resolve_accel("kvm", image)[0] == "kvm"
    monkeypatch.setenv("QOELAB_VM_ALLOW_TCG", "0")  # TCG disabled does not matter when KVM runs
    assert vmguest.resolve_accel("auto", image)[0] == "kvm"
    argv = qemu_argv(spec(tmp_path, accel=accel))
    assert argv[argv.index("-accel") : argv.index("-accel") + 2] == ["-accel", "kvm"]
    assert argv[argv.index("-cpu") + 1] == "host"
    limits = guest_timeouts(accel)
    assert limits is KVM_TIMEOUTS and limits.accel == "kvm"
    assert (limits.boot_ready_s, limits.restore_s, limits.client_setup_s, limits.x2go_setup_s) == (
        100.0, 60.0, 60.0, 200.0,
    )  # fmt: skip
    assert [limits.setup_s(p) for p in ("vnc", "spice", "x2go")] == [60.0, 60.0, 200.0]


def test_tcg_keeps_the_timeouts_measured_here_and_kvm_is_tighter_but_never_below_a_minute() -> None:
    from qoelab.vm.qemu import TCG_TIMEOUTS, guest_timeouts

    tcg, kvm = guest_timeouts("tcg"), guest_timeouts("kvm")
    assert tcg is TCG_TIMEOUTS and tcg.accel == "tcg"
    # The values used before the timeouts followed the accelerator (run_vm_bench, running_guest).
    assert (tcg.boot_ready_s, tcg.restore_s) == (300.0, 120.0)
    assert [tcg.setup_s(p) for p in ("vnc", "spice", "x2go")] == [60.0, 60.0, 600.0]
    for name in ("boot_ready_s", "restore_s", "client_setup_s", "x2go_setup_s"):
        assert 60.0 <= getattr(kvm, name) <= getattr(tcg, name), name
    with pytest.raises(ParameterError, match="accel: timeouts exist for a chosen accelerator"):
        guest_timeouts("auto")


def test_a_guest_held_to_a_cpu_quota_gets_every_ceiling_divided_by_that_share_of_a_core() -> None:
    from qoelab.vm.qemu import KVM_TIMEOUTS, TCG_TIMEOUTS, guest_timeouts

    held = guest_timeouts("tcg", 0.4)
    assert held.accel == "tcg" and held.cpu_quota == 0.4
    assert (held.boot_ready_s, held.restore_s, held.client_setup_s, held.x2go_setup_s) == pytest.approx(
        (750.0, 300.0, 150.0, 1500.0)
    )
    assert [held.setup_s(p) for p in ("vnc", "x2go")] == pytest.approx([150.0, 1500.0])
    assert guest_timeouts("kvm", 0.5).boot_ready_s == pytest.approx(2 * KVM_TIMEOUTS.boot_ready_s)
    # Not held, or held to a core or more: the accelerator's own ceilings, never shortened.
    for quota in (None, 1.0, 1.5):
        assert guest_timeouts("tcg", quota) is TCG_TIMEOUTS, quota
    assert TCG_TIMEOUTS.cpu_quota is None and TCG_TIMEOUTS.boot_ready_s == 300.0


def test_kvm_asked_for_on_a_host_where_it_runs_no_guest_fails_naming_why(tmp_path: Path, monkeypatch) -> None:
    from qoelab.vm.image import GuestImage

    why = "KVM guest printed nothing within 8 s (KVM present but not running guests)"
    _kvm_host(monkeypatch, usable=False, reason=why)
    image = GuestImage(tmp_path, {"input_hash": "x"})
    named = re.escape(f"accel kvm requested but KVM cannot run guests here: {why}")
    with pytest.raises(AcceleratorError, match=f"^{named}$"):
        vmguest.resolve_accel("kvm", image)
    with pytest.raises(AcceleratorError, match=f"^{named}$"):
        choose_accel("kvm", KvmProbe(False, why))
    assert vmguest.resolve_accel("auto", image) == ("tcg", f"KVM unusable ({why}); falling back to TCG")
    monkeypatch.setenv("QOELAB_VM_ALLOW_TCG", "0")
    disabled = re.escape(f"KVM cannot run guests here ({why}) and TCG is disabled (QOELAB_VM_ALLOW_TCG=0)")
    with pytest.raises(AcceleratorError, match=f"^{disabled}$"):
        vmguest.resolve_accel("auto", image)
    with pytest.raises(AcceleratorError, match="accel tcg requested but TCG is disabled"):
        vmguest.resolve_accel("tcg", image)


def test_tcg_asked_for_is_never_probed(tmp_path: Path, monkeypatch) -> None:
    from qoelab.vm.image import GuestImage

    asked = _kvm_host(monkeypatch, usable=True)
    assert vmguest.resolve_accel("tcg", GuestImage(tmp_path, {})) == ("tcg", "TCG requested")
    assert asked == []


def test_a_working_kvm_answer_is_remembered_too(tmp_path: Path, monkeypatch) -> None:
    calls: list[Path] = []

    def probe(kernel: Path) -> KvmProbe:
        calls.append(kernel)
        return KvmProbe(True, "guest kernel booted under KVM", 1.9)

    monkeypatch.setattr(vmguest, "PROBE_CACHE", tmp_path / "kvm-probe.json")
    monkeypatch.setattr(vmguest, "probe_kvm", probe)
    monkeypatch.setattr(vmguest, "qemu_binary", lambda: "/usr/bin/qemu-system-x86_64")
    first = vmguest._kvm_probe.__wrapped__("/img/vmlinuz")
    again = vmguest._kvm_probe.__wrapped__("/img/vmlinuz")
    assert len(calls) == 1 and first.usable and again.usable
    assert again.reason.startswith("guest kernel booted under KVM (probed at ")
    assert choose_accel("auto", again)[0] == "kvm"


def _fake_qemu(tmp_path: Path, body: str) -> Path:
    """A stand-in for qemu-system-x86_64: logs its argv, finds its ``-serial file:`` path, runs ``body``."""
    script = tmp_path / "fake-qemu"
    script.write_text(
        "#!/bin/bash\n"
        f'printf "%s\\n" "$@" > {tmp_path / "argv"}\n'
        'prev=""; for a in "$@"; do [ "$prev" = -serial ] && serial="${a#file:}"; prev="$a"; done\n'
        f"{body}\n"
    )
    script.chmod(0o755)
    return script


@pytest.mark.parametrize(
    ("body", "usable", "reason"),
    [
        ('printf "Linux version 6.1.0\\n" > "$serial"; exec sleep 30', True, "guest kernel booted under KVM"),
        ('echo "Could not access KVM kernel module" >&2; exit 1', False, "qemu -accel kvm exited 1: Could"),
        ("exec sleep 30", False, "KVM guest printed nothing within 1 s (KVM present but not running guests)"),
    ],
    ids=["boots", "qemu-fails", "silent-like-kvm_pvm"],
)
def test_the_kvm_probe_boots_the_kernel_under_kvm_and_reads_its_banner(
    tmp_path: Path, monkeypatch, body: str, usable: bool, reason: str
) -> None:
    from qoelab.vm import qemu

    monkeypatch.setattr(qemu, "qemu_binary", lambda: str(_fake_qemu(tmp_path, body)))
    device = tmp_path / "kvm"
    device.write_bytes(b"")
    got = qemu.probe_kvm(tmp_path / "vmlinuz", timeout=1.0, device=str(device))
    assert got.usable is usable and got.reason.startswith(reason), got
    argv = (tmp_path / "argv").read_text().split("\n")
    assert argv[argv.index("-accel") + 1] == "kvm"
    assert argv[argv.index("-kernel") + 1] == str(tmp_path / "vmlinuz")
    missing = qemu.probe_kvm(tmp_path / "vmlinuz", device=str(tmp_path / "none"))
    assert missing == KvmProbe(False, f"{tmp_path / 'none'} does not exist")


def test_a_snapshot_saved_under_another_accelerator_is_not_used(tmp_path: Path, monkeypatch) -> None:
    from qoelab.vm import snapshot
    from qoelab.vm.image import GuestImage

    monkeypatch.setenv(vmguest.ENV_OVERLAY_DIR, str(tmp_path))
    monkeypatch.setattr(snapshot, "qemu_version", lambda: "QEMU emulator version 7.2.0")
    image = GuestImage(tmp_path, {"input_hash": "x", "files": {"disk.qcow2": {"sha256": "d1"}}})
    key = snapshot.snapshot_key(image, "tcg", 1536)
    d = snapshot.snapshot_root() / key
    d.mkdir(parents=True)
    for name in ("disk.qcow2", "state.bin"):
        (d / name).write_bytes(b"")
    (d / "meta.json").write_text(json.dumps({"key": key, "accel": "tcg", "memory_mb": 1536}))
    saved = snapshot.load_snapshot(key)
    assert saved is not None
    assert snapshot.usable_for(saved, "tcg") and not snapshot.usable_for(saved, "kvm")
    # A KVM host looks its snapshot up under its own key: the TCG one is not found.
    assert snapshot.load_snapshot(snapshot.snapshot_key(image, "kvm", 1536)) is None


def _vm_check_host(tmp_path: Path, monkeypatch, *, usable: bool | None, reason: str = "") -> list[str]:
    """A host for ``qoelab vm check``: a current image in tmp_path, QEMU "7.2.15", KVM as given."""
    from qoelab.emulation import system
    from qoelab.vm import snapshot

    image_dir = tmp_path / "image"
    image_dir.mkdir()
    for name in ("disk.qcow2", "vmlinuz", "initrd.img"):
        (image_dir / name).write_bytes(b"x")
    (image_dir / "manifest.json").write_text(json.dumps({"input_hash": input_hash()}))
    monkeypatch.setenv("QOELAB_VM_IMAGE_DIR", str(image_dir))
    monkeypatch.delenv("QOELAB_VM_CPU_QUOTA", raising=False)  # QEMU not held unless a test says so
    monkeypatch.setattr(system, "find_tool", lambda name, package=None: f"/usr/bin/{name}")
    monkeypatch.setattr(vmguest, "qemu_binary", lambda: "/usr/bin/qemu-system-x86_64")
    monkeypatch.setattr(snapshot, "qemu_version", lambda: "QEMU emulator version 7.2.15")
    if usable is None:  # never probed
        monkeypatch.setattr(vmguest, "_kvm_probe", lambda kernel: pytest.fail("probed"))
        monkeypatch.delenv("QOELAB_VM_ALLOW_TCG", raising=False)
        return []
    return _kvm_host(monkeypatch, usable=usable, reason=reason)


def test_vm_check_on_a_host_whose_kvm_runs_guests(tmp_path: Path, monkeypatch, capsys) -> None:
    from qoelab.cli import main

    asked = _vm_check_host(tmp_path, monkeypatch, usable=True, reason="guest kernel booted under KVM")
    assert main(["vm", "check", "--accel", "kvm"]) == 0
    out = capsys.readouterr().out
    assert asked == [str(tmp_path / "image" / "vmlinuz")]
    assert out.splitlines()[0] == "VM mode can run here under KVM (accel kvm asked for)"
    for line in (
        "  QEMU:        QEMU emulator version 7.2.15",
        f"  image:       {tmp_path / 'image'}, current",
        "  KVM:         runs guests: guest kernel booted under KVM",
        "  accelerator: kvm (guest kernel booted under KVM)",
        "  timeouts:    boot to page 100 s, restore 60 s, VNC/SPICE setup 60 s, X2Go setup 200 s",
    ):
        assert line in out.splitlines(), out
    assert main(["vm", "check", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["ok"] and doc["accel"] == "kvm" and doc["kvm"]["usable"] and doc["problems"] == []
    assert doc["timeouts"]["x2go_setup_s"] == 200.0 and doc["image_current"] is True


def test_vm_check_fails_when_kvm_is_required_and_runs_no_guest(tmp_path: Path, monkeypatch, capsys) -> None:
    from qoelab.cli import main

    why = "KVM guest printed nothing within 8 s (KVM present but not running guests)"
    _vm_check_host(tmp_path, monkeypatch, usable=False, reason=why)
    assert main(["vm", "check"]) == 0  # auto: TCG, slower, but VM mode runs
    out = capsys.readouterr().out
    assert out.startswith("VM mode can run here under TCG (accel auto asked for)")
    assert f"  KVM:         does not run guests: {why}" in out.splitlines()
    assert "  accelerator: tcg (KVM unusable; falling back to TCG)" in out.splitlines()
    assert "boot to page 300 s, restore 120 s, VNC/SPICE setup 60 s, X2Go setup 600 s" in out
    assert main(["vm", "check", "--accel", "kvm"]) == 1
    out = capsys.readouterr().out
    assert out.startswith("VM mode cannot run here (accel kvm asked for)")
    assert f"  problem:     accel kvm requested but KVM cannot run guests here: {why}" in out.splitlines()
    monkeypatch.setenv("QOELAB_VM_ALLOW_TCG", "0")
    assert main(["vm", "check"]) == 1
    assert "and TCG is disabled (QOELAB_VM_ALLOW_TCG=0)" in capsys.readouterr().out


def test_vm_check_shows_the_ceilings_a_cpu_quota_gives_and_names_a_bad_quota(
    tmp_path: Path, monkeypatch, capsys
) -> None:
    from qoelab.cli import main

    _vm_check_host(tmp_path, monkeypatch, usable=False, reason="KVM guest printed nothing within 8 s")
    monkeypatch.setenv("QOELAB_VM_CPU_QUOTA", "0.5")
    assert main(["vm", "check"]) == 0
    assert (
        "  timeouts:    boot to page 600 s, restore 240 s, VNC/SPICE setup 120 s, X2Go setup 1200 s"
        " (QEMU held to 0.5 cores: x2)"
    ) in capsys.readouterr().out.splitlines()
    monkeypatch.setenv("QOELAB_VM_CPU_QUOTA", "fast")
    assert main(["vm", "check"]) == 1
    out = capsys.readouterr().out
    assert "  problem:     QOELAB_VM_CPU_QUOTA: must be a number of cores, got 'fast'" in out.splitlines(), (
        out
    )
    assert "boot to page 300 s" in out  # the unscaled ceilings, beside the problem


def test_vm_check_without_an_image_says_how_to_build_it_and_probes_nothing(
    tmp_path: Path, monkeypatch, capsys
) -> None:
    from qoelab.cli import main

    _vm_check_host(tmp_path, monkeypatch, usable=None)
    monkeypatch.setenv("QOELAB_VM_IMAGE_DIR", str(tmp_path / "nowhere"))
    assert main(["vm", "check"]) == 1
    out = capsys.readouterr().out
    assert "  image:       not found" in out and "KVM:         not probed" in out
    assert "problem:     no guest image in" in out and "run make vm-image" in out
