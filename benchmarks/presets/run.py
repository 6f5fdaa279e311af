"""Run a paper's preset on this host without the lab stack, into a committed result file (issue 32).

Every trial of ``--preset`` at ``--size`` (``qoelab.presets``: the Reproduce page's experiments)
runs through its job type's own code (``qoelab.jobs.local.run_here``, as ``qoelab apt run`` and the
worker do), repetitions outermost and the points of each repetition in a shuffled order, so drift
over hours falls on every condition alike. Each trial appends one JSON line to ``--out``: the
resolved parameters, the summary, the machine and code that ran it (``qoelab.hostfacts``) and the
trial's provenance; a failed trial is a line with ``error``. ``--resume`` skips the trials the file
already has, so a run of hours is made in parts, across sessions.

    sudo .venv/bin/python benchmarks/presets/run.py --preset ch4-fig46 --size full \\
        --out benchmarks/presets/results/ch4-fig46-full.jsonl --resume
    .venv/bin/qoelab report ch4 --from benchmarks/presets/results/ch4-fig46-full.jsonl

The rows are what ``qoelab sweep export`` writes for a sweep of the same preset, so the findings
read both alike.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path
from typing import Any

from qoelab import jobs, presets
from qoelab.hostfacts import run_facts
from qoelab.jobs.local import run_here
from qoelab.params import validate_params

# Provenance a row keeps (the full record can be large: captures' paths, long tool lists).
KEEP_PROVENANCE = ("vm", "versions", "tools", "tcp", "host_cpu", "thinclient_classify", "accel")


def trial_key(point: dict[str, Any], rep: int) -> str:
    return json.dumps({"point": point, "rep": rep}, sort_keys=True)


def done_keys(out: Path) -> set[str]:
    if not out.exists():
        return set()
    return {trial_key(r["point"], r["rep"]) for r in map(json.loads, out.read_text().splitlines()) if r}


def one_trial(job: Any, point: dict[str, Any], rep: int) -> dict[str, Any]:
    params = validate_params(job.params, point)
    row: dict[str, Any] = {"point": point, "rep": rep, "params": job.stored_params(params)}
    row["host"] = run_facts()
    started = time.time()
    try:
        result = run_here(job, params, "qpr", live=False)
        prov, link = result.provenance or {}, result.link or {}
        row["summary"] = result.summary
        row["provenance"] = {k: prov[k] for k in KEEP_PROVENANCE if k in prov}
        row["link"] = {k: link.get(k) for k in ("backend", "measured", "ok", "mode")}
        # The TCP settings read back in both namespaces (the link's own description), when it has them.
        if isinstance(link.get("link"), dict) and "tcp" in link["link"]:
            row["link"]["tcp"] = link["link"]["tcp"]
    except Exception as err:  # a failed trial is a result: recorded with its reason, not retried
        row["error"] = f"{type(err).__name__}: {err}"[:2000]
    row["seconds"] = round(time.time() - started, 1)
    row["at"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started))
    return row


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--preset", required=True, help="a sweep preset's key, e.g. ch4-fig46")
    ap.add_argument("--size", choices=presets.SIZES, default="quick")
    ap.add_argument("--out", type=Path, required=True, help="JSON-lines file, one trial per line")
    ap.add_argument("--resume", action="store_true", help="skip the trials --out already has")
    ap.add_argument("--limit", type=int, help="stop after this many trials (a part of a long run)")
    args = ap.parse_args(argv)
    preset = presets.get(args.preset)
    if preset.kind != "sweep":
        ap.error(f"{args.preset} is a rating campaign, not a sweep")
    if args.out.exists() and not args.resume:
        ap.error(f"{args.out} exists: pass --resume to continue it, or name a new file")
    job = jobs.get(preset.job_type)
    points = preset.unique_points(args.size)
    done = done_keys(args.out)
    ran = 0
    args.out.parent.mkdir(parents=True, exist_ok=True)
    for rep in range(preset.repetitions[args.size]):
        order = list(points)
        random.Random(preset.seed + rep).shuffle(order)
        for point in order:
            if trial_key(point, rep) in done:
                continue
            if args.limit is not None and ran >= args.limit:
                return 0
            row = one_trial(job, point, rep)
            with args.out.open("a") as fh:
                fh.write(json.dumps(row, sort_keys=True) + "\n")
            ran += 1
            what = row.get("error") or "ok"
            shown = json.dumps(point, sort_keys=True)
            print(f"[rep {rep}] {shown}: {what[:200]} ({row['seconds']} s)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
