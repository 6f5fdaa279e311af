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
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from qoelab.emulation import tcp
from qoelab.emulation.system import find_tool, marked_env, ns_exec_argv
from qoelab.emulation.topology import EmulatedLink
from qoelab.errors import ParameterError, QoelabError
from qoelab.vm.guest import (
    GUEST_IP,
    GuestError,
    GuestNotReadyError,
    RunningGuest,
    resolve_accel,
    running_guest,
)
from qoelab.vm.image import GuestImage, load_image

if TYPE_CHECKING:
    from qoelab.vm.snapshot import Snapshot

log = logging.getLogger("qoelab.storage.guest")

GUEST_SUBNET = "10.213.0.0/24"
# X and the browser would only burn the guest's (emulated) CPU; x2goserver was its busiest idle unit.
HEADLESS_APPEND = ("systemd.mask=qoelab-kiosk.service", "systemd.mask=x2goserver.service")
DEFAULT_MEMORY_MB = 1536


class GuestCommandError(QoelabError):
    """A command in the client guest failed; the message has its exit status and output tail."""


class GuestShell:
    """Root commands in the guest over ssh from namespace ``ns``, multiplexed on one connection."""

    def __init__(self, ns: str, key: Path, prefix: str, ip: str = GUEST_IP) -> None:
        self.ns, self.key, self.ip, self.prefix = ns, Path(key), ip, prefix
        # A socket path must stay under 108 bytes: a short private directory, not the trial's.
        self.control_dir = Path(tempfile.mkdtemp(prefix=f"qssh-{prefix}-"))
        self.control = self.control_dir / "%C"
        self.ssh = find_tool("ssh", "openssh-client")

    def argv(self, command: str, connect_timeout_s: int = 5) -> list[str]:
        options = {
            "BatchMode": "yes",
            "StrictHostKeyChecking": "no",
            "UserKnownHostsFile": "/dev/null",
            "LogLevel": "ERROR",
            "ConnectTimeout": str(connect_timeout_s),
            "ControlMaster": "auto",
            "ControlPath": str(self.control),
            "ControlPersist": "120",
            "ServerAliveInterval": "10",
        }
        opts = [x for k, v in options.items() for x in ("-o", f"{k}={v}")]
        return ns_exec_argv(self.ns, [self.ssh, *opts, "-i", str(self.key), f"root@{self.ip}", command])

    def prefix_argv(self) -> list[str]:
        """The argv up to the remote command: a driver appends the command's words (ssh joins them)."""
        return self.argv("")[:-1]

    def popen(self, command: str, **kwargs: Any) -> subprocess.Popen:
        kwargs.setdefault("env", marked_env(self.prefix))
        kwargs.setdefault("stdin", subprocess.DEVNULL)
        return subprocess.Popen(self.argv(command), **kwargs)

    def run(self, command: str, timeout: float = 120, check: bool = True,
            stdin: bytes | None = None) -> subprocess.CompletedProcess[str]:  # fmt: skip
        proc = self.popen(command, stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip
        try:
            out, err = proc.communicate(stdin, timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            raise GuestCommandError(f"in the guest: {command!r} did not end within {timeout:g} s") from None
        result = subprocess.CompletedProcess(proc.args, proc.returncode, out.decode(errors="replace"),
                                             err.decode(errors="replace"))  # fmt: skip
        if check and result.returncode != 0:
            tail = (result.stderr or result.stdout).strip()[-400:]
            raise GuestCommandError(f"in the guest: {command!r} exited {result.returncode}: {tail}")
        return result

    def put(self, local: Path, remote: str, mode: str = "0755") -> None:
        """Copy a file into the guest (through the ssh connection: no scp or sftp server needed)."""
        q = shlex.quote(remote)
        data = Path(local).read_bytes()
        self.run(f"cat > {q}.part && chmod {mode} {q}.part && mv {q}.part {q}", stdin=data)

    def close(self) -> None:
        """End the shared connection (its master process) and remove its socket directory."""
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            subprocess.run([*self.argv("true")[:-2], "-O", "exit", f"root@{self.ip}"], capture_output=True,
                           timeout=10, check=False, env=marked_env(self.prefix))  # fmt: skip
        shutil.rmtree(self.control_dir, ignore_errors=True)


def wait_for_ssh(shell: GuestShell, guest: RunningGuest, proc: subprocess.Popen, deadline: float) -> None:
    """Until ``true`` runs in the guest as root: sshd up, the key accepted."""
    last = ""
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise GuestNotReadyError(f"QEMU exited with status {proc.returncode} while the guest booted")
        res = subprocess.run(shell.argv("true", connect_timeout_s=3), capture_output=True, text=True,
                             timeout=30, check=False, env=marked_env(shell.prefix))  # fmt: skip
        if res.returncode == 0:
            return
        last = res.stderr.strip()[-200:]
        time.sleep(1.0)
    raise GuestNotReadyError(f"the client guest's sshd did not let root in before the deadline: {last}")


@dataclass
class StorageGuest:
    guest: RunningGuest
    shell: GuestShell
    tcp: dict[str, Any] = field(default_factory=dict)  # what the guest's TCP was set to, read back
    offloads: dict[str, Any] = field(default_factory=dict)  # the NIC's offloads, read back

    def mkdir(self, path: str) -> None:
        """``mkdir -p path`` in the guest (a write round's or a benchmark's directory)."""
        self.shell.run(f"mkdir -p {shlex.quote(path)}", timeout=120)

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
