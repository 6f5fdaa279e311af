"""Storage APT against the paper (issue 12): vanilla, a fixed-N sweep and APT, NBD and iSCSI, on
this host's scaled scenario (200 Mbit/s, 20 ms one-way, Reno, 512 KB buffers), repeated.

Each repetition runs every (protocol, mode/N) point once, in a shuffled order, with the worker
library's own trial code (``storage_apt``: emulated link, target in the server namespace, apt-bdl
in the client namespace), and appends one JSON line per trial to ``--out``, so a long run can be
stopped and resumed (``--resume``) and a partial run is still a result. ``--report`` reads the
lines, prints the table (mean ± 95 % CI) and the chapter-2 findings (``qoelab.findings.ch2``),
and with ``--write-doc`` puts both into docs/storage-apt.md between its markers.

    .venv/bin/python benchmarks/storage_apt/run.py --reps 10        # -> benchmarks/storage_apt/results.jsonl
    .venv/bin/python benchmarks/storage_apt/run.py --report --write-doc
    .venv/bin/python benchmarks/storage_apt/run.py --report --out F --write-doc --marker NAME  # a section

Run it on a quiet host (root): both ends, the link emulator and TCP share its cores.
"""

from __future__ import annotations

import argparse
import json
import logging
import random
import secrets
import shutil
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: docblock
from docblock import write_block  # noqa: E402

from qoelab import findings, jobs  # noqa: E402
from qoelab.findings.base import fmt_num
from qoelab.hostfacts import run_facts
from qoelab.jobtype import TrialContext
from qoelab.params import validate_params
from qoelab.stats import mean_ci

REPO = Path(__file__).resolve().parents[2]
DOC = REPO / "docs" / "storage-apt.md"
# The targets, scaled from the paper (docs/storage-apt.md).
MAX_STEPS = 17
NEAR_BEST = 0.90
LINK_SHARE = 0.85


def points(protocols: list[str], sessions: list[int]) -> list[dict[str, Any]]:
    out = []
    for proto in protocols:
        out.append({"transport": proto, "mode": "vanilla"})
        out += [{"transport": proto, "mode": "fixed", "sessions": n} for n in sessions]
        out.append({"transport": proto, "mode": "apt"})
    return out


def run_one(raw: dict[str, Any], log: logging.Logger) -> dict[str, Any]:
    job = jobs.get("storage_apt")
    params = validate_params(job.params, raw)
    workdir = Path(tempfile.mkdtemp(prefix="qoelab-apt-bench-"))
    ctx = TrialContext(trial_id="apt-bench", workdir=workdir, prefix="qab" + secrets.token_hex(3), log=log)
    t0 = time.time()
    try:
        result = job.run(params, ctx)
    except Exception as exc:  # a failed trial is a result too: record why, go on
        return {"params": params.model_dump(mode="json"), "error": f"{type(exc).__name__}: {exc}",
                "started": t0, "duration_s": time.time() - t0}  # fmt: skip
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    return {
        "params": job.stored_params(params),
        "summary": result.summary,
        "probes": [s.values["n"] for s in result.samples],
        "tcp": (result.link or {}).get("tcp"),
        "host": run_facts(),  # the machine and code that measured it (findings judge per machine)
        "started": t0,
        "duration_s": time.time() - t0,
    }


def cmd_run(args: argparse.Namespace) -> int:
    out = Path(args.out)
    done: dict[str, int] = defaultdict(int)
    if args.resume and out.exists():
        for line in out.read_text().splitlines():
            row = json.loads(line)
            done[json.dumps(row["point"], sort_keys=True)] += 1
    log = logging.getLogger("qoelab.apt.bench")
    logging.basicConfig(level=logging.WARNING, format="%(message)s")
    common = {"rate": args.rate, "delay": args.delay, "delta": args.delta, "steady": args.steady}
    rng = random.Random(args.seed)
    with out.open("a") as fh:
        for rep in range(args.reps):
            order = points(args.protocols, args.sessions)
            rng.shuffle(order)  # drift (a warming host, a neighbour) falls on every point alike
            for point in order:
                key = json.dumps(point, sort_keys=True)
                if done[key] > rep:
                    continue
                row = {"point": point, "rep": rep, **run_one({**common, **point}, log)}
                fh.write(json.dumps(row) + "\n")
                fh.flush()
                s = row.get("summary") or {}
                what = row.get("error") or (
                    f"{s.get('goodput_steady_bps', 0) / 1e6:.1f} Mbit/s, N = {s.get('n_steady', 0):g}"
                    + (f", {s['steps']:g} steps" if "steps" in s else "")
                )
                print(f"rep {rep} {point}: {what} ({row['duration_s']:.0f} s)", flush=True)
    return 0


# ---- the report --------------------------------------------------------------------------------


def _ci(values: list[float], scale: float = 1.0, digits: int = 1) -> str:
    s = mean_ci(v / scale for v in values)
    if s.mean is None:
        return "–"
    if s.ci_low is None or s.ci_high is None:
        return f"{s.mean:.{digits}f} (n = 1)"
    return f"{s.mean:.{digits}f} ± {(s.ci_high - s.mean):.{digits}f}"


