"""Thesis 001 on this host: the storage_bench measurements of docs/storage-bench.md.

Each run boots the client guest once and measures one target under one network row, with the job
type's own parameters (``qoelab.jobs.storage_bench``); where the thesis sweeps thread counts or n,
one boot serves every value (one round each) and each round becomes its own row, shaped as a
``storage_bench`` trial's ``{"params", "summary"}`` so the sb001 findings judge them unchanged.
Rows are appended to ``benchmarks/storage_bench/results/<set>.jsonl`` (an interrupted set resumes
where it stopped); ``--runs N`` repeats each run until it has N (the findings need n >= 2 for a
confidence interval); ``--only key=value`` (repeatable) keeps the runs whose point has that value
(a second run of just the rows one verdict needs); ``--table`` prints the tables and the verdicts.

    .venv/bin/python benchmarks/storage_bench/run.py --set meta-rtt
    .venv/bin/python benchmarks/storage_bench/run.py --set macro --runs 2
    .venv/bin/python benchmarks/storage_bench/run.py --set batch-1mb
    .venv/bin/python benchmarks/storage_bench/run.py --set meta-rtt --runs 2 --only rtt=0ms
    .venv/bin/python benchmarks/storage_bench/run.py --table
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import secrets
import shutil
import signal
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from types import SimpleNamespace
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "workers"))

from qoelab.findings import evaluate, render_markdown  # noqa: E402
from qoelab.jobs import storage_bench as job  # noqa: E402
from qoelab.params import validate_params  # noqa: E402
from qoelab.stats import mean_ci  # noqa: E402
from qoelab.storage.trial import run_storage  # noqa: E402

RESULTS = Path(__file__).with_name("results")
# Runs of one set may come from different sessions' machines: each row says which CPU it ran on.
CPU0 = Path("/proc/cpuinfo").read_text().split("\n\n")[0].splitlines()
CPUINFO = {k.strip(): v.strip() for k, _, v in (ln.partition(":") for ln in CPU0)}
HOST = {"cpu": CPUINFO.get("model name"), "bogomips": CPUINFO.get("bogomips"), "cores": os.cpu_count()}
TARGETS = ("nfs", "iscsi", "swift")
ROWS = {  # the thesis' network rows (notes §2): RTT applied as RTT/2 each way
    "ideal": {"rtt": "0ms"},
    "latency": {"rtt": "50ms"},
    "loss": {"rtt": "50ms", "loss": "0.1%"},
    "realistic": {"rtt": "50ms", "loss": "0.1%", "jitter": "10ms"},
}
THREADS = (1, 4, 16, 32)
SHOWN = ("mib_s", "mkdir_ms_per_op", "iops", "postmark_s", "postmark_tps", "amplification")  # per run


def _batch(
    size: str, set_size: str, rows: tuple[str, ...], **more: str
) -> list[tuple[dict[str, Any], str, tuple]]:
    point = {"family": "batch", "op": "read", "file_size": size, "set_size": set_size, "time_limit": "45s",
             **more}  # fmt: skip
    return [({"target": t, **point, **ROWS[r]}, "threads", THREADS) for r in rows for t in TARGETS]


def _schedulers(size: str, set_size: str) -> list[tuple[dict[str, Any], str, tuple]]:
    point = {"target": "iscsi", "family": "batch", "op": "read", "form": "sync", "file_size": size,
             "set_size": set_size, "time_limit": "45s", "rtt": "50ms"}  # fmt: skip
    return [({**point, "scheduler": s}, "threads", THREADS) for s in ("mq-deadline", "bfq")]


MACRO = (("varmail", {"seconds": "60s"}), ("fileserver", {"seconds": "60s", "files": 2000}),
         ("postmark", {"files": 100, "transactions": 500}))  # fmt: skip
# set -> runs: (point, the axis one boot sweeps, its values)
SETS: dict[str, list[tuple[dict[str, Any], str, tuple]]] = {
    "meta-rtt": [
        ({"target": t, "family": "metadata", "rtt": f"{rtt}ms"}, "meta_n", (10, 100))
        for rtt in (0, 20, 50, 160, 250)
        for t in TARGETS
    ],  # fmt: skip
    "batch-1mb": _batch("1mb", "64mb", ("ideal", "latency", "realistic")),
    # The thesis' "+0.1 % loss" row (50 ms, no jitter): Fig. 4.7d's Swift-saturates case.
    "batch-1mb-loss": _batch("1mb", "64mb", ("loss",)),
    "batch-4kb": _batch("4kb", "4mb", ("ideal", "latency", "realistic")),
    "batch-16mb": _batch("16mb", "128mb", ("ideal", "latency", "realistic")),
    "single": [
        ({"target": t, "family": "single", "op": op, "file_size": size, "rtt": "0ms"}, "", ())
        for t in TARGETS
        for op in ("read", "write")
        for size in ("4kb", "1mb", "16mb")
    ],  # fmt: skip
    # Ch. 6 on this host (docs/storage-bench.md says why each is smaller than the thesis'): FileBench's
    # run phase 60 s (the thesis: 120 s), fileserver with 2,000 files (its stock 10,000 of 128 KiB are
    # 1 GB to preallocate from a TCG guest), PostMark with 100 files and 500 transactions (the thesis'
    # 500 and 25,000 took NFS 11,681 s at +50 ms). PostMark on Swift is its own set: through rclone's
    # write cache each 512 B write is a FUSE request, and it may take most of an hour.
    "macro": [
        ({"target": t, "family": fam, **ROWS[r], **extra}, "", ())
        for fam, extra in MACRO
        for r in ("ideal", "latency")
        for t in TARGETS
        if not (fam == "postmark" and t == "swift")
    ],  # fmt: skip
    "macro-swift-postmark": [
        ({"target": "swift", "family": "postmark", **ROWS[r], **MACRO[2][1]}, "", ())
        for r in ("ideal", "latency")
    ],
    "macro-iscsi-bfq": [
        ({"target": "iscsi", "family": fam, "scheduler": "bfq", **ROWS[r], **extra}, "", ())
        for fam, extra in MACRO
        for r in ("ideal", "latency")
    ],  # fmt: skip
    "batch-16mb-loss": _batch("16mb", "256mb", ("loss",)),
    # Fig. 4.7d's Swift with rclone on the host (swift_client=host): the TCG guest's rclone reads 1 MiB
    # files below the 80 % of the line that "Swift fills the link" needs even unimpaired.
    "batch-1mb-swift-host": [
        ({**point, "swift_client": "host"}, axis, values)
        for point, axis, values in _batch("1mb", "64mb", ("ideal", "realistic"))
        if point["target"] == "swift"
    ],
    # Fig. 4.10 (§4.8): 1 Gbit/s; here the reheat's ceiling says how much of it the TCG guest can use.
    "gbit": _batch("16mb", "256mb", ("ideal", "latency"), rate="1gbit"),
    # Fig. 4.8: iSCSI sync reads at 50 ms under bfq (CFQ's stand-in) and mq-deadline (deadline's).
    "schedulers": _schedulers("1mb", "64mb"),
    "schedulers-16mb": _schedulers("16mb", "128mb"),
}


def _key(point: dict[str, Any]) -> str:
    return json.dumps(point, sort_keys=True)


def _matches(point: dict[str, Any], only: dict[str, str]) -> bool:
    return all(str(point.get(k)) == v for k, v in only.items())


def run_set(name: str, runs: int = 1, only: dict[str, str] | None = None) -> None:
    path = RESULTS / f"{name}.jsonl"
    done = set()  # (run, repetition); a record from before repetitions is the first
    if path.exists():
        recs = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        done = {(r["run"], r.get("rep", 1)) for r in recs}
    RESULTS.mkdir(exist_ok=True)
    for rep, (point, axis, values) in ((k, p) for k in range(1, runs + 1) for p in SETS[name]):
        if (_key(point), rep) in done or not _matches(point, only or {}):
            continue
        params = validate_params(job.StorageBenchParams, point)
        run = job.storage_run(params)
        if axis == "threads":
            run = dataclasses.replace(run, threads=tuple(values))
        elif axis == "meta_n":
            run = dataclasses.replace(run, meta_n=tuple(values))
        work = Path(tempfile.mkdtemp(prefix="qoelab-sb-bench-"))
        started = time.monotonic()
        try:
            out = run_storage(run, "qsb" + secrets.token_hex(3), work)
        except Exception as err:  # one failed run is recorded and the set goes on
            print(f"FAILED {point}: {type(err).__name__}: {err}", flush=True)
            with path.open("a") as f:
                failed = {"run": _key(point), "rep": rep, "params": point, "error": str(err)}
                f.write(json.dumps(failed) + "\n")
            continue
        finally:
            shutil.rmtree(work, ignore_errors=True)
        wall = round(time.monotonic() - started, 1)
        resolved = params.model_dump(mode="json")
        rows = []
        if axis == "meta_n":
            for n in values:
                ops = [r for r in out.ops if r["n"] == n]
                rows.append(({**resolved, "meta_n": n}, job.summarize("metadata", SimpleNamespace(ops=ops))))
        elif out.rounds:
            for r in out.rounds:
                params_r = {**resolved, "threads": r.get("threads", resolved["threads"])}
                rows.append((params_r, job.summarize(params.family, SimpleNamespace(rounds=[r], ops=[]))))
        else:
            rows.append((resolved, job.summarize(params.family, out)))
        with path.open("a") as f:
            for p, s in rows:
                rec = {"run": _key(point), "rep": rep, "params": p, "summary": s, "wall_s": wall,
                       "accel": out.guest.get("accel"), "mount": out.mount, "host": HOST}  # fmt: skip
                f.write(json.dumps(rec, default=str) + "\n")
        shown = [f"{k}={v:.3g}" for _, s in rows for k, v in s.items() if k in SHOWN]
        print(f"{name} #{rep}: {point} in {wall} s: " + "; ".join(shown), flush=True)


def load(names: list[str] | None = None) -> list[dict[str, Any]]:
    rows = []
    for path in sorted(RESULTS.glob("*.jsonl")):
        if names and path.stem not in names:
            continue
        rows += [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [r for r in rows if "summary" in r]


def _cell(values: list[float], fmt: str = "{:.3g}") -> str:
    st = mean_ci(values)
    if st.mean is None:
        return "—"
    return fmt.format(st.mean) + (f" ± {fmt.format(st.mean - st.ci_low)}" if st.has_ci else "")


def _row_name(p: dict[str, Any]) -> str:
    """The thesis' name of a network row (ideal, latency, loss, realistic), else its numbers."""
    from qoelab.units import parse_duration, parse_percent

    got = (round(p.get("rtt", 0) * 1e3), round(p.get("loss", 0), 3), round(p.get("jitter", 0) * 1e3))
    for name, spec in ROWS.items():
        want = (round(parse_duration(spec["rtt"], "rtt") * 1e3), round(parse_percent(spec.get("loss", "0%"),
                "loss"), 3), round(parse_duration(spec.get("jitter", "0ms"), "jitter") * 1e3))  # fmt: skip
        if got == want:
            return name
    return f"{got[0]} ms, {got[1]:g} %"


