"""A real guest under QEMU (TCG here) on the server side of an emulated link; skipped without the image."""

from __future__ import annotations

import os
import secrets
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from qoelab.rd.geometry import fills
from qoelab.vm import guest as vmguest
from qoelab.vm.image import MissingImageError, load_image

pytestmark = [pytest.mark.slow, pytest.mark.netns]


@pytest.fixture(scope="module")
def image():
    try:
        img = load_image()
    except MissingImageError as err:
        print(f"no guest image: run make vm-image ({err})")
        pytest.skip(f"no guest image: run make vm-image ({err})")
    if os.geteuid() != 0:
        pytest.skip("needs root (network namespaces, tap devices)")
    return img


def _tcp_banner(link, which: str, host: str, port: int, want: bytes) -> bytes:
    code = (
        "import socket,sys\n"
        f"s=socket.create_connection(({host!r},{port}),timeout=20)\n"
        f"d=b''\nwhile len(d)<{len(want)}:\n  c=s.recv(64)\n  if not c: break\n  d+=c\n"
        "sys.stdout.write(d.decode('latin1'))\n"
    )
    res = link.run_in(which, [sys.executable, "-c", code], timeout=60)
    assert res.returncode == 0, res.stderr
    return res.stdout.encode("latin1")


def test_the_image_builds_self_test_saved_the_guest_a_trial_restores(image) -> None:
    """The build's self-test is ``qoelab vm prepare`` under TCG: the state it saved has the key a
    trial here looks up, so a fresh host's first VM trial restores instead of booting again."""
    import json

    from qoelab.vm.qemu import DEFAULT_MEMORY_MB
    from qoelab.vm.snapshot import load_snapshot, snapshot_key

    selftest = image.manifest["selftest"]
    assert selftest["by"] == "qoelab vm prepare" and selftest["accel"] == "tcg", selftest
    assert selftest["snapshot"] == snapshot_key(image, "tcg", DEFAULT_MEMORY_MB), selftest
    accel, _ = vmguest.resolve_accel("auto", image)
    qoelab = str(Path(sys.executable).with_name("qoelab"))
    res = subprocess.run([qoelab, "vm", "prepare", "--json"], capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr
    done = json.loads(res.stdout)
    print(f"qoelab vm prepare: {'booted and saved' if done['made'] else 'saved already'} ({done['accel']})")
    assert done["accel"] == accel and done["key"] == snapshot_key(image, accel, DEFAULT_MEMORY_MB), done
    snap = load_snapshot(done["key"])
    assert snap is not None and snap.kind == "desktop" and snap.accel == accel, done


def test_a_guest_serves_vnc_and_ssh_on_the_server_side_and_leaves_nothing(image, tmp_path: Path) -> None:
    """Started as trials start it, from the host's saved state (saved by the image build's self-test;
    made here by a cold boot to the start page if missing). A cold boot on every run cost this test
    about 50 s under TCG."""
    from qoelab.emulation import LinkProfile, emulated_link
    from qoelab.emulation.topology import SERVER_IP
    from qoelab.procs import ProcSet
    from qoelab.rd.desktop import serve_pages
    from qoelab.rd.workload import generate
    from qoelab.vm.bench import _link_on_screen, forward_ssh_to_guest, ns_run, x2go_session_state
    from qoelab.vm.qemu import DEFAULT_MEMORY_MB
    from qoelab.vm.snapshot import get_snapshot

    prefix = "qvm" + secrets.token_hex(3)
    accel, _ = vmguest.resolve_accel("auto", image)
    snapshot = get_snapshot(image, accel, prefix, DEFAULT_MEMORY_MB, tmp_path / "snapshot")
    generate(tmp_path / "pages", pages=2, seed=3)
    procs = ProcSet(prefix, tmp_path / "logs")
    with emulated_link(LinkProfile.parse(rate="10mbit", delay="10ms"), prefix=prefix) as link:
        server_ns = link.ns("server")
        ns_run(server_ns, ["sysctl", "-qw", "net.ipv4.ip_nonlocal_bind=1"])
        serve_pages(procs, server_ns, vmguest.TAP_HOST_ADDR[0], tmp_path / "pages", port=vmguest.PAGE_PORT)
        forward_ssh_to_guest(server_ns, SERVER_IP, 22)
        try:
            with vmguest.running_guest(
                prefix, tmp_path / "vm", ns=server_ns, listen_ip=SERVER_IP, image=image,
                ready_check=_link_on_screen, snapshot=snapshot,
            ) as g:  # fmt: skip
                print(f"guest ready after {g.boot_to_ready_s:.1f} s ({g.accel}: {g.accel_reason})")
                assert g.accel in ("kvm", "tcg") and g.start == "snapshot", g.provenance()
                assert g.overlay.exists()
                # QEMU's own servers, reached from the client across the emulated link.
                assert _tcp_banner(link, "client", SERVER_IP, 5900, b"RFB 003.008").startswith(b"RFB 003.008")
                # sshd inside the guest, forwarded from the server address (X2Go's way in).
                assert _tcp_banner(link, "client", SERVER_IP, 22, b"SSH-2.0").startswith(b"SSH-2.0")
                # What a failed X2Go trial appends to its error: read as root over ssh on the tap.
                state = x2go_session_state(server_ns, g, prefix)
                assert state.startswith("in the guest: ") and "chromium" in state, state  # the kiosk
                overlay, pid = g.overlay, g.pid
        finally:
            procs.stop_all()
        assert not overlay.exists()
        assert not vmguest.find_qemu_processes(prefix)
        assert not Path(f"/proc/{pid}").exists()
        print(f"teardown {g.teardown_s:.2f} s; provenance {g.provenance()}")


def test_a_killed_owner_leaves_nothing_once_leftovers_are_cleaned(image, tmp_path: Path) -> None:
    prefix = "qvk" + secrets.token_hex(3)
    code = (
        "import sys; from pathlib import Path; from qoelab.vm.guest import running_guest\n"
        f"with running_guest({prefix!r}, Path({str(tmp_path)!r}), accel='tcg',\n"
        "                   vnc_display=None, spice_port=None):\n"
        "    pass\n"
    )
    owner = subprocess.Popen([sys.executable, "-c", code], start_new_session=True)
    deadline = time.monotonic() + 60
    while not (vmguest.find_qemu_processes(prefix) and vmguest.overlays_of(prefix)):
        assert owner.poll() is None, "the owner died before starting QEMU"
        assert time.monotonic() < deadline, "QEMU never started"
        time.sleep(0.2)
    owner.send_signal(signal.SIGKILL)
    owner.wait(timeout=10)
    assert vmguest.find_qemu_processes(prefix), "QEMU should outlive a SIGKILLed owner (its own session)"
    # What a worker runs at start and after every trial.
    from qoelab.runner import cleanup_prefix

    removed = cleanup_prefix(prefix)
    assert any("overlay" in r for r in removed) and any("process" in r for r in removed)
    assert not vmguest.find_qemu_processes(prefix)
    assert not vmguest.overlays_of(prefix)


def test_a_guest_never_ready_fails_with_its_console_and_leaves_nothing(image, tmp_path: Path) -> None:
    prefix = "qvn" + secrets.token_hex(3)
    # A screen test nothing passes: never ready, on KVM and TCG alike. 30 s: long enough for systemd
    # to have written to the console (the kernel itself is quiet there, loglevel=4).
    with (
        pytest.raises(vmguest.GuestNotReadyError) as caught,
        vmguest.running_guest(
            prefix,
            tmp_path,
            vnc_display=None,
            spice_port=None,
            ready_timeout=30,
            ready_check=lambda img: False,
        ),  # fmt: skip
    ):
        pytest.fail("a guest whose screen never passes the check cannot be ready")
    message = str(caught.value)
    assert "not ready within 30 s" in message, message
    console = next(tmp_path.glob(f"{prefix}-*-console.log"))
    # The error names the console log and carries its tail (what the trial's error shows).
    assert str(console) in message, message
    lines = [line.strip() for line in console.read_text(errors="replace").splitlines() if line.strip()]
    assert lines, "systemd writes to the console within 30 s"
    assert any(line in message for line in lines), message
    assert not vmguest.find_qemu_processes(prefix)
    assert not vmguest.overlays_of(prefix)


@pytest.mark.parametrize("protocol", ["vnc", "spice", "x2go"])
def test_a_vm_mode_trial_measures_real_updates_across_the_link(image, tmp_path: Path, protocol: str) -> None:
    from qoelab.emulation import LinkProfile, emulated_link
    from qoelab.rd.bench import BenchRequest
    from qoelab.vm.bench import run_vm_bench

    prefix = "qvb" + secrets.token_hex(3)
    record = protocol == "vnc"  # recorded-mode ratings work in VM mode too; once is enough
    link_cm = emulated_link(LinkProfile.parse(rate="10mbit", delay="10ms"), prefix=prefix)
    with link_cm as link:
        # quiet 2 s: under TCG the guest can pause longer than 0.5 s in the middle of a page change.
        result = run_vm_bench(
            BenchRequest.across(link, protocol, tmp_path, pages=2, quiet_s=2.0, record=record)
        )
    print(f"{protocol}: vm {result['vm']['accel']} ready {result['vm']['boot_to_ready_s']} s, T/X:",
          [(u["T_ms"] and round(u["T_ms"]), u["bytes_down"]) for u in result["updates"]])  # fmt: skip
    assert result["vm"]["accel"] in ("kvm", "tcg")
    # The first trial on a host saves the guest's state; every trial then starts from it.
    assert result["vm"]["start"] == "snapshot", result["vm"].get("snapshot_error")
    assert result["vm"]["restore_s"] < result["vm"]["snapshot"]["boot_to_ready_s"]
    assert len(result["updates"]) == 2
    assert not any(u["timed_out"] for u in result["updates"]), result["updates"]
    # The first click shows a page the client never saw; going back to page 1 may cost X2Go next to
    # nothing (NX caches what it has drawn), so only the first update's size is checked.
    assert result["updates"][0]["bytes_down"] > 10_000, result["updates"]
    # The client shows the guest's whole 800 x 600 desktop, and page coordinates map to the client
    # screen by the page's own link, as in namespace mode (rd/test_geometry.py).
    mapping = result["mapping"]
    assert mapping["used"] == "visual", mapping
    assert fills(mapping["desktop_extent"]), mapping
    if protocol == "x2go":
        assert mapping["fitted_window"]["w"] == 800 and mapping["fitted_window"]["h"] == 600, mapping
    print(f"{protocol}: guest browser restarts {result['vm'].get('browser_restarts')}")
    assert not vmguest.find_qemu_processes(prefix) and not vmguest.overlays_of(prefix)
    if record:
        from qoelab.rd.record import probe

        recordings = result["recordings"]
        assert "error" not in recordings, recordings
        assert recordings["stimulus_check"]["ok"], recordings["stimulus_check"]
        for name in ("recording", "reference"):
            video = Path(recordings["files"][name][0])
            info = probe(video)
            assert info["codec"] == "vp8" and (info["width"], info["height"]) == (800, 600), (name, info)


def test_a_boot_qemu_dies_in_gets_one_more_and_a_plain_failure_none(image, tmp_path: Path) -> None:
    """QEMU aborted once in CI while a TCG guest booted (an assertion in its MSI-X emulation): the
    emulator's failure, not the trial's. Here a real QEMU is killed with SIGABRT as it would abort."""
    calls: list[int] = []

    def aborts(times: int):
        def ready(guest, proc, deadline: float) -> None:
            calls.append(proc.pid)
            if len(calls) <= times:
                os.kill(proc.pid, signal.SIGABRT)
                proc.wait(timeout=30)
                raise vmguest.GuestNotReadyError(f"QEMU exited with status {proc.returncode} while booting")

        return ready

    def boot(ready, prefix: str):
        return vmguest.running_guest(prefix, tmp_path / prefix, accel="tcg", vnc_display=None,
                                     spice_port=None, ready=ready, ready_timeout=60)  # fmt: skip

    prefix = "qvc" + secrets.token_hex(3)
    with boot(aborts(1), prefix) as g:
        assert len(calls) == 2 and calls[0] != calls[1] and g.pid == calls[1]
        (crash,) = g.provenance()["crashed_boots"]
        assert "QEMU exited with status -6" in crash, crash
        assert len(vmguest.find_qemu_processes(prefix)) == 1 and len(vmguest.overlays_of(prefix)) == 1
    assert not vmguest.find_qemu_processes(prefix) and not vmguest.overlays_of(prefix)

    calls.clear()
    prefix = "qvc" + secrets.token_hex(3)
    with pytest.raises(vmguest.GuestNotReadyError, match="status -6"), boot(aborts(2), prefix):
        pytest.fail("two boots QEMU died in are the end")
    assert len(calls) == vmguest.BOOT_ATTEMPTS
    assert not vmguest.find_qemu_processes(prefix) and not vmguest.overlays_of(prefix)

    calls.clear()

    def never(guest, proc, deadline: float) -> None:
        calls.append(proc.pid)
        raise vmguest.GuestNotReadyError("sshd did not answer before the deadline")  # QEMU still running

    prefix = "qvc" + secrets.token_hex(3)
    with pytest.raises(vmguest.GuestNotReadyError, match="sshd did not answer"), boot(never, prefix):
        pytest.fail("a guest that is not ready is not booted again")
    assert len(calls) == 1
    assert not vmguest.find_qemu_processes(prefix) and not vmguest.overlays_of(prefix)
