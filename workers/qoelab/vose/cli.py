"""``qoelab vose run|validate|calibrate``: one VOSE stream, the accelerator validation, the timings.

The top-level ``qoelab`` command calls :func:`register`.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import secrets
import signal
import sys
from typing import Any

RUN_EPILOG = """\
Streams fixed-size records between two namespaces joined by a plain veth pair, sender on cpu0 and
receiver on cpu1, for --duration, after timing every primitive on those cores. Any field of the
job type can be given as --set NAME=VALUE (e.g. --set cpu_quota=0.5 --set rate=1gbit).

examples:
  qoelab vose run --device sha1_aes_cbc --mode vose --speedup 3
  qoelab vose run --device aes_cbc --mode hardware --json
  qoelab vose run --path kernel_csum --mode software --duration 5s
"""

VALIDATE_EPILOG = """\
aes and sha1: software, hardware (AES-NI / SHA-NI) and vose at this host's measured speedup
T_software / T_hardware. checksum: veth's offload flag off (software) and on (hardware, T = 0),
vose at speedup inf and at 1. Prints throughput and CPU of each and vose's error against hardware,
paired repetition by repetition (ABBA order): the mean error, its 95 % CI and whether that interval
lies inside the thesis' bounds (throughput 3 %, CPU 5 %).

examples:
  qoelab vose validate --primitive aes
  qoelab vose validate --primitive sha1 --reps 3 --json