def tables(rows: list[dict[str, Any]]) -> str:
    out = []
    meta = [r for r in rows if r["params"]["family"] == "metadata"]
    if meta:
        out.append("### Metadata: ms per operation against RTT (n = 100, 100 Mbit/s)\n")
        rtts = sorted({r["params"]["rtt"] for r in meta})
        out.append("| target | kind | " + " | ".join(f"{x * 1e3:g} ms" for x in rtts) + " |")
        out.append("|---|---|" + "---|" * len(rtts))
        for t in TARGETS:
            for kind in ("mkdir", "touch", "unlink", "rmdir"):
                mine = [r for r in meta if r["params"]["target"] == t and r["params"]["meta_n"] == 100]
                per_op = f"{kind}_ms_per_op"
                cells = [
                    _cell([r["summary"].get(per_op) for r in mine if r["params"]["rtt"] == x], "{:.1f}")
                    for x in rtts
                ]
                out.append(f"| {t} | {kind} | " + " | ".join(cells) + " |")
        out.append("")
    batch = [
        r
        for r in rows
        if r["params"]["family"] == "batch"
        and r["params"].get("scheduler") in (None, "mq-deadline")
        or (r["params"]["family"] == "batch" and r["params"]["target"] != "iscsi")
    ]
    groups: dict[tuple[int, str], list[dict[str, Any]]] = defaultdict(list)
    for r in batch:
        if r["params"].get("form") not in (None, "direct", "default"):
            continue
        groups[(r["params"]["file_size"], _row_name(r["params"]))].append(r)
    for (size, net), rs in sorted(groups.items()):
        out.append(f"### Batch reads, {size // 1024} KiB files, {net}: MiB/s against threads "
                   "(* = within 80 % of the guest's ceiling)\n")  # fmt: skip
        threads = sorted({r["params"]["threads"] for r in rs})
        out.append("| target | " + " | ".join(str(t) for t in threads) + " | ceiling |")
        out.append("|---|" + "---|" * (len(threads) + 1))
        for t in TARGETS:
            cells = []
            for th in threads:
                these = [r for r in rs if r["params"]["target"] == t and r["params"]["threads"] == th]
                bound = any(r["summary"].get("guest_bound") for r in these)
                cells.append(
                    _cell([r["summary"].get("mib_s") for r in these], "{:.2f}") + ("*" if bound else "")
                )
            ceiling = _cell(
                [r["summary"].get("ceiling_mib_s") for r in rs if r["params"]["target"] == t], "{:.1f}"
            )
            out.append(f"| {t} | " + " | ".join(cells) + f" | {ceiling} |")
        out.append("")
    return "\n".join(out)


