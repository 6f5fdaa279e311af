"""VM mode without a guest image: QEMU argv, overlay naming, manifest cache key, accelerator choice."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from qoelab.errors import ParameterError
from qoelab.vm import guest as vmguest
from qoelab.vm.image import BUILD_DIR, MissingImageError, input_hash, load_image
from qoelab.vm.qemu import (
    GUEST_MAC,
    AcceleratorError,
    GuestSpec,
    KvmProbe,
    choose_accel,
    qemu_argv,
    vnc_options_for,
)


def spec(tmp_path: Path, **kw) -> GuestSpec:
    base = dict(
        name="qvt-0a1b2c3d", accel="tcg", overlay=tmp_path / "o.qcow2", kernel=tmp_path / "vmlinuz",
        initrd=tmp_path / "initrd.img", console_log=tmp_path / "c.log", ready_log=tmp_path / "r.log",
        listen_ip="198.18.0.2",
    )  # fmt: skip
    base.update(kw)
    return GuestSpec(**base)


def test_it_puts_vnc_and_spice_on_the_server_address_with_auto_glz(tmp_path: Path) -> None:
    argv = qemu_argv(spec(tmp_path))
    # lossy=on: QEMU honours the client's JPEG quality (the thesis' "JPEG quality 5").
    assert argv[argv.index("-vnc") + 1] == "198.18.0.2:0,lossy=on"
    assert (
        argv[argv.index("-spice") + 1]
        == "port=5930,addr=198.18.0.2,disable-ticketing=on,image-compression=auto_glz"
    )
    assert argv[argv.index("-accel") + 1] == "tcg"
    assert argv[argv.index("-cpu") + 1] == "max"


def test_a_non_adaptive_vnc_server_is_asked_for_on_the_command_line(tmp_path: Path) -> None:
    argv = qemu_argv(spec(tmp_path, vnc_options=vnc_options_for(adaptive=False)))
    assert argv[argv.index("-vnc") + 1] == "198.18.0.2:0,lossy=on,non-adaptive=on"
    assert vnc_options_for(adaptive=True) == {"lossy": "on"}


def test_it_boots_the_overlay_never_the_base_disk(tmp_path: Path) -> None:
    argv = qemu_argv(spec(tmp_path))
    drive = argv[argv.index("-drive") + 1]
    assert drive.startswith(f"file={tmp_path / 'o.qcow2'},format=qcow2")


def test_it_uses_host_cpu_under_kvm_and_omits_disabled_servers(tmp_path: Path) -> None:
    argv = qemu_argv(spec(tmp_path, accel="kvm", vnc_display=None, spice_port=None))
    assert argv[argv.index("-cpu") + 1] == "host"
    assert "-vnc" not in argv and "-spice" not in argv


def test_it_attaches_a_tap_with_fixed_macs_and_shares_no_host_folder(tmp_path: Path) -> None:
    argv = qemu_argv(spec(tmp_path, tap="qvtt"))
    assert "tap,id=net0,ifname=qvtt,script=no,downscript=no" in argv
    assert f"virtio-net-pci,netdev=net0,mac={GUEST_MAC}" in argv
    # No virtio-9p: a shared folder would keep QEMU from saving the VM state (snapshots).
    assert "-virtfs" not in argv and "-nic" not in argv


def test_it_restores_a_saved_state_when_given_one(tmp_path: Path) -> None:
    argv = qemu_argv(spec(tmp_path, incoming=tmp_path / "snap dir" / "state.bin"))
    assert argv[argv.index("-incoming") + 1] == f"exec:cat '{tmp_path / 'snap dir' / 'state.bin'}'"
    assert "-incoming" not in qemu_argv(spec(tmp_path))


def test_the_snapshot_key_ignores_ports_and_paths_but_not_the_machine(tmp_path: Path, monkeypatch) -> None:
    from qoelab.vm import snapshot
    from qoelab.vm.image import GuestImage

    monkeypatch.setattr(snapshot, "qemu_version", lambda: "QEMU emulator version 7.2.0")
    image = GuestImage(tmp_path, {"input_hash": "x", "files": {"disk.qcow2": {"sha256": "d1"}}})
    key = snapshot.snapshot_key(image, "tcg", 1536)
    assert key == snapshot.snapshot_key(image, "tcg", 1536)
    assert key != snapshot.snapshot_key(image, "tcg", 2048)
    assert key != snapshot.snapshot_key(image, "kvm", 1536)
    other = GuestImage(tmp_path, {"input_hash": "x", "files": {"disk.qcow2": {"sha256": "d2"}}})
    assert key != snapshot.snapshot_key(other, "tcg", 1536)
    # What differs between trials (ports, listen address, tap and file names) is not in the machine.
    machine = snapshot.machine_argv(image, "tcg", 1536)
    assert "-vnc" not in machine and "-spice" not in machine and "-incoming" not in machine
    # The storage client's headless guest is another machine: its kernel command line masks the kiosk.
    from qoelab.storage.guest import HEADLESS_APPEND

    headless = snapshot.snapshot_key(image, "tcg", 1536, HEADLESS_APPEND)
    assert headless != key and headless == snapshot.snapshot_key(image, "tcg", 1536, list(HEADLESS_APPEND))
    assert HEADLESS_APPEND[0] in " ".join(snapshot.machine_argv(image, "tcg", 1536, HEADLESS_APPEND))


def test_it_rejects_too_little_memory(tmp_path: Path) -> None:
    with pytest.raises(ParameterError, match="memory_mb: must be 256..16384"):
        spec(tmp_path, memory_mb=128)


def test_qemu_accepts_the_argv_it_is_given(tmp_path: Path) -> None:
    qemu = shutil.which("qemu-system-x86_64")
    if qemu is None:
        pytest.skip("qemu-system-x86_64 not installed (apt-get install qemu-system-x86)")
    # -S: parse and build the machine, never run it; needs an overlay and kernel files to exist.
    (tmp_path / "vmlinuz").write_bytes(b"")
    (tmp_path / "initrd.img").write_bytes(b"")
    subprocess.run(["qemu-img", "create", "-q", "-f", "qcow2", str(tmp_path / "o.qcow2"), "16M"], check=True)
    argv = qemu_argv(spec(tmp_path, listen_ip="127.0.0.1", vnc_display=None, spice_port=None), qemu)
    argv = [a for a in argv if a not in ("-kernel", "-initrd", "-append")]  # empty kernel would fail to load
    drop = {str(tmp_path / "vmlinuz"), str(tmp_path / "initrd.img")}
    argv = [a for a in argv if a not in drop and not a.startswith("root=")]
    # -S builds the machine and waits; a bad option makes QEMU exit at once with a message.
    proc = subprocess.Popen([*argv, "-S", "-monitor", "none"], stderr=subprocess.PIPE, text=True)
    try:
        with pytest.raises(subprocess.TimeoutExpired):
            proc.wait(timeout=3)
    finally:
        proc.kill()
        _, err = proc.communicate(timeout=10)
    assert proc.returncode == -9, err


def test_it_falls_back_to_tcg_when_kvm_runs_no_guest() -> None:
    accel, why = choose_accel("auto", KvmProbe(False, "KVM guest printed nothing"))
    assert accel == "tcg" and "falling back to TCG" in why


def test_it_prefers_kvm_when_the_probe_guest_booted() -> None:
    assert choose_accel("auto", KvmProbe(True, "booted"))[0] == "kvm"


def test_it_refuses_kvm_when_asked_for_it_and_it_does_not_run() -> None:
    with pytest.raises(AcceleratorError, match="KVM cannot run guests"):
        choose_accel("kvm", KvmProbe(False, "no /dev/kvm"))


def test_it_refuses_to_fall_back_when_tcg_is_disabled() -> None:
    with pytest.raises(AcceleratorError, match="TCG is disabled"):
        choose_accel("auto", KvmProbe(False, "no /dev/kvm"), allow_tcg=False)


def test_it_rejects_an_unknown_accelerator() -> None:
    with pytest.raises(ParameterError, match="accel: must be auto, kvm or tcg"):
        choose_accel("hvf", None)


def test_overlays_are_named_by_prefix_and_token_and_found_again(tmp_path: Path) -> None:
    a = vmguest.overlay_path("qvtest", "0123abcd", tmp_path)
    assert a.name == "qvtest-0123abcd.qcow2"
    b = vmguest.overlay_path("qvtest", directory=tmp_path)
    assert b != a and b.name.startswith("qvtest-")
    other = vmguest.overlay_path("qvother", "ffffffff", tmp_path)
    for p in (a, b, other):
        p.write_bytes(b"")
    (tmp_path / "qvtest-notes.txt").write_bytes(b"")
    assert vmguest.overlays_of("qvtest", tmp_path) == sorted([a, b])


def test_it_rejects_a_prefix_that_cannot_name_a_tap() -> None:
    with pytest.raises(ParameterError, match="prefix"):
        vmguest.overlay_path("Way-Too-Long-Prefix-For-A-Tap")


def test_an_overlay_is_copy_on_write_over_the_base(tmp_path: Path) -> None:
    if shutil.which("qemu-img") is None:
        pytest.skip("qemu-img not installed (apt-get install qemu-utils)")
    base = tmp_path / "base.qcow2"
    subprocess.run(["qemu-img", "create", "-q", "-f", "qcow2", str(base), "64M"], check=True)
    ov = vmguest.create_overlay(base, vmguest.overlay_path("qvtest", "00000001", tmp_path))
    info = json.loads(
        subprocess.run(
            ["qemu-img", "info", "--output=json", str(ov)], capture_output=True, text=True, check=True
        ).stdout
    )
    assert info["backing-filename"] == str(base) and info["backing-filename-format"] == "qcow2"


def test_the_cache_key_changes_with_the_package_list(tmp_path: Path) -> None:
    for n in ("build.sh", "packages.txt"):
        shutil.copy(BUILD_DIR / n, tmp_path / n)
    before = input_hash(tmp_path)
    assert before == input_hash(tmp_path)
    with open(tmp_path / "packages.txt", "a") as f:
        f.write("htop\n")
    assert input_hash(tmp_path) != before


def test_the_python_cache_key_matches_the_one_build_sh_records(tmp_path: Path) -> None:
    shell = subprocess.run(
        ["bash", "-c", f"cat {BUILD_DIR}/build.sh {BUILD_DIR}/packages.txt | sha256sum"],
        capture_output=True, text=True, check=True,
    ).stdout.split()[0]  # fmt: skip
    assert shell == input_hash()


def test_a_missing_image_says_run_make_vm_image(tmp_path: Path) -> None:
    with pytest.raises(MissingImageError, match="run make vm-image"):
        load_image(tmp_path)


def test_an_image_is_stale_when_its_manifest_hash_differs(tmp_path: Path) -> None:
    for n in ("disk.qcow2", "vmlinuz", "initrd.img"):
        (tmp_path / n).write_bytes(b"x")
    (tmp_path / "manifest.json").write_text(json.dumps({"input_hash": "0" * 64}))
    assert not load_image(tmp_path).is_current()
    (tmp_path / "manifest.json").write_text(json.dumps({"input_hash": input_hash()}))
    assert load_image(tmp_path).is_current()


def test_a_blank_browser_window_is_not_a_painted_page() -> None:
    from PIL import Image, ImageDraw

    blank = Image.new("RGB", (800, 600), (246, 245, 244))
    assert not vmguest.page_painted(blank)
    page = blank.copy()
    ImageDraw.Draw(page).rectangle((300, 250, 460, 306), fill=(224, 16, 122))  # the workload's link block
    assert vmguest.page_painted(page)


def test_the_guest_ready_line_gives_its_uptime(tmp_path: Path) -> None:
    log = tmp_path / "ready.log"
    assert vmguest._ready_line(log) is None
    log.write_bytes(b"garbage\r\nQOELAB-READY 38.67\r\n")
    assert vmguest._ready_line(log) == 38.67
    log.write_bytes(b"QOELAB-READY\r\n")
    assert vmguest._ready_line(log) == -1.0


def test_the_kvm_answer_is_remembered_until_the_host_reboots(tmp_path: Path, monkeypatch) -> None:
    calls = []

    def probe(kernel: Path) -> KvmProbe:
        calls.append(kernel)
        return KvmProbe(False, "KVM guest printed nothing within 8 s")

    monkeypatch.setattr(vmguest, "PROBE_CACHE", tmp_path / "kvm-probe.json")
    monkeypatch.setattr(vmguest, "probe_kvm", probe)
    monkeypatch.setattr(vmguest, "qemu_binary", lambda: "/usr/bin/qemu-system-x86_64")
    first = vmguest._kvm_probe.__wrapped__("/img/vmlinuz")
    again = vmguest._kvm_probe.__wrapped__("/img/vmlinuz")
    assert len(calls) == 1 and not first.usable and not again.usable
    assert again.reason.startswith("KVM guest printed nothing") and "probed at" in again.reason
    vmguest._kvm_probe.__wrapped__("/other/vmlinuz")  # another kernel: probed again
    assert len(calls) == 2


def test_only_the_newest_snapshots_are_kept(tmp_path: Path, monkeypatch) -> None:
    import json

    from qoelab.vm import snapshot

    monkeypatch.setenv(vmguest.ENV_OVERLAY_DIR, str(tmp_path))
    for i, key in enumerate(["aaaa", "bbbb", "cccc"]):
        d = snapshot.snapshot_root() / key
        d.mkdir(parents=True)
        (d / "disk.qcow2").write_bytes(b"")
        (d / "state.bin").write_bytes(b"")
        (d / "meta.json").write_text(
            json.dumps({"key": key, "accel": "tcg", "memory_mb": 1536, "created_at": i})
        )
    (snapshot.snapshot_root() / "half.tmp").mkdir()  # being saved: not a snapshot, never pruned here
    removed = snapshot.prune_snapshots(keep=2)
    assert [Path(r).name for r in removed] == ["aaaa"]
    assert sorted(p.name for p in snapshot.snapshot_root().iterdir()) == ["bbbb", "cccc", "half.tmp"]
    assert snapshot.load_snapshot("cccc").memory_mb == 1536 and snapshot.load_snapshot("aaaa") is None


def test_the_newest_snapshots_are_kept_per_kind(tmp_path: Path, monkeypatch) -> None:
    """A host keeps its desktop guest and its headless one: a new headless state never evicts the
    desktop's, however many headless ones came after it."""
    import json

    from qoelab.vm import snapshot

    monkeypatch.setenv(vmguest.ENV_OVERLAY_DIR, str(tmp_path))
    made = [("desk1", None), ("head1", "headless"), ("head2", "headless"), ("head3", "headless")]
    for i, (key, kind) in enumerate(made):
        d = snapshot.snapshot_root() / key
        d.mkdir(parents=True)
        (d / "disk.qcow2").write_bytes(b"")
        (d / "state.bin").write_bytes(b"")
        meta = {
            "key": key,
            "accel": "tcg",
            "memory_mb": 1536,
            "created_at": i,
            **({"kind": kind} if kind else {}),
        }
        (d / "meta.json").write_text(json.dumps(meta))
    removed = snapshot.prune_snapshots(keep=2)
    assert [Path(r).name for r in removed] == ["head1"]
    assert snapshot.load_snapshot("desk1").kind == "desktop"  # made before kinds were recorded
    assert snapshot.load_snapshot("head3").provenance()["kind"] == "headless"


