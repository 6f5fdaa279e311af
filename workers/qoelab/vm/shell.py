"""Root commands in a lab guest over ssh, on one multiplexed connection (the image's root key).

The storage benchmark's client guest runs everything this way, and a failed X2Go session in a VM
trial is diagnosed this way (the session's processes and logs read from inside the guest).
"""

from __future__ import annotations

import contextlib
import shlex
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any, Protocol

from qoelab.emulation.system import find_tool, marked_env, ns_exec_argv
from qoelab.errors import QoelabError
from qoelab.vm.guest import GUEST_IP, GuestNotReadyError, RunningGuest


class GuestCommandError(QoelabError):
    """A command in the client guest failed; the message has its exit status and output tail."""


class Shell(Protocol):
    """Root shell commands where a storage client runs: ``GuestShell`` in the guest, or the storage
    benchmark's ``NamespaceShell`` on the host (``qoelab.storage.hostclient``)."""

    def prefix_argv(self) -> list[str]: ...

    def run(self, command: str, timeout: float = 120, check: bool = True,
            stdin: bytes | None = None) -> subprocess.CompletedProcess[str]: ...  # fmt: skip


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
