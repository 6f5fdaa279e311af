"""VOSE on this host: the validation against AES-NI / SHA-NI / veth's checksum offload, the checksum
speedup curve (Fig. 3.11), the five IPsec devices (Fig. 3.12), the wait primitives and the CPU
quota (Figs. 3.5-3.10). Results go to results.jsonl, one line per run; ``--report`` prints the
tables (``--write-doc`` puts them into docs/vose.md).

    .venv/bin/python benchmarks/vose/run.py                 # everything, about 50 minutes, alone on the host
    .venv/bin/python benchmarks/vose/run.py --only validate --reps 10
    .venv/bin/python benchmarks/vose/run.py --only validate --primitive aes --reps 60 --out FILE
    .venv/bin/python benchmarks/vose/run.py --report --write-doc
"""

from __future__ import annotations

import argparse
import json
import secrets
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "workers"))

from qoelab.hostfacts import run_facts  # noqa: E402
from qoelab.vose.trial import VoseRun, run_trial  # noqa: E402
from qoelab.vose.validate import base_run, case_order, cases  # noqa: E402

HERE = Path(__file__).resolve().parent
DEFAULT_OUT = HERE / "results.jsonl"
CHECKSUM_SPEEDUPS = (1, 1.5, 2, 3, 5, 10, "inf")
IPSEC_DEVICES = ("aes_only", "aes_cbc", "sha1_only", "sha1_aes", "sha1_aes_cbc")
IPSEC_SPEEDUPS = (1, 2, 3, 10, 30, "inf")
QUOTAS = (0.25, 0.5, 1.0)
GROUP_REPS = {"validate": 10, "checksum_curve": 3, "ipsec": 2, "wait": 3, "quota": 2, "evidence": 3}


PRIMITIVES = ("aes", "sha1", "checksum")


def plan(group: str, duration: float,
         primitives: Sequence[str] = PRIMITIVES) -> Iterator[tuple[str, VoseRun]]:  # fmt: skip
    """(case, run) pairs of one repetition of a group, in the order they run (``primitives``: the
    validation's)."""
    if group == "validate":
        for primitive in primitives:
            base = base_run(primitive, duration)
            for name, change in cases(primitive).items():
                yield f"{primitive}/{name}", replace(base, **change)
    elif group == "checksum_curve":
        base = VoseRun(path="kernel_csum", device="checksum", duration_s=duration)
        yield "software", replace(base, mode="software")
        yield "hardware", replace(base, mode="hardware")
        for s in CHECKSUM_SPEEDUPS:
            yield f"vose@{s}", replace(base, mode="vose", speedup=_speedup(s))
    elif group == "ipsec":
        base = VoseRun(path="app", duration_s=duration)
        yield "software", replace(base, mode="software", device="sha1_aes_cbc")
        for device in IPSEC_DEVICES:
            for s in IPSEC_SPEEDUPS:
                yield f"{device}@{s}", replace(base, mode="vose", device=device, speedup=_speedup(s))
    elif group == "wait":
        base = base_run("aes", duration)
        yield "hardware", replace(base, mode="hardware")
        for wait in ("busy", "busy_wall", "sleep"):
            yield f"vose/{wait}", replace(base, mode="vose", speedup="measured", wait=wait)
    elif group == "quota":
        base = VoseRun(path="kernel_csum", device="checksum", duration_s=duration)
        for q in QUOTAS:
            for mode in ("software", "hardware", "vose"):
                yield f"{mode}@{q}", replace(base, mode=mode, speedup=float("inf"), cpu_quota=q)
    elif group == "evidence":  # the work per record timed inside the stream, against the calibration's T
        for primitive in ("aes", "sha1"):
            base = base_run(primitive, duration)
            for mode in ("hardware", "vose"):
                yield f"{primitive}/{mode}", replace(base, mode=mode, speedup="measured")
    else:
        raise SystemExit(f"unknown group {group!r} (known: {', '.join(GROUP_REPS)})")