def test_the_guests_reports_are_its_serial_lines_and_the_kernels_oom_kills(tmp_path: Path) -> None:
    ready, console = tmp_path / "ready.log", tmp_path / "console.log"
    exit_line = "QOELAB-X2GO-BROWSER-EXIT 1 88.0 available_mb=12 Trace/breakpoint trap"
    ready.write_text(f"QOELAB-READY 41.2\n{exit_line}\n")
    console.write_text("[ 1.0] systemd[1]: Started x\n[ 87.9] Out of memory: Killed process 812 (chromium)\n")
    guest = vmguest.RunningGuest(
        name="qvt-0a1b2c3d", pid=1, accel="tcg", accel_reason="", overlay=tmp_path / "o.qcow2",
        console_log=console, image=None, listen_ip="198.18.0.2", vnc_port=None, spice_port=None, ns=None,
        ready_log=ready,
    )  # type: ignore[arg-type]  # fmt: skip
    assert guest.reports() == [
        exit_line,
        "[ 87.9] Out of memory: Killed process 812 (chromium)",
    ]
    ready.unlink()
    console.write_text("")
    assert guest.reports() == []


def test_only_an_x2go_viewer_that_ended_before_the_measurement_earns_another_session(tmp_path: Path) -> None:
    from qoelab.procs import ProcSet
    from qoelab.vm.bench import _viewer_ended_early

    procs = ProcSet("qvt0", tmp_path)
    server = procs.spawn("page-server", ["sleep", "60"])
    try:
        viewer = procs.spawn("viewer-x2go", ["true"])
        viewer.popen.wait(timeout=10)
        assert _viewer_ended_early(procs, 1, {})
        assert not _viewer_ended_early(procs, 1, {"setup_s": 9.0})  # measuring had begun
        assert not _viewer_ended_early(procs, 2, {})  # not this attempt's viewer
        procs.stop_all(keep=1)  # the retry stops its own processes, never the page server
        assert [p.name for p in procs.procs] == ["page-server"] and server.alive()
    finally:
        procs.stop_all()
    assert not server.alive()


