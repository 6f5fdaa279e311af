"""Load, attach and remove the Enhancement 1 sock_ops program (``rto_ewma.bpf.c``) with bpftool.

``rto_ewma(prefix, port)`` is the whole life of one run: a cgroup v2 child
``<cgroup2>/qoelab-<prefix>-rto``, the program pinned at ``/sys/fs/bpf/qoelab-<prefix>-rto`` with its
maps under ``/sys/fs/bpf/qoelab-<prefix>-maps/``, attached to the cgroup as sock_ops; the caller runs
the sender inside the cgroup (``sender_prefix``), reads ``counters`` and ``connections`` before the
block ends, and the block always detaches, unpins and removes the cgroup. ``cleanup(prefix)`` removes
what a killed owner left (found by name). ``available()`` says in one sentence why it cannot run.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import shlex
import shutil
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from qoelab import helpers

BPFFS = Path("/sys/fs/bpf")
NAME = "qoelab-{prefix}-rto"
RTO_MIN_CAP_US = 200_000  # TCP_RTO_MIN: the kernel refuses a larger TCP_BPF_RTO_MIN
COUNTER_KEYS = ("sockets", "samples", "floor_updates", "floor_capped", "resets", "setsockopt_failures",
                "cb_flag_failures", "kernel_below")  # fmt: skip


class BpfError(RuntimeError):
    """bpftool or the kernel refused; the message is one sentence."""


object_path = helpers.RTO_EWMA_OBJ.path


def cgroup2_root() -> Path | None:
    """Where the cgroup v2 hierarchy is mounted (/sys/fs/cgroup on a unified host, .../unified on a
    hybrid one), from /proc/mounts."""
    try:
        lines = Path("/proc/mounts").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        fields = line.split()
        if len(fields) >= 3 and fields[2] == "cgroup2":
            return Path(fields[1].replace("\\040", " "))
    return None


@dataclass(frozen=True)
class Handle:
    prefix: str
    port: int
    cgroup: Path
    prog: Path  # the pinned program
    maps: Path  # the directory of pinned maps


def _bpftool(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    tool = shutil.which("bpftool") or "/usr/sbin/bpftool"
    proc = subprocess.run([tool, *args], capture_output=True, text=True, timeout=30)
    if check and proc.returncode != 0:
        err = (proc.stderr or proc.stdout).strip().splitlines()
        raise BpfError(f"bpftool {' '.join(args[:3])} failed: {err[-1] if err else proc.returncode}")
    return proc


def _ensure_bpffs() -> None:
    if subprocess.run(["mountpoint", "-q", str(BPFFS)]).returncode != 0:
        BPFFS.mkdir(parents=True, exist_ok=True)
        subprocess.run(["mount", "-t", "bpf", "bpf", str(BPFFS)], check=True, capture_output=True)


def _le32(value: int) -> list[str]:
    return [str(b) for b in int(value).to_bytes(4, "little")]


def attach(cgroup_path: Path, port: int, *, prefix: str, base_us: int = RTO_MIN_CAP_US) -> Handle:
    """Load the program (pinned under the prefix), set its port and lowest floor, attach it to
    ``cgroup_path`` as sock_ops. Undoes itself if any step fails."""
    if not 1 <= port <= 65_535:
        raise ValueError(f"port must be 1-65535, got {port}")
    if not 1 <= base_us <= RTO_MIN_CAP_US:
        raise ValueError(f"base_us must be 1-{RTO_MIN_CAP_US}, got {base_us}")
    obj = object_path()
    if not obj.exists():
        raise BpfError(f"{obj} is not built (run make deps)")
    _ensure_bpffs()
    name = NAME.format(prefix=prefix)
    handle = Handle(prefix, port, Path(cgroup_path), BPFFS / name, BPFFS / f"qoelab-{prefix}-maps")
    try:
        _bpftool("prog", "load", str(obj), str(handle.prog), "type", "sockops", "pinmaps", str(handle.maps))
        _bpftool("map", "update", "pinned", str(handle.maps / "config"), "key", *_le32(0),
                 "value", *_le32(port), *_le32(base_us))  # fmt: skip
        _bpftool("cgroup", "attach", str(handle.cgroup), "sock_ops", "pinned", str(handle.prog))
    except BaseException:
        detach(handle)
        raise
    return handle


def detach(handle: Handle) -> None:
    """Detach from the cgroup (if attached) and unpin the program and its maps; never raises."""
    if handle.cgroup.exists():
        _bpftool("cgroup", "detach", str(handle.cgroup), "sock_ops", "pinned", str(handle.prog), check=False)
    with contextlib.suppress(OSError):
        handle.prog.unlink()
    shutil.rmtree(handle.maps, ignore_errors=True)


def _dump(path: Path) -> list[dict[str, Any]]:
    rows = json.loads(_bpftool("-j", "map", "dump", "pinned", str(path)).stdout or "[]")
    return [r["formatted"] for r in rows if "formatted" in r]


def counters(handle: Handle) -> dict[str, int]:
    """The program's counters: sockets taken on, samples, floor updates, capped floors, idle resets,
    bpf_setsockopt failures, cb-flag failures, and samples after which Linux's RTO was below the
    paper's (``kernel_below``)."""
    rows = _dump(handle.maps / "counters")
    value = rows[0]["value"] if rows else {}
    return {k: int(value.get(k, 0)) for k in COUNTER_KEYS}


