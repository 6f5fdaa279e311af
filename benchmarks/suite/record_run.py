"""Keep one fresh-clone run of the suite (benchmarks/suite/fresh_clone.sh) as a committed run folder.

    python3 benchmarks/suite/record_run.py SCRATCH benchmarks/suite/NAME "what else the host ran"

SCRATCH holds the clone (main/), its .ci/run log, cpu.tsv, and the commit, start, end and rc files
fresh_clone.sh writes. The folder gets junit.xml and steps.tsv from the clone's test-results/, the
log as ci.log, cpu.tsv, snapshots.jsonl (the guest states the run saved: how long each boot took)
and run.json (commit, date, machine, kernel, the whole run's minutes and exit status, the mean busy
share), which scripts/test_profile.py reads.
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import sys
import time
from pathlib import Path

SNAPSHOTS = Path("/var/tmp/qoelab-vm/snapshots")
LANES = {"1": "one lane", "2": "two lanes (the default)"}
SNAPSHOT_FIELDS = ("key", "kind", "accel", "created_at", "boot_to_ready_s", "save_s", "state_bytes")


def cpu_model() -> str:
    model = next(
        (line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
         if line.startswith("model name")),
        platform.processor(),
    )  # fmt: skip
    return "Intel Xeon" if "Xeon" in model else "AMD EPYC" if "EPYC" in model else model


def main(argv: list[str]) -> int:
    scratch, out, load = Path(argv[0]), Path(argv[1]), argv[2]
    lanes = os.environ.get("QOELAB_TEST_LANES", "2")  # as scripts/test.sh reads it
    where = "both lanes" if lanes == "2" else "the lane"
    out.mkdir(parents=True, exist_ok=True)
    for name in ("junit.xml", "steps.tsv"):
        if (scratch / "main" / "test-results" / name).exists():
            shutil.copy(scratch / "main" / "test-results" / name, out / name)
    shutil.copy(scratch / "log", out / "ci.log")
    shutil.copy(scratch / "cpu.tsv", out / "cpu.tsv")
    metas = [json.loads(p.read_text()) for p in SNAPSHOTS.glob("*/meta.json")]
    (out / "snapshots.jsonl").write_text(
        "".join(json.dumps({k: m.get(k) for k in SNAPSHOT_FIELDS}) + "\n"
                for m in sorted(metas, key=lambda m: m.get("created_at", 0)))
    )  # fmt: skip
    busy = [int(line.split("\t")[1]) for line in (scratch / "cpu.tsv").read_text().splitlines()[1:]]
    start, end = (int((scratch / f).read_text()) for f in ("start", "end"))
    run = {
        "commit": (scratch / "commit").read_text().strip(),
        "date": time.strftime("%Y-%m-%d", time.gmtime(start)),
        "how": f"CI=true bash .ci/run on a fresh clone of main, {LANES[lanes]} (Debian's "
        "PostgreSQL and Redis running, as CI finds them on this machine; /var/tmp/qoelab-vm emptied "
        "first, so no saved guest state existed; the guest image built in the background beside "
        f"tests/backend in {where}, its self-test saving the desktop guest (snapshots.jsonl))",
        "cpu": cpu_model(),
        "cores": os.cpu_count(),
        "kernel": platform.release(),
        "tcp": "host default "
        + Path("/proc/sys/net/ipv4/tcp_congestion_control").read_text().strip()
        + "; each trial sets its own",
        "host_load": load,
        "before_pytest": "install and front-end build; the guest image then built beside the backend's "
        f"tests, and {where} waited for its end (steps.tsv)",
        "ci_run_wall_minutes": round((end - start) / 60, 1),
        "ci_run_exit_status": int((scratch / "rc").read_text()),
        "cpu_busy_mean_percent": round(sum(busy) / len(busy), 1) if busy else None,
        "cpu_samples": len(busy),
    }
    (out / "run.json").write_text(json.dumps(run, indent=2) + "\n")
    print(f"{out}: {run['ci_run_wall_minutes']} min, exit status {run['ci_run_exit_status']}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
