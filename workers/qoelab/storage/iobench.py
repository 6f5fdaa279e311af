"""Drive ``storage-iobench`` (C, ``storage/csrc/``), the benchmark tool that runs inside the client.

The tool is thesis 001's own microbenchmark (a pool of pthreads servicing a shared queue of
whole-file read or write jobs; forms ``direct`` / ``sync`` / ``default``; notes §3), its metadata
benchmark (n × mkdir, touch, one ls, unlink, rmdir; §3.6) and an emulation of FileBench's
``varmail`` and ``fileserver`` personalities (§4.2; FileBench is not packaged in Debian). It writes
one JSON object per line; this module builds its argv from a spec, runs it locally or behind a
caller's argv prefix (``["ssh", "root@guest", "--"]``: the tool runs in the guest that mounts the
target), hands each live line to ``on_line`` and parses the final ``result`` line into dataclasses.
Plain ``phase <kind> start|end <ns>`` lines of ``meta --markers`` reach ``on_line`` as
``{"event": "phase", "kind", "edge", "realtime_ns"}``. Nothing here needs Django.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import tempfile
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Literal

from qoelab import helpers
from qoelab.errors import ParameterError, QoelabError
from qoelab.procs import end_process

NOT_BUILT = helpers.STORAGE_IOBENCH.not_built
FORMS = ("default", "sync", "direct")  # Table 4.1: no flag, O_SYNC, O_DIRECT
META_KINDS = ("mkdir", "touch", "ls", "unlink", "rmdir")  # the thesis' order (notes §3.6)
PERSONALITIES = ("varmail", "fileserver")
MAX_THREADS = 64
MAX_PER_DIR = 4096  # notes §3.4: the set spans dNNNN/ subdirectories past this many files
EMULATION_NOTE = "an emulation of FileBench 1.4.9.1's personality (FileBench is not packaged in Debian)"

OnLine = Callable[[dict[str, Any]], None]


class IobenchError(QoelabError):
    """storage-iobench failed; the message is its own sentence (its stderr line)."""


binary = helpers.STORAGE_IOBENCH.path


# ---- what to run ----


@dataclass(frozen=True)
class MicroSpec:
    """One round of the microbenchmark over the file set ``files`` × ``size`` bytes in ``dir``."""

    dir: str
    op: Literal["read", "write"]
    size: int
    files: int
    threads: int = 1
    form: Literal["default", "sync", "direct"] = "default"
    unit: int | None = None  # bytes per read()/write(); None: the file size (every family after §4.3)
    limit_s: float = 90.0  # notes §3.4: per-round time limit
    write_mode: Literal["delete", "overwrite"] = "delete"  # NFS/iSCSI delete first; Swift overwrites
    drop_caches: bool = False  # sync + drop the client's page cache before the round (needs root)
    cold_metadata: bool = False  # a block-device file system: checkpoint its journal, drop 3 times
    set_files: int | None = None  # the set's layout was made for this many files (>= files); None: files
    interval_s: float = 1.0

    def __post_init__(self) -> None:
        if self.op not in ("read", "write"):
            raise ParameterError("op", f"read or write, got {self.op!r}")
        if self.form not in FORMS:
            raise ParameterError("form", f"one of {', '.join(FORMS)}, got {self.form!r}")
        if self.write_mode not in ("delete", "overwrite"):
            raise ParameterError("write_mode", f"delete or overwrite, got {self.write_mode!r}")
        if not 1 <= self.threads <= MAX_THREADS:
            raise ParameterError("threads", f"1..{MAX_THREADS}, got {self.threads}")
        if not 1 <= self.files <= 100_000_000:
            raise ParameterError("files", f"1..100000000, got {self.files}")
        if not 0 <= self.size <= 1 << 40:
            raise ParameterError("size", f"0..{1 << 40} bytes, got {self.size}")
        if self.unit is not None and not 1 <= self.unit <= 1 << 30:
            raise ParameterError("unit", f"1..{1 << 30} bytes, got {self.unit}")
        if self.set_files is not None and self.set_files < self.files:
            raise ParameterError("set_files", f"at least files ({self.files}), got {self.set_files}")
        if not 0.001 <= self.limit_s <= 86400:
            raise ParameterError("limit_s", f"0.001..86400 s, got {self.limit_s}")
        if self.cold_metadata and not self.drop_caches:
            raise ParameterError("cold_metadata", "only with drop_caches (it makes the drop reach metadata)")
        if self.form == "direct":
            for name, v in (("size", self.size), ("unit", self.unit or 0)):
                if v % 512:
                    raise ParameterError(name, f"a multiple of 512 with form direct, got {v}")

    def argv(self) -> list[str]:
        out = ["micro", "--dir", self.dir, "--op", self.op, "--size", str(self.size)]
        out += ["--files", str(self.files), "--threads", str(self.threads), "--form", self.form]
        out += ["--limit", f"{self.limit_s:g}", "--interval", f"{self.interval_s:g}"]
        if self.unit is not None:
            out += ["--unit", str(self.unit)]
        if self.op == "write":
            out += ["--write-mode", self.write_mode]
        if self.set_files is not None:
            out += ["--set-files", str(self.set_files)]
        if self.drop_caches:
            out.append("--drop-caches")
        if self.cold_metadata:
            out.append("--cold-metadata")
        return out


@dataclass(frozen=True)
class PrepareSpec:
    """Create a (read) file set: ``files`` files of ``size`` bytes, written by ``threads`` threads."""

    dir: str
    size: int
    files: int
    threads: int = 32  # [repo] prepare-buckets.sh writes the read sets with 32 threads

    def __post_init__(self) -> None:
        if not 1 <= self.threads <= MAX_THREADS:
            raise ParameterError("threads", f"1..{MAX_THREADS}, got {self.threads}")
        if not 1 <= self.files <= 100_000_000:
            raise ParameterError("files", f"1..100000000, got {self.files}")

    def argv(self) -> list[str]:
        return ["prepare", "--dir", self.dir, "--size", str(self.size), "--files", str(self.files),
                "--threads", str(self.threads)]  # fmt: skip


@dataclass(frozen=True)
class MetaSpec:
    """The metadata benchmark in the empty directory ``dir``; ``kinds`` a contiguous part of the
    sequence (run ``ls`` alone after remounting a FUSE client, as the author's driver did)."""

    dir: str
    n: int
    kinds: tuple[str, ...] = META_KINDS
    drop_caches: bool = False
    markers: bool = False

    def __post_init__(self) -> None:
        if not 1 <= self.n <= 1_000_000:
            raise ParameterError("n", f"1..1000000, got {self.n}")
        bad = [k for k in self.kinds if k not in META_KINDS]
        if bad or not self.kinds:
            raise ParameterError("kinds", f"a contiguous part of {','.join(META_KINDS)}, got {self.kinds!r}")
        idx = [META_KINDS.index(k) for k in self.kinds]
        if idx != list(range(idx[0], idx[0] + len(idx))):
            raise ParameterError("kinds", f"a contiguous run of {','.join(META_KINDS)}, got {self.kinds!r}")

    def argv(self) -> list[str]:
        out = ["meta", "--dir", self.dir, "--n", str(self.n), "--kinds", ",".join(self.kinds)]
        if self.drop_caches:
            out.append("--drop-caches")
        if self.markers:
            out.append("--markers")
        return out


@dataclass(frozen=True)
class FilebenchSpec:
    """FileBench's ``varmail`` / ``fileserver`` (emulated) in ``dir``/<personality>; None keeps the
    stock personality's value (varmail: 1000 files of 16 KiB, flat, 16 threads; fileserver: 10000
    of 128 KiB, width 20, 50 threads; both 16 KiB mean append, 1 MiB iosize, 80 % preallocated)."""

    personality: Literal["varmail", "fileserver"]
    dir: str
    seconds: float = 120.0  # the thesis reads IOPS after 120 s
    threads: int | None = None
    files: int | None = None
    mean_size: int | None = None
    mean_append: int | None = None
    iosize: int | None = None
    prealloc: int | None = None
    dir_width: int | None = None
    seed: int = 1
    drop_caches: bool = False
    wait_before_run: bool = False  # pause after preallocation until ``before_run`` returns
    interval_s: float = 1.0

    def __post_init__(self) -> None:
        if self.personality not in PERSONALITIES:
            raise ParameterError("personality", f"varmail or fileserver, got {self.personality!r}")
        if not 0.1 <= self.seconds <= 86400:
            raise ParameterError("seconds", f"0.1..86400, got {self.seconds}")
        if self.threads is not None and not 1 <= self.threads <= 256:
            raise ParameterError("threads", f"1..256, got {self.threads}")
        if self.prealloc is not None and not 0 <= self.prealloc <= 100:
            raise ParameterError("prealloc", f"0..100, got {self.prealloc}")

    def argv(self) -> list[str]:
        out = [self.personality, "--dir", self.dir, "--seconds", f"{self.seconds:g}"]
        out += ["--seed", str(self.seed), "--interval", f"{self.interval_s:g}"]
        for opt, v in (("--threads", self.threads), ("--files", self.files), ("--mean-size", self.mean_size),
                       ("--mean-append", self.mean_append), ("--iosize", self.iosize),
                       ("--prealloc", self.prealloc), ("--dir-width", self.dir_width)):  # fmt: skip
            if v is not None:
                out += [opt, str(v)]
        if self.drop_caches:
            out.append("--drop-caches")
        if self.wait_before_run:
            out.append("--wait-before-run")
        return out


# ---- what came back ----


def _take(cls: type, d: dict[str, Any], **extra: Any) -> Any:
    names = {f.name for f in fields(cls)}
    return cls(**{k: v for k, v in d.items() if k in names}, **extra)


@dataclass(frozen=True)
class ThreadCount:
    thread: int
    serviced: int
    failed: int
    bytes: int
    elapsed_s: float


@dataclass(frozen=True)
class MicroResult:
    """A round: ``mib_s`` = bytes of successful jobs / 2^20 / ``internal_s`` (first job start to last
    job end); ``outer_s`` includes thread creation and join. ``time_limit_hit``: jobs were left."""

    mode: str
    op: str
    form: str
    write_mode: str | None
    files: int
    set_files: int
    size: int
    unit: int
    threads: int
    limit_s: float
    serviced: int
    failed: int
    not_started: int
    complete: bool
    time_limit_hit: bool
    bytes: int
    internal_s: float
    outer_s: float
    mib_s: float
    mib_s_outer: float
    first_error: str | None
    deleted_before: int  # files the delete-before-rewrite step removed (not timed)
    delete_s: float
    per_thread: list[ThreadCount]
    raw: dict[str, Any] = field(repr=False)
    cold_metadata: str | None = None  # "done", "unsupported" (NFS, FUSE: one drop) or None (not asked)


@dataclass(frozen=True)
class MetaOp:
    op: str
    n: int
    done: int
    failed: int
    seconds: float  # first operation to the end of the sync after the last
    ops_seconds: float
    sync_seconds: float
    start_ns: int  # CLOCK_REALTIME
    end_ns: int
    entries: int | None = None  # ls: the names it read


@dataclass(frozen=True)
class Marker:
    kind: str
    edge: Literal["start", "end"]
    realtime_ns: int


@dataclass(frozen=True)
class MetaResult:
    n: int
    ops: list[MetaOp]
    failed: int
    first_error: str | None
    markers: list[Marker]
    raw: dict[str, Any] = field(repr=False)

    def op(self, kind: str) -> MetaOp:
        return next(o for o in self.ops if o.op == kind)


@dataclass(frozen=True)
class Flowop:
    name: str  # the stock personality's flowop name (readfile3, wrtfile1, ...)
    op: str  # its kind (readwholefile, writewholefile, ...)
    ops: int
    ops_per_s: float
    errors: int
    bytes: int
    ms_per_op: float


@dataclass(frozen=True)
class FilebenchResult:
    """``iops`` = every flowop's operations / run time, as FileBench's "IO Summary" line."""

    personality: str
    emulation: str
    seconds: float
    threads: int
    files: int
    ops: int
    iops: float
    errors: int
    read_bytes: int
    write_bytes: int
    mb_s: float
    prealloc_s: float
    first_error: str | None
    flowops: list[Flowop]
    raw: dict[str, Any] = field(repr=False)


# ---- running it ----


def _marker(line: str) -> dict[str, Any] | None:
    parts = line.split()
    if len(parts) == 4 and parts[0] == "phase" and parts[2] in ("start", "end") and parts[3].isdigit():
        return {"event": "phase", "kind": parts[1], "edge": parts[2], "realtime_ns": int(parts[3])}
    return None


def run(
    args: Sequence[str],
    *,
    prefix: Sequence[str] = (),
    tool: str | Path | None = None,
    on_line: OnLine | None = None,
    before_run: Callable[[], None] | None = None,
    timeout: float | None = None,
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Run ``[*prefix, tool, *args]``; return its result line and every line before it (parsed).

    ``tool`` defaults to ``binary()`` (with a prefix: the path the far side has it at). Each line is
    handed to ``on_line`` as it arrives. On a ``prealloc_done`` line (``--wait-before-run``)
    ``before_run()`` is called, then the tool is told to go on. Raises IobenchError with the tool's
    own message when it exits non-zero, overruns ``timeout`` or ends without a result; the process
    group never outlives the call.
    """
    path = str(tool) if tool is not None else str(binary())
    if not prefix and not Path(path).exists():
        raise IobenchError(NOT_BUILT)
    argv = [*prefix, path, *args]
    events: list[dict[str, Any]] = []
    result: dict[str, Any] | None = None
    timed_out = threading.Event()
    with tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err,
                                text=True, start_new_session=True)  # fmt: skip

        def kill() -> None:
            timed_out.set()
            _killpg(proc)

        timer = threading.Timer(timeout, kill) if timeout else None
        if timer:
            timer.daemon = True
            timer.start()
        try:
            assert proc.stdout is not None and proc.stdin is not None
            for line in proc.stdout:
                line = line.strip()
                if not line:
                    continue
                ev = _marker(line)
                if ev is None:
                    try:
                        ev = json.loads(line)
                    except json.JSONDecodeError:
                        ev = {"event": "text", "text": line}
                if ev.get("event") == "result":
                    result = ev
                else:
                    events.append(ev)
                if on_line:
                    on_line(ev)
                if ev.get("event") == "prealloc_done":
                    if before_run:
                        before_run()
                    proc.stdin.write("go\n")
                    proc.stdin.flush()
            rc = proc.wait()
        finally:
            if timer:
                timer.cancel()
            _killpg(proc)
        err.seek(0)
        stderr = err.read().decode(errors="replace").strip()
    if timed_out.is_set():
        raise IobenchError(f"storage-iobench {args[0] if args else ''} overran its {timeout:g} s timeout")
    if rc != 0:
        last = stderr.splitlines()[-1] if stderr else f"storage-iobench exited with status {rc}"
        raise IobenchError(last)
    if result is None:
        raise IobenchError("storage-iobench ended without a result line")
    return result, events


def _killpg(proc: subprocess.Popen) -> None:
    end_process(proc, group=True)
    for f in (proc.stdin, proc.stdout):
        if f:
            with contextlib.suppress(OSError):
                f.close()


def _micro_result(d: dict[str, Any]) -> MicroResult:
    threads = [_take(ThreadCount, t) for t in d["per_thread"]]
    return _take(MicroResult, {**d, "per_thread": threads}, raw=d)


def micro(spec: MicroSpec, **kw: Any) -> MicroResult:
    """One microbenchmark round; ``kw`` as ``run`` (prefix, tool, on_line, timeout)."""
    return _micro_result(run(spec.argv(), **kw)[0])


def prepare(spec: PrepareSpec, **kw: Any) -> MicroResult:
    """Create the file set (then sync); the result has the same shape as a write round."""
    return _micro_result(run(spec.argv(), **kw)[0])


def meta(spec: MetaSpec, **kw: Any) -> MetaResult:
    """The metadata benchmark; with ``spec.markers`` the result holds every phase edge."""
    d, events = run(spec.argv(), **kw)
    markers = [Marker(e["kind"], e["edge"], e["realtime_ns"]) for e in events if e.get("event") == "phase"]
    ops = [_take(MetaOp, o) for o in d["ops"]]
    return MetaResult(d["n"], ops, d["failed"], d["first_error"], markers, raw=d)


def filebench(spec: FilebenchSpec, **kw: Any) -> FilebenchResult:
    """The FileBench personality (emulated) for ``spec.seconds``; IOPS per flowop and in total."""
    d, _ = run(spec.argv(), **kw)
    flows = [_take(Flowop, f) for f in d["flowops"]]
    return _take(FilebenchResult, {**d, "flowops": flows}, personality=d["mode"], raw=d)


def drop_caches(**kw: Any) -> float:
    """sync, then drop the (client's) page cache; seconds it took. Needs root where it runs."""
    return float(run(["dropcache"], **kw)[0]["seconds"])