def test_an_x2go_session_that_ends_early_gets_one_more_and_each_restart_is_returned(tmp_path: Path) -> None:
    from collections.abc import Callable
    from types import SimpleNamespace

    from qoelab.procs import ProcSet, SetupError
    from qoelab.vm.bench import X2GO_SESSION_ATTEMPTS, _measure_reporting_the_guest
    from qoelab.vm.reports import X2GO_BROWSER_STALL

    guest = SimpleNamespace(reports=lambda: ["[ 40.1] chromium exited"])

    def ends_early(times: int) -> tuple[Callable[[], str], list[int]]:
        calls: list[int] = []

        def measure() -> str:
            calls.append(1)
            if len(calls) <= times:  # this attempt's viewer is gone before the first page
                procs.spawn("viewer-x2go", ["true"]).popen.wait(timeout=10)
                raise SetupError("no first page")
            return "measured"

        return measure, calls

    procs = ProcSet("qvt1", tmp_path)
    try:
        server = procs.spawn("page-server", ["sleep", "60"])
        home = tmp_path / "client-home"
        measure, calls = ends_early(X2GO_SESSION_ATTEMPTS - 1)
        heard: list[dict] = []
        got, restarts = _measure_reporting_the_guest(measure, procs, guest, {}, home, heard.append)
        assert got == "measured" and len(calls) == X2GO_SESSION_ATTEMPTS
        assert len(restarts) == X2GO_SESSION_ATTEMPTS - 1 and heard == restarts
        assert restarts[0] == {"error": "no first page", "guest_reports": ["[ 40.1] chromium exited"]}
        assert [p.name for p in procs.procs] == ["page-server"] and server.alive()  # the viewer stopped
        measure, calls = ends_early(X2GO_SESSION_ATTEMPTS)
        with pytest.raises(SetupError, match="no first page; the guest reported: .*chromium exited"):
            _measure_reporting_the_guest(measure, procs, guest, {}, home, heard.append)
        # The last failure also says what the guest shows of its X2Go session (read over ssh).
        measure, calls = ends_early(X2GO_SESSION_ATTEMPTS)
        with pytest.raises(SetupError, match=r"chromium exited'\]; in the guest: 12 Ss x2goagent$"):
            _measure_reporting_the_guest(measure, procs, guest, {}, home, heard.append,
                                         lambda: "in the guest: 12 Ss x2goagent")  # fmt: skip
        measure, calls = ends_early(1)
        with pytest.raises(SetupError) as vnc:  # VNC has no session to start again
            _measure_reporting_the_guest(measure, procs, guest, {}, home, None)
        assert len(calls) == 1 and X2GO_BROWSER_STALL not in str(vnc.value)
        # The session's browser restarted by the image's stall check until it gave up: the error names
        # the stall (below: only exactly then).
        guest.reports = lambda: [*(f"QOELAB-BROWSER-RESTART x2go {n} {400 + n}.5" for n in (1, 2)),
                                 "QOELAB-BROWSER-GAVE-UP x2go 3 600.1"]  # fmt: skip
        measure, calls = ends_early(X2GO_SESSION_ATTEMPTS)
        with pytest.raises(SetupError, match=f"no first page; {X2GO_BROWSER_STALL} \\(3 starts stalled"):
            _measure_reporting_the_guest(measure, procs, guest, {}, home, heard.append)
        measure, calls = ends_early(1)
        with pytest.raises(SetupError) as vnc:  # the same lines in a VNC trial: no X2Go session to blame
            _measure_reporting_the_guest(measure, procs, guest, {}, home, None)
        assert X2GO_BROWSER_STALL not in str(vnc.value)
    finally:
        procs.stop_all()


