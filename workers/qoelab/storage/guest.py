"""The storage benchmark's client: the lab's QEMU guest on the client side of the emulated link.

This kernel has no NFS client or iSCSI initiator, and one page cache would serve client and server
alike, so the thesis' client runs in the guest (docs/storage-bench.md, "Where the client runs"). The
guest boots headless (the kiosk and X2Go masked on the kernel command line) with its tap in the
client namespace; that namespace forwards between the tap and the link, and the server namespace
routes the guest's /24 back through it. So every byte between the guest and a target crosses the
emulator, while the worker's own ssh to the guest (over the tap only) does not. Commands run as
root over one persistent ssh connection, with the key the image was built with (vm-images/build.sh).
"""

from __future__ import annotations

import contextlib
import logging
import shlex
import subprocess
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from qoelab.emulation import tcp
from qoelab.emulation.system import ns_exec_argv
from qoelab.emulation.topology import EmulatedLink
from qoelab.errors import ParameterError, QoelabError
from qoelab.storage.measure import GUEST_TOOL
from qoelab.vm.guest import (
    GUEST_IP,
    GuestError,
    RunningGuest,
    resolve_accel,
    running_guest,
)
from qoelab.vm.image import GuestImage, load_image
from qoelab.vm.shell import GuestCommandError, GuestShell, wait_for_ssh

if TYPE_CHECKING:
    from qoelab.vm.snapshot import Snapshot

log = logging.getLogger("qoelab.storage.guest")

GUEST_SUBNET = "10.213.0.0/24"
# X and the browser would only burn the guest's (emulated) CPU; x2goserver was its busiest idle unit.
HEADLESS_APPEND = ("systemd.mask=qoelab-kiosk.service", "systemd.mask=x2goserver.service")
DEFAULT_MEMORY_MB = 1536


@dataclass
class StorageGuest:
    guest: RunningGuest
    shell: GuestShell
    tcp: dict[str, Any] = field(default_factory=dict)  # what the guest's TCP was set to, read back
    offloads: dict[str, Any] = field(default_factory=dict)  # the NIC's offloads, read back
    tool: str = GUEST_TOOL  # where ``client_guest`` copies the benchmark tool
    home: str = "/root"  # rclone's configuration and log
    drops_caches: bool = True  # the guest's page cache is the client's alone
    cpu_source: str = "the guest's /proc/stat (all vCPUs; idle and iowait not busy)"

    def mkdir(self, path: str) -> None:
        """``mkdir -p path`` in the guest (a write round's or a benchmark's directory)."""
        self.shell.run(f"mkdir -p {shlex.quote(path)}", timeout=120)

    def cold(self) -> None:
        """Nothing before a round: the benchmark tool drops the guest's cache itself (``drop_caches``)."""

    def provenance(self) -> dict[str, Any]:
        kernel = self.shell.run("uname -r", timeout=30).stdout.strip()
        return {**self.guest.provenance(), "role": "storage client", "kernel": kernel, "tcp": self.tcp,
                "offloads": self.offloads}  # fmt: skip


def _ssh_ready_in(key: Path, prefix: str) -> Callable[[str], Callable[..., None]]:
    """How a headless guest being saved says it is ready: root's ssh works (from its namespace)."""

    def ready_for(ns: str) -> Callable[..., None]:
        def ready(guest: RunningGuest, proc: subprocess.Popen, deadline: float) -> None:
            shell = GuestShell(ns, key, prefix)
            try:
                wait_for_ssh(shell, guest, proc, deadline)
            finally:
                shell.close()  # no ssh connection of the saving namespace lives on in the saved state

        return ready

    return ready_for


def _headless_snapshot(
    image: GuestImage, accel: str, prefix: str, memory_mb: int, workdir: Path, key: Path
) -> tuple[Snapshot | None, str | None]:
    """The host's saved headless guest (made now, once, when missing), or None and why not."""
    from qoelab.vm.snapshot import SnapshotError, get_snapshot

    try:
        chosen, _ = resolve_accel(accel, image)
        snap = get_snapshot(image, chosen, prefix, memory_mb, workdir, extra_append=HEADLESS_APPEND,
                            ready_for=_ssh_ready_in(key, prefix))  # fmt: skip
        return snap, None
    except (SnapshotError, GuestError) as err:
        log.warning("%s: no headless snapshot, the client guest boots instead: %s", prefix, err)
        return None, str(err)


OFFLOADS = {"tso": "tcp-segmentation-offload", "gso": "generic-segmentation-offload",
            "gro": "generic-receive-offload"}  # fmt: skip


def disable_offloads(shell: GuestShell) -> dict[str, Any]:
    """The thesis kept TCP offloads off on its client (notes §1.4, §4): segmentation and receive
    offloads off on the guest's NIC, read back (a feature the NIC cannot change is reported as is)."""
    dev = shell.run(f"ip -o route get {GUEST_IP.rsplit('.', 1)[0]}.1", timeout=30).stdout.split(" dev ")
    nic = dev[1].split()[0] if len(dev) > 1 else "eth0"
    shell.run(f"ethtool -K {shlex.quote(nic)} " + " ".join(f"{k} off" for k in OFFLOADS), timeout=30,
              check=False)  # fmt: skip
    shown = shell.run(f"ethtool -k {shlex.quote(nic)}", timeout=30, check=False).stdout
    state = {}
    for key, name in OFFLOADS.items():
        line = next((ln for ln in shown.splitlines() if ln.strip().startswith(name + ":")), "")
        state[key] = line.split(":", 1)[1].strip() if line else "unknown"
    return {"nic": nic, **state}