def macro_table(rows: list[dict[str, Any]]) -> str:
    """The job type's Tables 6.1-6.3 (``JOB.tables``: a row per network, a column per system), the
    thesis' value in brackets: the same layout as the sweep page's."""
    out = []
    for spec in job.JOB.tables:
        mine = [r for r in rows if all(r["params"].get(k) == v for k, v in spec.where.items())]
        cells: dict[tuple[str, str], list[float]] = defaultdict(list)
        for r in mine:
            cells[(spec.row_label(r["params"]), spec.column_label(r["params"]))].append(
                r["summary"].get(spec.y)
            )
        if not cells:
            continue
        nets = [n for n in spec.rows if any(k[0] == n for k in cells)]
        # a system this lab ran or the thesis reported (iSCSI with none was neither)
        cols = [
            c for c in spec.columns if any(k[1] == c for k in cells) or any(k[1] == c for k in spec.reference)
        ]
        out.append(f"### {spec.title}; in brackets {spec.reference_title}\n")
        out.append("| network | " + " | ".join(cols) + " |")
        out.append("|---|" + "---|" * len(cols))
        fmt = f"{{:.{spec.digits}f}}"
        for net in nets:
            row = []
            for col in cols:
                ref = spec.reference.get((net, col))
                row.append(_cell(cells.get((net, col), []), fmt) + ("" if ref is None else f" ({ref:g})"))
            out.append(f"| {net} | " + " | ".join(row) + " |")
        out.append("")
    return "\n".join(out)