# The guest's browsers each name their role on ttyS1 (vm-images/build.sh): the console kiosk and an
# X2Go session's browser. Only the latter giving up before the measurement's setup is the X2Go stall.
X2GO_GAVE_UP = [*(f"QOELAB-BROWSER-RESTART x2go {n} {400 + n}.5" for n in (1, 2)),
                "QOELAB-BROWSER-GAVE-UP x2go 3 600.1"]  # fmt: skip
CONSOLE_GAVE_UP = [*(f"QOELAB-BROWSER-RESTART console {n} {60 * n}.0" for n in (1, 2)),
                   "QOELAB-BROWSER-GAVE-UP console 3 241.0"]  # fmt: skip


def _failing_x2go_measure(procs, timings: dict[str, float], *, after_setup: bool, message: str):
    """A measurement that fails with ``message``: after its setup completed, or with its viewer gone."""
    from qoelab.procs import SetupError

    def measure() -> str:
        if after_setup:
            timings["setup_s"] = 12.0
        else:
            procs.spawn("viewer-x2go", ["true"]).popen.wait(timeout=10)
        raise SetupError(message)

    return measure


def test_the_browser_lines_are_counted_by_role_and_old_lines_by_no_role() -> None:
    from qoelab.vm.reports import UNKNOWN_ROLE, BrowserStarts, browser_reports

    mixed = [
        "QOELAB-BROWSER-RESTART console 1 61.0",
        "QOELAB-X2GO-BROWSER-EXIT 1 88.0 available_mb=12 Trace/breakpoint trap",
        *X2GO_GAVE_UP[:2],
        "QOELAB-BROWSER-RESTART 1 30.0",  # an older image's line: which browser is not said
        "[ 87.9] Out of memory: Killed process 812 (chromium)",
        *X2GO_GAVE_UP[2:],
        "QOELAB-BROWSER-RESTARTED x2go 1 1.0",  # not the mark
        "",
    ]
    assert browser_reports(mixed) == {
        "console": BrowserStarts(restarts=1, gave_up=False),
        "x2go": BrowserStarts(restarts=2, gave_up=True),
        UNKNOWN_ROLE: BrowserStarts(restarts=1, gave_up=False),
    }
    assert browser_reports([]) == {} and browser_reports(["QOELAB-READY 41.2"]) == {}