def _speedup(s: Any) -> float:
    return float("inf") if s == "inf" else float(s)


def _params(run: VoseRun) -> dict[str, Any]:
    out = asdict(run)
    out.pop("profile")
    if isinstance(out["speedup"], float) and out["speedup"] == float("inf"):
        out["speedup"] = "inf"
    if run.mode != "vose":
        out.pop("speedup"), out.pop("speedup_r"), out.pop("wait")
    if run.path == "kernel_csum":
        out.pop("device")
    return out


def done_keys(out: Path) -> set[tuple[str, str, int]]:
    if not out.exists():
        return set()
    return {(d["group"], d["case"], d["rep"]) for d in map(json.loads, out.read_text().splitlines()) if d}


def run_all(groups: list[str], reps: int | None, duration: float, out: Path, resume: bool,
            primitives: Sequence[str] = PRIMITIVES) -> None:  # fmt: skip
    done = done_keys(out) if resume else set()
    if not resume and out.exists():
        out.unlink()
    for group in groups:
        n = reps or GROUP_REPS[group]
        for rep in range(n):  # repetitions outermost: drift over the hour hits every case alike
            # ABBA: the order reverses every other repetition, so a case is not always first
            # (two identical configurations differed by 4.3 % in a fixed order, issue 32).
            for case, run in case_order(list(plan(group, duration, primitives)), rep):
                if (group, case, rep) in done:
                    continue
                started = time.time()
                try:
                    result = run_trial(run, "qvb" + secrets.token_hex(3))
                    prov = result.provenance
                    keep = {"clock": "clock", "wait": "wait_granularity", "cpu": "host_cpu"}
                    keep.update({"calibration": "calibration", "throttled": "throttled", "tcp": "tcp"})
                    line = {"summary": result.summary, "provenance": {k: prov[v] for k, v in keep.items()}}
                except Exception as err:  # a failed run is recorded, not retried
                    line = {"error": str(err)}
                line.update(
                    {
                        "group": group,
                        "case": case,
                        "rep": rep,
                        "params": _params(run),
                        "host": run_facts(),  # the machine (model and clock), kernel and commit
                        "elapsed_s": round(time.time() - started, 1),
                        "at": time.strftime("%Y-%m-%dT%H:%M:%S"),
                    }
                )
                with out.open("a") as fh:
                    fh.write(json.dumps(line) + "\n")
                s = line.get("summary", {})
                what = f"FAILED: {line.get('error')}"
                if s:
                    cpu = f"cpu {s['cpu_sender']:.2f}/{s['cpu_receiver']:.2f}"
                    what = f"{s['throughput_bps'] / 1e6:8.1f} Mbit/s, {cpu}"
                print(f"{group:<15} {case:<22} rep {rep}: {what}", flush=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", action="append", choices=list(GROUP_REPS), help="groups to run (default all)")
    ap.add_argument("--reps", type=int, help=f"repetitions per case (default per group: {GROUP_REPS})")
    ap.add_argument("--primitive", action="append", choices=PRIMITIVES, dest="primitives",
                    help="the validation's primitives (default all three)")  # fmt: skip
    ap.add_argument("--duration", type=float, default=10.0, help="stream length per run, s (default 10)")
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT)
    ap.add_argument("--resume", action="store_true", help="keep results.jsonl and run only what is missing")
    ap.add_argument("--report", action="store_true", help="print the tables from --out instead of running")
    ap.add_argument("--write-doc", action="store_true", help="with --report: write them into docs/vose.md")
    args = ap.parse_args()
    if args.report:
        from report import render, write_doc  # noqa: PLC0415 - benchmarks/vose/report.py

        text = render(args.out)
        if args.write_doc:
            write_doc(REPO / "docs" / "vose.md", text)
        print(text)
        return 0
    run_all(args.only or list(GROUP_REPS), args.reps, args.duration, args.out, args.resume,
            tuple(args.primitives or PRIMITIVES))  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