def single_table(rows: list[dict[str, Any]]) -> str:
    """Fig. 4.9's single-file amplification, beside iSCSI's (148 + s)/s and (204 + s)/s."""
    these = [r for r in rows if r["params"]["family"] == "single"]
    if not these:
        return ""
    sizes = sorted({r["params"]["file_size"] for r in these})
    out = ["### Single-file amplification, ideal network (link bytes both ways / file bytes)\n",
           "| target | op | " + " | ".join(f"{s // 1024} KiB" for s in sizes) + " |",
           "|---|---|" + "---|" * len(sizes)]  # fmt: skip
    for t in TARGETS:
        for op in ("read", "write"):
            cells = [_cell([r["summary"].get("amplification") for r in these if r["params"]["target"] == t
                            and r["params"]["op"] == op and r["params"]["file_size"] == s], "{:.2f}")
                     for s in sizes]  # fmt: skip
            out.append(f"| {t} | {op} | " + " | ".join(cells) + " |")
    for op, extra in (("read", 148), ("write", 204)):
        out.append(f"| thesis iSCSI | {op} | " + " | ".join(f"{(extra + s / 1024) / (s / 1024):.2f}"
                                                          for s in sizes) + " |")  # fmt: skip
    return "\n".join(out) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--set", choices=sorted(SETS), action="append", help="run this set (repeatable)")
    ap.add_argument("--runs", type=int, default=1, help="repeat each run until it has this many (default 1)")
    only_help = "run only the set's points with this parameter as written in SETS (repeatable)"
    ap.add_argument("--only", action="append", default=[], metavar="KEY=VALUE", help=only_help)
    ap.add_argument("--table", action="store_true", help="print the tables and the findings")
    args = ap.parse_args()
    if bad := [kv for kv in args.only if "=" not in kv]:
        ap.error(f"--only: expected KEY=VALUE, got {bad[0]!r}")
    if args.only and not args.set:
        ap.error("--only: name the set it narrows with --set")
    only = dict(kv.split("=", 1) for kv in args.only)
    if unknown := [k for k in only if not any(k in p for name in args.set or [] for p, _, _ in SETS[name])]:
        ap.error(f"--only: no point of {args.set} has the parameter {unknown[0]!r}")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # unwind: the run's teardown removes its guest
    for name in args.set or []:
        run_set(name, args.runs, only)
    if args.table:
        rows = load()
        print(tables(rows))
        print(single_table(rows))
        print(macro_table(rows))
        report = evaluate("sb001", rows)  # judged per host CPU: rows name it
        print(render_markdown(report, title="Thesis 001 findings on these runs", level=3))


if __name__ == "__main__":
    main()