def test_an_old_images_restart_lines_are_never_an_x2go_browsers() -> None:
    from qoelab.vm.reports import UNKNOWN_ROLE, browser_reports, x2go_stall_note

    old = ["QOELAB-BROWSER-RESTART 1 421.7", "QOELAB-BROWSER-RESTART 2 513.6", "QOELAB-BROWSER-GAVE-UP 3 600"]
    found = browser_reports(old)
    assert list(found) == [UNKNOWN_ROLE] and found[UNKNOWN_ROLE].restarts == 2
    assert x2go_stall_note(old, {}) == ""


def test_the_x2go_stall_label_needs_a_gave_up_x2go_browser_before_setup_completed() -> None:
    from qoelab.vm.reports import X2GO_BROWSER_STALL, x2go_stall_note

    note = x2go_stall_note(CONSOLE_GAVE_UP + X2GO_GAVE_UP, {})
    assert note == f"{X2GO_BROWSER_STALL} (3 starts stalled; docs/vm.md)"
    assert x2go_stall_note(X2GO_GAVE_UP, {"setup_s": 12.0}) == ""  # the page was shown: another failure
    assert x2go_stall_note(X2GO_GAVE_UP[:2], {}) == ""  # restarted, not given up: it may yet paint
    assert x2go_stall_note(CONSOLE_GAVE_UP, {}) == ""  # the console kiosk, not the session's browser