def report(rows: list[dict[str, Any]]) -> str:
    ok = [r for r in rows if "summary" in r]
    failed = [r for r in rows if "error" in r]
    by: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for r in ok:
        p = r["point"]
        label = {"apt": "APT", "vanilla": "vanilla"}.get(p["mode"]) or f"N = {p['sessions']}"
        by[(p["transport"], label)].append(r)
    p0 = (ok or rows)[0]["params"] if rows else {}
    first = min((r["started"] for r in rows), default=0)
    # The machine is the rows' own record; rows from before they carried one say so.
    hosts = sorted({f"{h['node']} ({h['cpu']}, {h['cores']} cores, Linux {h['kernel']}, {h['code_revision']})"
                    for r in rows if (h := r.get("host"))})  # fmt: skip
    unrecorded = sum("host" not in r for r in rows)
    where = "; ".join(hosts) or "not recorded in the rows"
    if hosts and unrecorded:
        where += f" ({unrecorded} rows without a record)"
    lines = [
        f"Measured {time.strftime('%Y-%m-%d', time.gmtime(first))}, host {where}: "
        f"{len(ok)} trials succeeded, {len(failed)} failed. Link {fmt_num(p0.get('rate', 0) / 1e6)} Mbit/s, "
        f"{fmt_num(p0.get('delay', 0) * 1e3)} ms one-way, {p0.get('limit')} queue, TCP "
        f"{p0.get('tcp_cc')} with SACK, 512 KB buffers; Δ = {fmt_num(p0.get('delta', 0))} s, "
        f"steady window {fmt_num(p0.get('steady', 0))} s. Mean ± half-width of the 95 % CI over n runs.",
        "",
        "| protocol | mode | n | steady goodput (Mbit/s) | of the link | N | steps | to converge (s) "
        "| client ticks/Gbit | storage ticks/Gbit |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]

    def order(k: tuple[str, str]) -> tuple[str, int]:
        label = k[1]
        return (k[0], 0 if label == "vanilla" else 10_000 if label == "APT" else int(label.split()[-1]))

    for key in sorted(by, key=order):
        rs = by[key]

        def col(name: str, scale: float = 1.0, digits: int = 1, rs: list = rs) -> str:
            return _ci([r["summary"][name] for r in rs if name in r["summary"]], scale, digits)

        apt = key[1] == "APT"
        lines.append(
            f"| {key[0]} | {key[1]} | {len(rs)} | {col('goodput_steady_bps', 1e6)} | "
            f"{col('utilization', 0.01, 0)} % | {col('n_steady')} | "
            f"{col('steps') if apt else ''} | {col('converge_s', 1, 0) if apt else ''} | "
            f"{col('cpu_ticks_per_bit_client', 1e-9, 2)} | {col('cpu_ticks_per_bit_storage', 1e-9, 2)} |"
        )
    lines.append("")
    for proto in sorted({k[0] for k in by}):
        apt = by.get((proto, "APT"), [])
        if apt:
            seqs = [" ".join(map(str, r["probes"])) for r in apt]
            lines.append(f"APT's probes, {proto}: " + "; ".join(f"`{s}`" for s in seqs) + ".")
    lines.append("")
    for r in failed:
        lines.append(f"- failed: {r['point']} (rep {r['rep']}): {r['error']}")
    if failed:
        lines.append("")
    found = findings.evaluate("ch2", [{"params": r["params"], "summary": r["summary"]} for r in ok])
    lines.append(findings.render_markdown(found, "Chapter-2 findings on these runs", level=3))
    return "\n".join(lines)


def cmd_report(args: argparse.Namespace) -> int:
    rows = [json.loads(line) for line in Path(args.out).read_text().splitlines() if line.strip()]
    text = report(rows)
    print(text)
    if args.write_doc:
        marker = args.marker
        write_block(DOC, f"<!-- {marker}:begin -->", f"<!-- {marker}:end -->", text.rstrip())
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(REPO / "benchmarks" / "storage_apt" / "results.jsonl"))
    parser.add_argument("--report", action="store_true", help="summarise --out instead of running")
    parser.add_argument("--write-doc", action="store_true", help="with --report: update docs/storage-apt.md")
    parser.add_argument(
        "--marker", default="storage-apt-bench", help="which marked section --write-doc fills"
    )
    parser.add_argument(
        "--protocols", nargs="+", default=["nbd", "iscsi"], choices=("nbd", "iscsi", "synthetic")
    )
    parser.add_argument("--sessions", nargs="+", type=int, default=[4, 8, 16, 32, 64], help="fixed N values")
    parser.add_argument("--reps", type=int, default=10)
    parser.add_argument("--rate", default="200mbit")
    parser.add_argument("--delay", default="20ms")
    parser.add_argument("--delta", default="5s")
    parser.add_argument("--steady", default="15s")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--resume", action="store_true", help="skip the points --out already holds")
    args = parser.parse_args()
    return cmd_report(args) if args.report else cmd_run(args)


if __name__ == "__main__":
    raise SystemExit(main())