def connections(handle: Handle) -> dict[int, dict[str, int]]:
    """Sender's local port -> the last sample's values (``mrtt_us``, our ``srtt_us``/``rttvar_us``/
    ``rto_us``, ``kernel_srtt_us``/``kernel_rttvar_us``, ``floor_us``) and its ``samples``/``resets``/
    ``kernel_below``."""
    return {int(r["key"]): {k: int(v) for k, v in r["value"].items()} for r in _dump(handle.maps / "conns")}


def sender_prefix(cgroup: Path) -> list[str]:
    """Argv prefix that puts the command into ``cgroup`` before it execs: ``[*prefix, *argv]``."""
    procs = shlex.quote(str(cgroup / "cgroup.procs"))
    return ["sh", "-c", f'echo $$ > {procs} && exec "$@"', "sh"]


def _remove_cgroup(path: Path) -> None:
    """Move any process left in ``path`` to the root of the hierarchy, then remove it."""
    root = cgroup2_root()
    with contextlib.suppress(OSError):
        for pid in (path / "cgroup.procs").read_text().split() if root else []:
            with contextlib.suppress(OSError):
                (root / "cgroup.procs").write_text(pid)  # type: ignore[operator]
    for _ in range(50):
        try:
            path.rmdir()
            return
        except FileNotFoundError:
            return
        except OSError:
            time.sleep(0.02)
    path.rmdir()


@contextlib.contextmanager
def rto_ewma(prefix: str, port: int, base_us: int = RTO_MIN_CAP_US) -> Iterator[Handle]:
    """A cgroup ``<cgroup2>/qoelab-<prefix>-rto`` with the program attached for ``port``; the
    handle's ``cgroup`` is where the sender must run. Always detaches, unpins, removes the cgroup."""
    root = cgroup2_root()
    if root is None:
        raise BpfError("no cgroup v2 hierarchy is mounted")
    cg = root / NAME.format(prefix=prefix)
    cg.mkdir()
    handle = None
    try:
        handle = attach(cg, port, prefix=prefix, base_us=base_us)
        yield handle
    finally:
        if handle is not None:
            detach(handle)
        _remove_cgroup(cg)


def cleanup(prefix: str) -> list[str]:
    """Remove pinned programs/maps and cgroups named ``qoelab-<prefix>...`` (a killed owner's)."""
    removed: list[str] = []
    root = cgroup2_root()
    cgroups = sorted(root.glob(f"qoelab-{prefix}*")) if root else []
    for cg in cgroups:
        if not cg.is_dir():
            continue
        for pin in BPFFS.glob(f"qoelab-{prefix}*"):
            if pin.is_file():
                _bpftool("cgroup", "detach", str(cg), "sock_ops", "pinned", str(pin), check=False)
        # A program attached but no longer pinned: detach it by id.
        with contextlib.suppress(BpfError, json.JSONDecodeError, KeyError):
            for row in json.loads(_bpftool("-j", "cgroup", "show", str(cg)).stdout or "[]"):
                _bpftool("cgroup", "detach", str(cg), row["attach_type"], "id", str(row["id"]), check=False)
    for pin in sorted(BPFFS.glob(f"qoelab-{prefix}*")) if BPFFS.is_dir() else []:
        try:
            shutil.rmtree(pin) if pin.is_dir() else pin.unlink()
            removed.append(f"bpf pin {pin.name}")
        except OSError:
            pass
    for cg in cgroups:
        try:
            _remove_cgroup(cg)
            removed.append(f"cgroup {cg.name}")
        except OSError:
            pass
    return removed


def _probe() -> None:
    """One loopback connection from a child in the cgroup: the kernel must call the program with
    RTT samples and accept TCP_BPF_RTO_MIN. Raises BpfError with the sentence."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)
    port = srv.getsockname()[1]

    def drain() -> None:
        with contextlib.suppress(OSError):
            conn, _ = srv.accept()
            with conn:
                while conn.recv(65_536):
                    pass

    thread = threading.Thread(target=drain, daemon=True)
    thread.start()
    code = ("import socket,sys,time\ns=socket.create_connection(('127.0.0.1',int(sys.argv[1])))\n"
            "for _ in range(20):\n s.sendall(b'x'*20000); time.sleep(0.005)\ns.close()")  # fmt: skip
    try:
        with rto_ewma(f"qlprobe{os.getpid()}", port, base_us=10_000) as h:
            subprocess.run([*sender_prefix(h.cgroup), "python3", "-c", code, str(port)], check=True,
                           timeout=20, capture_output=True)  # fmt: skip
            got = counters(h)
    finally:
        srv.close()
        thread.join(timeout=2)
    if got["sockets"] == 0:
        raise BpfError("the kernel did not run the sock_ops program for a connection from its cgroup")
    if got["samples"] == 0:
        raise BpfError("the kernel gave the program no RTT samples (BPF_SOCK_OPS_RTT_CB)")
    if got["setsockopt_failures"] or not got["floor_updates"]:
        raise BpfError("the kernel refuses TCP_BPF_RTO_MIN from the sock_ops program")


@functools.cache
def _available() -> tuple[bool, str]:
    if os.geteuid() != 0:
        return False, "loading a BPF program needs root"
    if not object_path().exists():
        return False, f"{object_path()} is not built (clang -target bpf; run make deps)"
    if not (shutil.which("bpftool") or Path("/usr/sbin/bpftool").exists()):
        return False, "bpftool is not installed (Debian package bpftool)"
    if cgroup2_root() is None:
        return False, "no cgroup v2 hierarchy is mounted"
    try:
        _probe()
    except (BpfError, OSError, subprocess.SubprocessError) as err:
        return False, str(err)
    return True, ""


def available() -> tuple[bool, str]:
    """(True, "") or (False, the reason in one sentence); the first call tries the program once."""
    return _available()