def test_an_unrelated_error_after_setup_keeps_its_message_without_the_stall_label(tmp_path: Path) -> None:
    from types import SimpleNamespace

    from qoelab.procs import ProcSet, SetupError
    from qoelab.vm.bench import _measure_reporting_the_guest
    from qoelab.vm.reports import X2GO_BROWSER_STALL

    guest = SimpleNamespace(reports=lambda: list(X2GO_GAVE_UP))
    procs = ProcSet("qvt2", tmp_path)
    timings: dict[str, float] = {}
    heard: list[dict] = []
    measure = _failing_x2go_measure(procs, timings, after_setup=True, message="calibration found no link")
    try:
        with pytest.raises(SetupError) as err:
            _measure_reporting_the_guest(measure, procs, guest, timings, tmp_path / "home", heard.append)
    finally:
        procs.stop_all()
    assert str(err.value).startswith("calibration found no link; the guest reported: ['QOELAB-BROWSER")
    assert X2GO_BROWSER_STALL not in str(err.value) and heard == []


def test_a_console_browsers_restarts_at_a_cold_boot_never_make_the_x2go_label(tmp_path: Path) -> None:
    from types import SimpleNamespace

    from qoelab.procs import ProcSet, SetupError
    from qoelab.vm.bench import X2GO_SESSION_ATTEMPTS, _measure_reporting_the_guest
    from qoelab.vm.reports import X2GO_BROWSER_STALL

    guest = SimpleNamespace(reports=lambda: list(CONSOLE_GAVE_UP))
    procs = ProcSet("qvt3", tmp_path)
    heard: list[dict] = []
    measure = _failing_x2go_measure(procs, {}, after_setup=False, message="no first page")
    try:
        with pytest.raises(SetupError, match="^no first page; the guest reported: ") as err:
            _measure_reporting_the_guest(measure, procs, guest, {}, tmp_path / "home", heard.append)
    finally:
        procs.stop_all()
    assert X2GO_BROWSER_STALL not in str(err.value) and len(heard) == X2GO_SESSION_ATTEMPTS - 1


