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

from qoelab.vm import guest as vmguest
from qoelab.vm.image import MissingImageError, load_image

pytestmark = [pytest.mark.slow, pytest.mark.netns]

PAGE = (
    "<!doctype html><html><body style='margin:0;background:#204080'>"
    "<a href='page-001.html' style='position:absolute;left:300px;top:250px;width:160px;height:56px;"
    "background:rgb(224,16,122)'></a></body></html>"
)


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


def test_a_guest_serves_vnc_spice_and_ssh_on_the_server_side_of_the_link(image, tmp_path: Path) -> None:
    from qoelab.emulation import LinkProfile, emulated_link
    from qoelab.emulation.topology import SERVER_IP

    prefix = "qvm" + secrets.token_hex(3)
    pages = tmp_path / "pages"
    pages.mkdir()
    (pages / "page-001.html").write_text(PAGE)
    with emulated_link(LinkProfile.parse(rate="10mbit", delay="10ms"), prefix=prefix) as link:
        with vmguest.running_guest(
            prefix, tmp_path / "vm", ns=link.ns("server"), listen_ip=SERVER_IP, image=image, pages_dir=pages
        ) as g:
            print(f"guest ready after {g.boot_to_ready_s:.1f} s ({g.accel}: {g.accel_reason})")
            assert g.accel in ("kvm", "tcg")
            assert g.overlay.exists()
            # QEMU's own servers, reached from the client across the emulated link.
            assert _tcp_banner(link, "client", SERVER_IP, 5900, b"RFB 003.008").startswith(b"RFB 003.008")
            # sshd inside the guest, behind the tap in the server namespace (X2Go's way in).
            link.run_in("server", ["sysctl", "-qw", "net.ipv4.ip_forward=1"], check=True)
            link.add_route("client", "10.213.0.0/24")
            assert _tcp_banner(link, "client", vmguest.GUEST_IP, 22, b"SSH-2.0").startswith(b"SSH-2.0")
            overlay, pid = g.overlay, g.pid
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
    removed = vmguest.cleanup_leftovers(prefix)
    assert any("overlay" in r for r in removed) and any("process" in r for r in removed)
    assert not vmguest.find_qemu_processes(prefix)
    assert not vmguest.overlays_of(prefix)


@pytest.mark.parametrize("protocol", ["vnc", "spice"])
def test_a_vm_mode_trial_measures_real_updates_across_the_link(image, tmp_path: Path, protocol: str) -> None:
    from qoelab.emulation import LinkProfile, emulated_link
    from qoelab.vm.bench import run_vm_bench

    prefix = "qvb" + secrets.token_hex(3)
    with emulated_link(LinkProfile.parse(rate="10mbit", delay="10ms"), prefix=prefix) as link:
        # quiet 2 s: under TCG the guest can pause longer than 0.5 s in the middle of a page change.
        result = run_vm_bench(
            protocol, link.server_ns, link.client_ns, link.server_ip, link.client_if, tmp_path,
            pages=2, quiet_s=2.0, prefix=prefix,
        )  # fmt: skip
    print(f"{protocol}: vm {result['vm']['accel']} ready {result['vm']['boot_to_ready_s']} s, T/X:",
          [(round(u["T_ms"]), u["bytes_down"]) for u in result["updates"]])  # fmt: skip
    assert result["vm"]["accel"] in ("kvm", "tcg")
    assert len(result["updates"]) == 2
    assert all(u["bytes_down"] > 10_000 for u in result["updates"]), result["updates"]
    assert not vmguest.find_qemu_processes(prefix) and not vmguest.overlays_of(prefix)
