"""VM-mode reliability: how often a VM trial works, per protocol and start, on a quiet or slowed host.

Each trial is a real ``rd_qoe`` trial with ``server: vm`` (``qoelab.rd.bench_cli.bench``, the code
path of ``qoelab rd bench`` and of the worker): 10 Mbit/s, 10 ms, 2 pages, Q = 2 s. Trials are
interleaved (repetition outermost). Per protocol and start (``snapshot``: restored from the host's
saved state; ``cold``: booted) it reports the success rate, QEMU start to the first workload page
on the guest's screen (median, p95), how many trials needed no browser restart in the guest, and
every failure's reason. ``--cpu-quota 0.6`` holds each guest's QEMU to 0.6 of a core
(``QOELAB_VM_CPU_QUOTA``, a CPU cgroup), where the guest's browser used to stall (docs/vm.md). A
quota slows guests differently on different machines, so ``--guest-speed SECONDS`` defines the
slowed condition by the guest's speed instead: each part first finds the quota at which a fixed
workload takes that long in the guest here (``guest_speed.py``) and runs its trials at it.

Every trial is appended to ``--out`` as it ends, so a stopped run (Ctrl-C or kill: the trial under
way is torn down) keeps its data, and ``--resume`` continues it later (each part keeps its own
commit and host facts). The report judges each row against issue 31's targets once it has 30
trials.

    sudo .venv/bin/python benchmarks/vm_reliability/run.py --trials 30 \
        --out benchmarks/vm_reliability/quiet.json
    sudo .venv/bin/python benchmarks/vm_reliability/run.py --trials 30 --cpu-quota 0.6 \
        --out benchmarks/vm_reliability/slowed.json
    .venv/bin/python benchmarks/vm_reliability/run.py --report benchmarks/vm_reliability/quiet.json
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]


def host_facts(cpu_quota: float | None, guest_speed: dict[str, Any] | None = None) -> dict[str, Any]:
    """Commit, CPU, kernel, QEMU and the guest image: where the numbers come from."""

    def out(argv: list[str]) -> str:
        res = subprocess.run(argv, capture_output=True, text=True, check=False, cwd=REPO)
        return res.stdout.strip().splitlines()[0] if res.stdout.strip() else ""

    from qoelab.hostfacts import cpu_provenance
    from qoelab.vm.image import load_image

    cpu = cpu_provenance()
    image = load_image()
    return {
        "commit": out(["git", "rev-parse", "--short", "HEAD"]),
        "cpu": cpu["model"],
        # The model name alone does not tell machines apart: two "AMD EPYC" hosts ran TCG guests
        # 2.7x apart (docs/vm.md); the kernel's calibrated clock does.
        "bogomips": cpu["bogomips"],
        "cores": cpu["cpus"],
        "kernel": cpu["kernel"],
        "qemu": out(["qemu-system-x86_64", "--version"]),
        "image": {k: image.provenance().get(k) for k in ("input_hash", "browser", "built_at")},
        "cpu_quota": cpu_quota,
        "guest_speed": guest_speed,
        "started": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
    }


def one_trial(protocol: str, start: str) -> dict[str, Any]:
    """One VM trial; its outcome and the guest's numbers, or why it failed."""
    from qoelab.rd.bench_cli import bench

    raw = {"protocol": protocol, "rate": "10mbit", "delay": "10ms", "pages": 2, "quiet": "2s",
           "server": "vm", "vm_start": start, "verify_duration": "1s"}  # fmt: skip
    workdir = Path(tempfile.mkdtemp(prefix="qoelab-vm-rel-"))
    t0 = time.monotonic()
    row: dict[str, Any] = {"protocol": protocol, "start_asked": start}
    try:
        doc = bench(raw, workdir)
        vm = doc["provenance"].get("vm") or {}
        tcp = ((doc.get("link") or {}).get("link") or {}).get("tcp") or {}
        row |= {
            "ok": True,
            "start": vm.get("start"),
            "accel": vm.get("accel"),
            "to_first_page_s": vm.get("boot_to_ready_s"),
            "restore_s": vm.get("restore_s"),
            "browser_restarts": vm.get("browser_restarts") or {},
            "x2go_session_restarts": len(vm.get("x2go_session_restarts") or []),
            "snapshot_error": vm.get("snapshot_error"),
            "cpu_quota": vm.get("cpu_quota"),
            "updates": len(doc["updates"]),
            "timed_out": sum(bool(u.get("timed_out")) for u in doc["updates"]),
            "tcp_cc": tcp.get("cc"),
        }
    except Exception as err:  # a failed trial is a result here, with its reason
        row |= {"ok": False, "error": f"{type(err).__name__}: {err}"[:1500]}
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    row["seconds"] = round(time.monotonic() - t0, 1)
    return row


def p95(values: list[float]) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(0.95 * (len(ordered) - 1))))]


# Issue 31's targets, per protocol and start, out of TARGET_N trials.
TARGET_N = 30
TARGET_OK = 29
TARGET_NO_RESTART = 27
TARGET_FIRST_PAGE_MEDIAN_S = 15.0