def test_an_x2go_browser_that_gave_up_before_setup_is_named_with_its_restarts(tmp_path: Path) -> None:
    from types import SimpleNamespace

    from qoelab.procs import ProcSet, SetupError
    from qoelab.vm.bench import _measure_reporting_the_guest
    from qoelab.vm.reports import X2GO_BROWSER_STALL

    # A cold boot's console kiosk restarted once too: it is not counted.
    guest = SimpleNamespace(reports=lambda: [CONSOLE_GAVE_UP[0], *X2GO_GAVE_UP])
    procs = ProcSet("qvt4", tmp_path)
    measure = _failing_x2go_measure(procs, {}, after_setup=False, message="no first page")
    try:
        with pytest.raises(SetupError) as err:
            _measure_reporting_the_guest(measure, procs, guest, {}, tmp_path / "home", lambda _r: None)
    finally:
        procs.stop_all()
    first_line = str(err.value).splitlines()[0]
    assert first_line.startswith(
        f"no first page; {X2GO_BROWSER_STALL} (3 starts stalled; docs/vm.md); the guest reported: "
    )


def test_a_guest_that_never_shows_its_page_is_told_by_the_step_it_did_not_reach() -> None:
    from qoelab.vm.reports import step_not_reached

    assert step_not_reached([], None) == "the X server never started"
    booted = ["QOELAB-STEP x-server 30.1", "QOELAB-STEP window-manager 33.0"]
    assert step_not_reached(booted, None) == "the kiosk browser never mapped its window"
    mapped = [*booted, "QOELAB-READY 41.0"]
    assert step_not_reached(mapped, None) == "the kiosk browser never showed its start page"
    gave_up = [*mapped, "QOELAB-BROWSER-RESTART console 1 101.0", "QOELAB-BROWSER-RESTART console 2 161.0",
               "QOELAB-BROWSER-GAVE-UP console 3 221.0"]  # fmt: skip
    assert step_not_reached(gave_up, None) == (
        "the kiosk browser never showed its start page: the kiosk browser gave up after 3 starts"
    )
    shown = [*mapped, "QOELAB-PAGE-SHOWN console 1 47.5"]
    assert step_not_reached(shown, None) == "the screen never showed a painted page"
    assert step_not_reached(shown, "page server 10.213.0.1:8080") == (
        "the start page never opened the trial's first page "
        "(page server 10.213.0.1:8080, or the guest's network)"
    )
    # A restored guest's kiosk showed its start page before the state was saved.
    assert step_not_reached([], "page server 10.213.0.1:8080", restored=True).startswith(
        "the start page never opened the trial's first page"
    )
    # An X2Go session's browser giving up is not the kiosk's step.
    assert step_not_reached([*mapped, "QOELAB-BROWSER-GAVE-UP x2go 3 500.0"], None) == (
        "the kiosk browser never showed its start page"
    )


def test_a_qmp_socket_in_a_deep_work_directory_goes_to_a_short_one_removed_by_cleanup(tmp_path: Path) -> None:
    """QEMU refuses a unix socket path over 107 bytes; a trial's guest directory under a worker's
    work root was deeper than that (the storage client's first snapshot fell back to a boot)."""
    shallow = vmguest._qmp_socket_path(tmp_path, "qvu1-abcd", "qvu1")
    assert shallow == tmp_path / "qvu1-abcd-qmp.sock"
    deep = tmp_path / ("d" * 60) / "trial-3545-1" / "run" / "guest" / "snapshot"
    path = vmguest._qmp_socket_path(deep, "qlx6840bc2u3-28e38a10", "qvu1")
    assert len(str(path)) <= 107 and path.parent.name.startswith("qqmp-qvu1-") and path.parent.is_dir()
    removed = vmguest.cleanup_leftovers("qvu1")
    assert f"qmp directory {path.parent}" in removed and not path.parent.exists()


def test_prepare_without_an_image_says_run_make_vm_image(tmp_path: Path, capsys) -> None:
    from qoelab.cli import main

    assert main(["vm", "prepare", "--image-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert f"no guest image in {tmp_path}" in err and "run make vm-image" in err, err