def guest_sysctls(settings: tcp.TcpSettings, link: EmulatedLink) -> dict[str, str]:
    """The one mechanism's ``net.ipv4`` values, and in the guest (a whole machine, unlike a namespace)
    also ``net.core.rmem_max`` / ``wmem_max``: the ceiling of a buffer a program sets itself. Fig. 3.2
    set both; without them iscsid's 512 KiB SO_RCVBUF is cut to the default 208 KiB and one iSCSI
    session gets about 210 KB per round trip."""
    values = {f"net.ipv4.{k}": v for k, v in tcp.sysctl_values(settings, link.profile).items()}
    for name, given in (("rmem_max", settings.rmem_max), ("wmem_max", settings.wmem_max)):
        if given:
            values[f"net.core.{name}"] = str(given)
    return values


def apply_tcp(shell: GuestShell, settings: tcp.TcpSettings, link: EmulatedLink) -> dict[str, Any]:
    """The trial's TCP in the guest (the client's stack now), by the one mechanism's values, read back."""
    values = guest_sysctls(settings, link)
    assignments = " ".join(shlex.quote(f"{k}={v}") for k, v in values.items())
    shell.run(f"sysctl -q -w {assignments}", timeout=30)
    got = shell.run("sysctl -n " + " ".join(values), timeout=30).stdout.splitlines()
    read = {k: " ".join(g.split()) for k, g in zip(values, got, strict=False)}
    wrong = {k: (v, read.get(k)) for k, v in values.items() if read.get(k) != " ".join(v.split())}
    if wrong:
        raise GuestCommandError(f"the guest's TCP did not take {wrong} (asked, read)")
    # keyed as the namespaces' read-back is (``tcp_congestion_control``), net.core by its full name
    return {
        "requested": settings.to_json(),
        "sysctl": {k.removeprefix("net.ipv4."): v for k, v in read.items()},
    }


@contextlib.contextmanager
def client_guest(
    link: EmulatedLink,
    prefix: str,
    workdir: Path,
    *,
    accel: str = "auto",
    memory_mb: int = DEFAULT_MEMORY_MB,
    ready_timeout_s: float = 300.0,
    tools: Sequence[Path] = (),
    start: str = "snapshot",
) -> Iterator[StorageGuest]:
    """Start the guest headless behind the link's client side; yield once root's ssh works, the
    trial's TCP is set in it and ``tools`` are copied to /usr/local/bin. Always stops it.

    ``start``: ``snapshot`` restores the host's saved headless guest (booted once to sshd and saved,
    :mod:`qoelab.vm.snapshot`; every trial starts from the same state, page cache included) and
    sets its clock; ``cold`` boots it. A snapshot that cannot be made or loaded falls back to a
    boot, and the guest's provenance says why."""
    image = load_image()
    key = image.directory / "root-key"
    if not key.is_file():
        raise QoelabError(f"the guest image has no root key ({key}): rebuild it with 'make vm-image'")
    if start not in ("snapshot", "cold"):
        raise ParameterError("guest_start", f"must be 'snapshot' or 'cold', got {start!r}")
    workdir.mkdir(parents=True, exist_ok=True)
    snapshot, snapshot_error = None, None
    if start == "snapshot":
        snapshot, snapshot_error = _headless_snapshot(
            image, accel, prefix, memory_mb, workdir / "snapshot", key
        )
    subprocess.run(ns_exec_argv(link.client_ns, ["sysctl", "-qw", "net.ipv4.ip_forward=1"]), check=True,
                   capture_output=True, timeout=20)  # fmt: skip
    link.add_route("server", GUEST_SUBNET, via=link.client_ip)
    shell = GuestShell(link.client_ns, key, prefix)

    def ready(guest: RunningGuest, proc: subprocess.Popen, deadline: float) -> None:
        wait_for_ssh(shell, guest, proc, deadline)

    try:
        with running_guest(prefix, workdir, ns=link.client_ns, image=image, accel=accel, vnc_display=None,
                           spice_port=None, ready_timeout=ready_timeout_s, memory_mb=memory_mb,
                           extra_append=HEADLESS_APPEND, ready=ready,
                           snapshot=snapshot) as guest:  # fmt: skip
            if snapshot_error and not guest.snapshot_error:
                guest.snapshot_error = snapshot_error
            if guest.start == "snapshot":
                # The saved clock is the moment of the save: file times and the tools' reports
                # would carry it. The host's time, to the microsecond the command leaves.
                shell.run(f"date -s @{time.time():.6f} >/dev/null", timeout=30)
            client = StorageGuest(guest, shell)
            client.tcp = apply_tcp(shell, link.profile.tcp, link)
            client.offloads = disable_offloads(shell)
            for tool in tools:
                shell.put(tool, f"/usr/local/bin/{Path(tool).name}")
            yield client
    finally:
        shell.close()