def parts(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """The host facts of each part of a run (a resumed run has several; older files have one)."""
    return doc.get("parts") or [doc["host"]]


def verdict(n: int, ok: int, clean: int, median: float | None, start: str) -> str:
    """Whether a row meets the targets; a row short of TARGET_N trials is not judged yet."""
    if n < TARGET_N:
        return f"not judged ({n} of {TARGET_N} trials)"
    scaled_ok, scaled_clean = TARGET_OK * n / TARGET_N, TARGET_NO_RESTART * n / TARGET_N
    misses = [what for what, bad in (
        (f"succeeded < {TARGET_OK}/{TARGET_N}", ok < scaled_ok),
        (f"no restart < {TARGET_NO_RESTART}/{TARGET_N}", clean < scaled_clean),
        # The first-page target is the snapshot's (restore -> first page); a cold boot has none.
        (f"median first page > {TARGET_FIRST_PAGE_MEDIAN_S:g} s",
         start == "snapshot" and (median is None or median > TARGET_FIRST_PAGE_MEDIAN_S)),
    ) if bad]  # fmt: skip
    return "met" if not misses else "missed: " + ", ".join(misses)


def report(doc: dict[str, Any]) -> str:
    """The Markdown table of a run (and its failures), as docs/vm.md quotes it."""
    lines = []
    for i, facts in enumerate(parts(doc)):
        n = sum(t.get("part", 0) == i for t in doc["trials"])
        beside = f" Beside it: {facts['beside']}." if facts.get("beside") else ""
        lines.append(
            f"Part {i + 1} ({n} trials): {machine(facts)} ({facts['cores']} cores), "
            f"kernel {facts['kernel']}, {facts['qemu']}; commit {facts['commit']}; "
            f"guest {facts['image']['browser']}; "
            f"QEMU CPU quota: {facts['cpu_quota'] or 'none'} (cores){speed_note(facts)}; "
            f"started {facts['started']}.{beside}"
        )
    lines += [
        "",
        "| start | protocol | trials | succeeded | no browser restart "
        "| QEMU start → first page, median / p95 | targets |",
        "|---|---|---|---|---|---|---|",
    ]
    keys = sorted({(t["start_asked"], t["protocol"]) for t in doc["trials"]},
                  key=lambda k: (k[0] != "snapshot", ["vnc", "spice", "x2go"].index(k[1])))  # fmt: skip
    failures: list[str] = []
    late: list[str] = []
    for start, protocol in keys:
        rows = [t for t in doc["trials"] if (t["start_asked"], t["protocol"]) == (start, protocol)]
        ok = [t for t in rows if t["ok"]]
        clean = [t for t in ok if not any((t.get("browser_restarts") or {}).values())]
        firsts = [t["to_first_page_s"] for t in ok if t.get("to_first_page_s") is not None]
        median = statistics.median(firsts) if firsts else None
        med = f"{median:.1f} / {p95(firsts):.1f} s" if firsts else "—"
        judged = verdict(len(rows), len(ok), len(clean), median, start)
        lines.append(f"| {start} | {protocol} | {len(rows)} | {len(ok)} | {len(clean)} | {med} | {judged} |")
        failures += [f"- {start} {protocol}: {t['error'][:400]}" for t in rows if not t["ok"]]
        late += [
            f"- {start} {protocol}, part {t.get('part', 0) + 1}, repetition {t.get('repetition', '?')}: "
            f"{t['timed_out']} of {t['updates']} updates"
            for t in ok
            if t.get("timed_out")
        ]
    lines += by_machine(doc, keys)
    if late:
        # Not a failed trial: the session ran to its end, but the driver saw no new page within the
        # update timeout after a click, so that update has no T (the rd analysis leaves it out).
        lines += ["", "Updates that timed out (the trial succeeded; those updates have no T):", *late]
    return "\n".join(lines + ([""] + ["Failures:"] + failures if failures else []))


def speed_note(facts: dict[str, Any]) -> str:
    """How a part's quota was found, when the condition is a guest speed."""
    speed = facts.get("guest_speed")
    if not speed:
        return ""
    probes = ", ".join(f"{p['quota'] or 'none'}: {p['median_s']:.2f} s" for p in speed["probes"])
    slower = (
        " (slower than the target without a quota: run unheld)" if speed.get("slower_than_target") else ""
    )
    return f", found for a guest workload of {speed['target_s']:g} s{slower} (quota: workload time {probes})"


def condition(facts: dict[str, Any]) -> str:
    """What a run's file holds: one condition, a guest speed or a bare quota."""
    speed = facts.get("guest_speed")
    return f"guest workload {speed['target_s']:g} s" if speed else f"QEMU CPU quota {facts.get('cpu_quota')}"


def machine(facts: dict[str, Any]) -> str:
    """A part's machine: the CPU model and, where recorded, its clock (BogoMIPS / 2 in MHz)."""
    mips = facts.get("bogomips")
    return f"{facts['cpu']} @ {float(mips) / 2000:.2f} GHz" if mips else facts["cpu"]


def by_machine(doc: dict[str, Any], keys: list[tuple[str, str]]) -> list[str]:
    """When the parts ran on more than one machine: the first page per machine (boot times differ
    by machine, so the pooled median is not any machine's)."""
    cpu_of = [machine(facts) for facts in parts(doc)]
    if len(set(cpu_of)) < 2:
        return []
    header = "| start | protocol | machine | trials | succeeded | QEMU start → first page, median / p95 |"
    out = ["", "By machine:", "", header, "|---|---|---|---|---|---|"]
    for start, protocol in keys:
        for cpu in dict.fromkeys(cpu_of):
            rows = [t for t in doc["trials"] if (t["start_asked"], t["protocol"]) == (start, protocol)
                    and cpu_of[t.get("part", 0)] == cpu]  # fmt: skip
            firsts = [t["to_first_page_s"] for t in rows if t["ok"] and t.get("to_first_page_s") is not None]
            med = f"{statistics.median(firsts):.1f} / {p95(firsts):.1f} s" if firsts else "—"
            if rows:
                out.append(
                    f"| {start} | {protocol} | {cpu} | {len(rows)} | {sum(t['ok'] for t in rows)} | {med} |"
                )
    return out


def start_or_resume(out: Path, facts: dict[str, Any], resume: bool) -> dict[str, Any]:
    """A new run's document, or the one in ``out`` with a new part (same condition only)."""
    if not out.exists():
        return {"host": facts, "parts": [facts], "trials": []}
    if not resume:
        raise ValueError("exists; pass --resume to continue that run, or name a new file")
    doc = json.loads(out.read_text())
    doc.setdefault("parts", [doc["host"]])
    if condition(doc["parts"][0]) != condition(facts):
        raise ValueError(
            f"was run with {condition(doc['parts'][0])}, not {condition(facts)}: one file holds one condition"
        )
    doc["parts"].append(facts)
    return doc


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--protocols", default="vnc,spice,x2go")
    ap.add_argument("--starts", default="snapshot,cold")
    ap.add_argument("--trials", type=int, default=30, help="per protocol and start")
    held = ap.add_mutually_exclusive_group()
    held.add_argument(
        "--cpu-quota", type=float, default=None, help="hold each guest's QEMU to this many cores"
    )
    held.add_argument("--guest-speed", type=float, default=None, metavar="SECONDS",
                      help="hold each guest's QEMU to the quota at which guest_speed.py's workload takes "
                      "this long (found per part)")  # fmt: skip
    ap.add_argument("--out", type=Path, help="JSON file the run is written to, trial by trial")
    ap.add_argument("--resume", action="store_true",
                    help="continue the run in --out: run only the trials it still lacks")  # fmt: skip
    ap.add_argument("--report", type=Path, help="print the table of an earlier run and exit")
    ap.add_argument("--beside", default="", help="what else ran on the host during this part (kept with it)")
    args = ap.parse_args(argv)
    if args.report:
        print(report(json.loads(args.report.read_text())))
        return 0
    if os.geteuid() != 0 or args.out is None:
        print("needs root (namespaces, taps) and --out", file=sys.stderr)
        return 2
    # kill (SIGTERM) stops the run between or inside trials with the trial's teardown, as Ctrl-C
    # does: the guest, its overlay and the namespaces go (a backgrounded run ignores SIGINT).
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    speed = None
    if args.guest_speed is not None:
        import guest_speed

        speed = guest_speed.calibrate(args.guest_speed)
        speed["probes"] = [{k: p[k] for k in ("quota", "median_s", "workload_s")} for p in speed["probes"]]
        args.cpu_quota = speed["quota"]
        print(f"quota {args.cpu_quota or 'none'}{speed_note({'guest_speed': speed})}", flush=True)
    if args.cpu_quota is not None:
        os.environ["QOELAB_VM_CPU_QUOTA"] = str(args.cpu_quota)
    from qoelab.vm.throttle import cpu_quota_from_env

    facts = host_facts(cpu_quota_from_env(), speed) | ({"beside": args.beside} if args.beside else {})
    try:
        doc = start_or_resume(args.out, facts, args.resume)
    except ValueError as err:
        print(f"--out {args.out}: {err}", file=sys.stderr)
        return 2
    part = len(doc["parts"]) - 1
    for rep in range(args.trials):
        for start in args.starts.split(","):
            for protocol in args.protocols.split(","):
                done = sum((t["start_asked"], t["protocol"]) == (start, protocol) for t in doc["trials"])
                if done > rep:
                    continue  # a resumed run: this repetition is in the file already
                row = one_trial(protocol, start) | {"repetition": rep, "part": part}
                doc["trials"].append(row)
                args.out.write_text(json.dumps(doc, indent=1) + "\n")
                what = "ok" if row["ok"] else row["error"][:200]
                print(f"[{rep}] {start} {protocol}: {what} ({row['seconds']} s)", flush=True)
    print(report(doc))
    return 0


if __name__ == "__main__":
    sys.exit(main())
