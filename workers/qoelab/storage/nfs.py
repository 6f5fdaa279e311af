"""The NFS target: nfs-ganesha (VFS FSAL) serving NFSv4 from a directory on a file-backed ext4.

No rpcbind: the core block turns off everything that needs one (``Protocols = 4``, no UDP, NLM or
RQUOTA), and ``Graceless`` skips the grace period so a fresh server answers at once. ganesha logs
that it cannot reach D-Bus or register with rpcbind; both are harmless here. Its config, pid file,
log and recovery directory are the instance's own. ``Bind_addr`` stays unset: ganesha refused to
start with ``Bind_addr = 127.0.0.1`` ("No IP address found"), and the namespace holds only the
server's address anyway.

The ext4 image is mounted in this (the host's) mount namespace before ganesha starts, so the
namespace's ``ip netns exec`` copy of the mount table has it: ``mount -o loop`` if it works, else
``fuse2fs``, else the export is a plain directory on the host's disk (``config["backing"]`` says
which, and why the others failed).
"""

from __future__ import annotations

import contextlib
import functools
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil

from qoelab.apt.targets import TargetError
from qoelab.emulation.system import find_tool, marked_env
from qoelab.errors import ParameterError, QoelabError
from qoelab.storage.base import (
    Popen,
    Run,
    StorageTarget,
    instance_dir,
    run_here,
    run_quietly,
    unmount,
    wait_for,
)

NFS_PORT = 2049
PSEUDO = "/export"
BACKINGS = ("auto", "loop", "fuse2fs", "directory")
HARMLESS = ("DBUS", "dbus", "rpcbind", "Cannot register", "principal nfs", "keytab", "krb5", "gssd")


class NfsTarget(StorageTarget):
    kind = "nfs"
    skip_in_tail = HARMLESS

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.export_dir = self.directory / "export"  # what the client sees at ``PSEUDO``
        self.port = NFS_PORT

    def libnfs_url(self, path: str = "/") -> str:
        """A libnfs URL (nfs-ls, nfs-cp, nfs-cat) of ``path`` in the export, over NFSv4."""
        return libnfs_url(self.endpoint, self.port, path)


def libnfs_url(endpoint: str, port: int, path: str = "/") -> str:
    # libnfs takes no port in the authority, only as ``nfsport=``.
    return f"{endpoint}/{path.lstrip('/')}?version=4" + ("" if port == NFS_PORT else f"&nfsport={port}")


def ganesha_config(export_dir: Path, recovery: Path, port: int, export_options: dict[str, str]) -> str:
    options = {"Access_Type": "RW", "Squash": "No_Root_Squash", "SecType": "sys", **export_options}
    lines = "\n".join(f"    {key} = {value};" for key, value in options.items())
    return f"""NFS_CORE_PARAM {{
    Protocols = 4;
    Enable_UDP = false;
    Enable_NLM = false;
    Enable_RQUOTA = false;
    NFS_Port = {port};
}}
NFS_KRB5 {{
    Active_krb5 = false;
}}
NFSV4 {{
    Graceless = true;
    RecoveryRoot = "{recovery}";
}}
EXPORT {{
    Export_Id = 1;
    Path = "{export_dir}";
    Pseudo = "{PSEUDO}";
    Protocols = 4;
    Transports = TCP;
{lines}
    FSAL {{
        Name = VFS;
    }}
}}
"""


def _mount_backing(target: NfsTarget, backing: str, size_bytes: int) -> dict[str, Any]:
    """Make ``target.export_dir`` a directory on a fresh ext4 image of ``size_bytes`` if possible."""
    info: dict[str, Any] = {"requested": backing}
    target.export_dir.mkdir()
    if backing == "directory":
        info["backing"] = "directory"
        return info
    image = target.directory / "export.ext4"
    with open(image, "wb") as f:
        f.truncate(size_bytes)
    made = run_here([find_tool("mkfs.ext4", "e2fsprogs"), "-q", "-F", "-E", "root_owner=0:0", str(image)])
    if made.returncode != 0:
        raise target.fail(f"mkfs.ext4 failed on {image}: {(made.stderr or made.stdout).strip()}")
    info.update(image=str(image), image_bytes=size_bytes, filesystem="ext4")
    tried: dict[str, str] = {}
    for method in ("loop", "fuse2fs") if backing == "auto" else (backing,):
        if method == "loop":
            out = run_here(["mount", "-t", "ext4", "-o", "loop", str(image), str(target.export_dir)])
        else:
            try:  # fuse2fs forks into the background; the marker lets cleanup find it
                argv = [find_tool("fuse2fs", "fuse2fs"), str(image), str(target.export_dir), "-o", "fakeroot"]
                out = subprocess.run(
                    argv, capture_output=True, text=True, timeout=30, env=marked_env(target.prefix)
                )
            except Exception as err:  # noqa: BLE001 - a missing tool is one more reason to fall back
                out = subprocess.CompletedProcess([], 1, "", str(err))
        if out.returncode == 0 and os.path.ismount(target.export_dir):
            step = _unmount_fuse2fs if method == "fuse2fs" else unmount
            target.undo(functools.partial(step, target.export_dir))
            info["backing"] = f"ext4 image ({method} mount)"
            if tried:
                info["failed"] = tried
            return info
        tried[method] = (out.stderr or out.stdout).strip() or f"exit code {out.returncode}"
    if backing != "auto":
        raise target.fail(f"could not mount the ext4 image with {backing}: {tried[backing]}")
    image.unlink()
    info.update(backing="directory on the host's disk (no ext4 mount worked)", failed=tried, image=None)
    return info