"""


def register(subparsers: Any) -> None:
    vose = subparsers.add_parser("vose", help="offload emulation (VOSE, thesis ch. 3)")
    sub = vose.add_subparsers(dest="vose_command", required=True)
    run = sub.add_parser(
        "run",
        help="one VOSE stream on this host, a line per second",
        description="Run one vose trial here (root: network namespaces).",
        epilog=RUN_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    run.add_argument("--path", choices=("app", "kernel_csum"), default="app", help="default app")
    run.add_argument("--mode", choices=("software", "hardware", "vose", "inf"), default="software")
    run.add_argument(
        "--device",
        default="sha1_aes_cbc",
        help="checksum, sha1_only, aes_only, aes_cbc, sha1_aes, sha1_aes_cbc (default)",
    )
    run.add_argument("--speedup", default="2", help="vose: 1 to 1000, inf or measured (default 2)")
    run.add_argument("--duration", default="10s", help="stream length (default 10s)")
    run.add_argument("--set", action="append", default=[], metavar="NAME=VALUE", help="any other field")
    run.add_argument("--json", action="store_true", help="print summary, link and provenance as JSON")
    run.set_defaults(func=cmd_run)

    val = sub.add_parser(
        "validate",
        help="vose against the real accelerator: throughput and CPU errors",
        description="Compare vose with real acceleration on this host.",
        epilog=VALIDATE_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    val.add_argument("--primitive", required=True, choices=("aes", "sha1", "checksum"))
    val.add_argument("--duration", default="10s", help="stream length per run (default 10s)")
    val.add_argument("--reps", type=int, default=5,
                     help="pairs: runs of each case, interleaved in ABBA order (default 5)")  # fmt: skip
    val.add_argument("--json", action="store_true", help="print the comparison as JSON")
    val.set_defaults(func=cmd_validate)

    cal = sub.add_parser(
        "calibrate",
        help="time every primitive per record on one core",
        description="Time each device's work per record in software and with AES-NI/SHA-NI.",
    )
    cal.add_argument("--record", type=int, default=1448, help="record size in bytes (default 1448)")
    cal.add_argument("--cpu", type=int, default=0, help="core to time on (default 0)")
    cal.add_argument("--samples", type=int, default=2000, help="timed records per stage (default 2000)")
    cal.add_argument("--json", action="store_true", help="print every stage as JSON")
    cal.set_defaults(func=cmd_calibrate)


def _needs_root(what: str) -> int | None:
    if os.geteuid() != 0:
        print(
            f"qoelab vose {what}: needs root (network namespaces, ethtool); run it with sudo", file=sys.stderr
        )
        return 2
    return None


def _prefix() -> str:
    # Not "ql": a worker starting on this host cleans every ql* trial it finds.
    return "qvr" + secrets.token_hex(3)


def _seconds(text: str, field: str) -> float:
    from qoelab.errors import ParameterError
    from qoelab.units import parse_duration

    try:
        value = parse_duration(text)
    except ValueError as err:
        raise ParameterError(field, str(err)) from None
    if not 1 <= value <= 600:
        raise ParameterError(field, f"must be 1s to 600s, got {text}")
    return value


def cmd_run(args: argparse.Namespace) -> int:
    from qoelab import jobs
    from qoelab.jobs.local import apply_sets, run_here
    from qoelab.params import validate_params

    raw: dict[str, Any] = {"path": args.path, "mode": args.mode, "device": args.device,
                           "duration": args.duration}  # fmt: skip
    if args.mode == "vose":
        raw["speedup"] = args.speedup if args.speedup in ("inf", "measured") else _number(args.speedup)
    job = jobs.get("vose")
    params = validate_params(job.params, apply_sets(raw, args.set))
    if (code := _needs_root("run")) is not None:
        return code
    result = run_here(job, params, "qvr", live=not args.json)
    s = result.summary
    if args.json:
        print(json.dumps({"summary": s, "link": result.link, "provenance": result.provenance}, default=str))
        return 0
    print(
        f"throughput {s['throughput_bps'] / 1e6:.1f} Mbit/s; sender core {100 * s['cpu_sender']:.0f} % busy, "
        f"receiver core {100 * s['cpu_receiver']:.0f} % busy"
    )
    if params.mode == "vose":
        print(
            f"device time per record: T_S {s['T_S_ns']:.0f} ns, T_R {s['T_R_ns']:.0f} ns (software "
            f"{s['T_S_software_ns']:.0f} / {s['T_R_software_ns']:.0f} ns); "
            f"waiting {100 * s['busy_fraction']:.0f} % of the sender's time"
        )
    return 0


def _number(text: str) -> float | str:
    try:
        return float(text)
    except ValueError:
        return text  # the parameter model names the field and its bounds


def cmd_validate(args: argparse.Namespace) -> int:
    from qoelab.errors import ParameterError
    from qoelab.vose.validate import validate

    duration = _seconds(args.duration, "--duration")
    if not 1 <= args.reps <= 100:
        raise ParameterError("--reps", f"must be 1 to 100, got {args.reps}")
    if (code := _needs_root("validate")) is not None:
        return code
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))

    def progress(name: str, rep: int, s: dict[str, float]) -> None:
        if not args.json:
            print(
                f"  run {rep + 1} {name:<14} {s['throughput_bps'] / 1e6:9.1f} Mbit/s  sender "
                f"{100 * s['cpu_sender']:5.1f} %  receiver {100 * s['cpu_receiver']:5.1f} %",
                flush=True,
            )

    out = validate(args.primitive, _prefix, duration_s=duration, reps=args.reps, on_run=progress)
    if args.json:
        print(json.dumps({k: v for k, v in out.items() if k != "runs"}, default=str))
        return 0
    print(
        f"\n{args.primitive}: device {out['device']}, path {out['path']}, {args.reps} run(s) of "
        f"{duration:g} s each"
    )
    print(f"{'case':<15} {'throughput':>14} {'sender CPU':>11} {'receiver CPU':>13}  speedup (send/recv)")
    for name in ("software", "hardware", "vose", "vose_stream", "vose_speedup1"):
        if name in out:
            c = out[name]
            sp = f"{c['speedup_send']:.2f} / {c['speedup_recv']:.2f}" if "speedup_send" in c else "-"
            if name == "vose" and args.primitive == "checksum":
                sp = "inf / inf"
            print(
                f"{name:<15} {c['throughput_bps'] / 1e6:>9.1f} Mbit/s {100 * c['cpu_sender']:>10.1f} % "
                f"{100 * c['cpu_receiver']:>12.1f} %  {sp}"
            )
    print(f"vose vs hardware, paired over {args.reps} repetitions (mean error, 95 % CI; the thesis' bound):")
    for name, p in out["paired_error_pct"].items():
        ci = f"{p['ci_low']:+.1f} to {p['ci_high']:+.1f} %" if p["ci_low"] is not None else "no CI (n < 2)"
        print(f"  {name:<13} {p['mean']:+.1f} % ({ci}), bound ±{p['bound']:g} %: {p['verdict']}")
    within = out["within_bounds"]
    print("inside the thesis' bounds" if within else "outside the thesis' bounds" if within is False else
          "not decided: an interval straddles its bound (more repetitions narrow it)")  # fmt: skip
    if "error_pct_stream" in out:
        e2 = out["error_pct_stream"]
        print(
            "vose with T timed inside streams (calibration stream) vs hardware: "
            + ", ".join(f"{k} {v:+.1f} %" for k, v in e2.items())
        )
    if "error_pct_speedup1_vs_software" in out:
        e1 = out["error_pct_speedup1_vs_software"]
        print("vose at speedup 1 vs software: " + ", ".join(f"{k} {v:+.1f} %" for k, v in e1.items()))
    return 0


def cmd_calibrate(args: argparse.Namespace) -> int:
    from qoelab.vose.pair import DEVICES, calibrate

    cal = calibrate(args.record, args.cpu, samples=args.samples)
    if args.json:
        print(
            json.dumps({"record": cal.record, "clock": cal.clock, "wait": cal.wait, "stages": cal.samples()})
        )
        return 0
    c = cal.clock
    print(
        f"record {cal.record} B on cpu{args.cpu}; clock {c['clock']} ({c['ticks_per_ns']:.4f} ticks/ns, "
        f"invariant TSC: {c['invariant_tsc']}); spin iteration {cal.wait.get('ns_per_iteration', 0):.1f} ns"
    )
    heads = ("T_sw send", "T_sw recv", "T_hw send", "T_hw recv")
    print(f"{'device':<13} " + " ".join(f"{h:>10}" for h in heads) + f" {'speedup':>15}")
    for d in DEVICES:
        row = [cal.device_ns(d, side) for side in ("send", "recv")]
        hw = ["-", "-"]
        sp = "-"
        if cal.has("hardware") and d != "checksum":
            hw = [f"{cal.device_ns(d, side, 'hardware'):.0f}" for side in ("send", "recv")]
            s = [cal.measured_speedup(d, side) for side in ("send", "recv")]
            sp = " / ".join("inf" if math.isinf(x) else f"{x:.1f}" for x in s)
        print(f"{d:<13} {row[0]:>10.0f} {row[1]:>10.0f} {hw[0]:>10} {hw[1]:>10} {sp:>15}")
    print("(ns per record, median, minus the timing floor)")
    return 0