def _unmount_fuse2fs(point: Path, timeout_s: float = 10.0) -> bool:
    """Unmount a fuse2fs export and wait for its daemon to leave (SIGKILL after ``timeout_s``).

    fuse2fs exits on its own once the kernel tells it the mount is gone, but after ``umount``
    returns: without the wait a caller checking for leftovers can still see it (CI did, once).
    """
    daemons = []
    for proc in psutil.process_iter(["name", "cmdline"]):
        if proc.info["name"] == "fuse2fs" and str(point) in (proc.info["cmdline"] or []):
            daemons.append(proc)
    done = unmount(point)
    _gone, alive = psutil.wait_procs(daemons, timeout=timeout_s)
    for proc in alive:
        with contextlib.suppress(psutil.Error):
            proc.kill()
    psutil.wait_procs(alive, timeout=3)
    return done


def _lines(path: Path) -> list[str]:
    try:
        return path.read_text(errors="replace").splitlines()
    except OSError:
        return []


def _probe(run: Run, endpoint: str, ip: str, port: int) -> subprocess.CompletedProcess[str]:
    """An NFSv4 listing of the export's root (libnfs), or a bare TCP connect without libnfs."""
    with contextlib.suppress(QoelabError):
        nfs_ls = find_tool("nfs-ls", "libnfs-utils")
        return run_quietly(run, [nfs_ls, libnfs_url(endpoint, port)], timeout=5)
    return run_quietly(run, ["bash", "-c", f"exec 3<>/dev/tcp/{ip}/{port}"], timeout=5)


@contextlib.contextmanager
def nfs_target(
    popen: Popen,
    run: Run | None,
    ip: str,
    workdir: Path | None,
    prefix: str,
    *,
    port: int = NFS_PORT,
    size_bytes: int = 256 << 20,
    backing: str = "auto",
    export_options: dict[str, str] | None = None,
    keep_files: bool = False,
    ready_timeout_s: float = 20.0,
) -> Iterator[NfsTarget]:
    """nfs-ganesha serving ``nfs://ip:port/export`` (NFSv4 only) in the namespace of ``popen``/``run``.

    ``backing``: ``auto`` (loop mount, else fuse2fs, else a plain directory), or one of them only.
    ``export_options`` are added to (or replace) the EXPORT block's ``Access_Type = RW; Squash =
    No_Root_Squash; SecType = sys``. Raises TargetError (with ganesha's log tail) if it does not serve.
    """
    if backing not in BACKINGS:
        raise ParameterError("backing", f"must be one of {', '.join(BACKINGS)}, got {backing!r}")
    if not isinstance(size_bytes, int) or size_bytes < 16 << 20:
        raise ParameterError("size_bytes", f"must be an integer of at least 16 MiB, got {size_bytes!r}")
    ganesha = find_tool("ganesha.nfsd", "nfs-ganesha")
    run = run or run_here
    target = NfsTarget(prefix, instance_dir(prefix, "nfs", workdir), keep_files)
    try:
        backing_info = _mount_backing(target, backing, size_bytes)
        recovery = target.directory / "recovery"
        recovery.mkdir()
        text = ganesha_config(target.export_dir, recovery, port, export_options or {})
        conf = target.directory / "ganesha.conf"
        conf.write_text(text)
        log = target.directory / "ganesha.log"
        target.logs["ganesha"] = log
        version = run_here([ganesha, "-v"]).stdout.strip()
        argv = [ganesha, "-F", "-f", str(conf), "-L", str(log), "-p", str(target.directory / "ganesha.pid")]
        proc = target.start(popen, "ganesha-stdout", [*argv, "-N", "NIV_EVENT"])
        host = f"[{ip}]" if ":" in ip else ip
        target.endpoint, target.port = f"nfs://{host}{PSEUDO}", port
        target.config.update(
            server="nfs-ganesha",
            version=version.replace("NFS-Ganesha Release = ", ""),
            fsal="VFS",
            nfs_version=4,
            address=ip,
            port=port,
            pseudo=PSEUDO,
            config_text=text,
            **backing_info,
        )
        last = [subprocess.CompletedProcess([], 1, "", "")]

        def serving() -> bool:
            # ganesha starts even when it rejected part of its config (an EXPORT it dropped, say).
            rejected = [
                x.split("config_errs_to_log :CONFIG :", 1)[-1] for x in _lines(log) if "config_errs" in x
            ]
            if rejected:
                raise TargetError(f"nfs-ganesha rejected its config: {'; '.join(rejected)}")
            last[0] = _probe(run, target.endpoint, ip, port)
            return last[0].returncode == 0

        if not wait_for(serving, [proc], ready_timeout_s):
            why = "exited" if proc.poll() is not None else f"did not serve within {ready_timeout_s:g} s"
            probe = (last[0].stderr or last[0].stdout).strip()
            raise target.fail(f"nfs-ganesha {why} on {target.endpoint}" + (f" ({probe})" if probe else ""))
    except BaseException:
        target.stop()
        raise
    try:
        yield target
    finally:
        target.stop()
