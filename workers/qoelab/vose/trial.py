"""One VOSE trial: calibrate on the pinned cores, build the path, set the offloads, run the stream.

Path ``app``: the device works on application records (vose-pair); the kernel's own TCP checksum is
left offloaded (veth never computes it), so the record work is what the modes change. Path
``kernel_csum``: the kernel's TCP checksum is the work; ``software`` turns veth's checksum offload
off on both ends (the kernel computes and verifies), ``hardware`` and ``inf`` leave it on (T = 0),
``vose`` leaves it on and the pair busy-waits T per record instead. TSO, GSO and GRO are off, as in
the thesis (§3.5.1). Without delay or loss the two namespaces are joined by a plain veth pair (tbf
when ``rate`` is set): VOSE needs CPU-bound ends and no emulator process on the cores.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import statistics
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from qoelab.emulation.profile import LinkProfile
from qoelab.emulation.topology import PLUMBING_BACKEND, EmulatedLink, emulated_link
from qoelab.errors import ParameterError, QoelabError
from qoelab.hostfacts import cpu_provenance
from qoelab.vose import host
from qoelab.vose.offloads import set_offloads
from qoelab.vose.pair import Calibration, PairProcess, PairSpec, calibrate, device_time, failure
from qoelab.vose.quota import CpuQuota

log = logging.getLogger("qoelab.vose")
PORT = 5201
LISTEN_TIMEOUT_S = 15.0


@dataclass
class VoseRun:
    """What a trial asks for (the job type's parameters, resolved)."""

    path: str = "app"
    mode: str = "software"
    device: str = "sha1_aes_cbc"
    speedup: float | str = 2.0  # or "measured": T_software / T_hardware on this host
    speedup_r: float | None = None
    record: int = 1448
    wait: str = "busy"
    duration_s: float = 10.0
    cpu_quota: float = 1.0
    sender_cpu: int = 0
    receiver_cpu: int = 1
    calibration_samples: int = 2000
    calibration: str = "offline"  # T from a tight loop on one record, or "stream": timed inside streams
    rps: bool = True
    profile: LinkProfile = field(default_factory=LinkProfile.parse)

    @property
    def pair_device(self) -> str:
        return "checksum" if self.path == "kernel_csum" else self.device

    @property
    def pair_mode(self) -> str:
        """The kernel path's work is the kernel's: the pair only waits (vose) or does nothing."""
        if self.path == "kernel_csum":
            return "vose" if self.mode == "vose" else "inf"
        return self.mode

    def check_cpus(self) -> None:
        allowed = sorted(os.sched_getaffinity(0))
        for name, cpu in (("sender_cpu", self.sender_cpu), ("receiver_cpu", self.receiver_cpu)):
            if cpu not in allowed:
                raise ParameterError(name, f"cpu {cpu} is not available to this worker (cpus {allowed})")
        if self.sender_cpu == self.receiver_cpu:
            raise ParameterError("receiver_cpu", "must differ from sender_cpu: each end has its own core")


@dataclass
class VoseOutcome:
    summary: dict[str, float]
    series: list[tuple[str, float, float]]
    calibration: Calibration
    provenance: dict[str, Any]
    link: dict[str, Any]
    sender: dict[str, Any]
    receiver: dict[str, Any]


def software_ns(cal: Calibration, run: VoseRun, side: str) -> float:
    """T_software per record: the device's pieces, or for the kernel path the RFC 1071 sum of one
    record (the lab's estimate of the kernel's per-segment checksum; it cannot time the kernel)."""
    return cal.device_ns("csum" if run.path == "kernel_csum" else run.device, side)


def speedups(cal: Calibration, run: VoseRun) -> tuple[float, float]:
    """The speedup per side; ``measured`` is this host's T_software / T_hardware of the device (the
    kernel path's hardware is the offload flag: T = 0, speedup inf)."""
    if run.speedup == "measured":
        if run.path == "kernel_csum":
            return math.inf, math.inf
        if not cal.has("hardware"):
            raise QoelabError(
                f"speedup measured needs the accelerated case, and {cal.clock.get('hardware_note')}"
            )
        return cal.measured_speedup(run.device, "send"), cal.measured_speedup(run.device, "recv")
    s = float(run.speedup)
    return s, s if run.speedup_r is None else float(run.speedup_r)


def device_times(cal: Calibration, run: VoseRun) -> tuple[float, float]:
    """(T_S, T_R) in ns for this run's mode: T_software / speedup in vose, else 0."""
    if run.mode != "vose":
        return 0.0, 0.0
    s_send, s_recv = speedups(cal, run)
    return device_time(software_ns(cal, run, "send"), s_send), device_time(
        software_ns(cal, run, "recv"), s_recv
    )


def _offload_plan(run: VoseRun) -> dict[str, bool]:
    checksum_on = not (run.path == "kernel_csum" and run.mode == "software")
    return {"tx_csum": checksum_on, "rx_csum": checksum_on}


def _set_rps(link: EmulatedLink, which: str, ifname: str, cpu: int) -> str:
    """Steer the interface's receive processing to its own end's core, as on two hosts (veth runs
    the receiver's softirq on the sender's core otherwise)."""
    path = f"/sys/class/net/{ifname}/queues/rx-0/rps_cpus"
    mask = f"{1 << cpu:x}"
    out = link.run_in(which, ["sh", "-c", f"echo {mask} > {path} && cat {path}"], timeout=10)
    if out.returncode != 0:
        return f"not set: {(out.stderr or out.stdout).strip()[-200:]}"
    return out.stdout.strip()


@contextlib.contextmanager
def _quotas(run: VoseRun, prefix: str) -> Iterator[dict[str, CpuQuota | None]]:
    """One CPU bandwidth quota per end (the frequency stand-in), removed on the way out."""
    quotas: dict[str, CpuQuota | None] = {"send": None, "recv": None}
    with contextlib.ExitStack() as stack:
        if run.cpu_quota < 1.0:
            for side in quotas:
                quotas[side] = stack.enter_context(CpuQuota(f"{prefix}q{side[0]}", run.cpu_quota))
        yield quotas


def run_trial(
    run: VoseRun,
    prefix: str,
    on_tick: Callable[[dict[str, Any]], None] | None = None,
    link_log: Path | None = None,
) -> VoseOutcome:
    """Calibrate, run the stream between the two namespaces, and return the measurements
    (``link_log``: where a trace link's per-millisecond log goes, ``qoelab.emulation.linklog``)."""
    run.check_cpus()
    cal = _calibrate(run)
    # Delay, loss, a trace, an outage or a queue discipline need an emulator; a rate alone is tbf on
    # the plain veth pair.
    shaped = bool(run.profile.needs_userspace) or any(
        d.delay_s or d.jitter_s or d.loss_pct or d.gemodel for d in (run.profile.up, run.profile.down)
    )
    backend = "auto" if shaped else PLUMBING_BACKEND
    with (
        emulated_link(run.profile, prefix=prefix, backend=backend, link_log=link_log) as link,
        _quotas(run, prefix) as quotas,
    ):
        path = _prepare_path(link, run)
        if run.calibration == "stream" and run.path == "app":
            _calibrate_in_stream(link, run, cal)
        t_s, t_r = device_times(cal, run)
        spec = PairSpec(mode=run.pair_mode, device=run.pair_device, record=run.record,
                        duration_s=run.duration_s, wait=run.wait, t_s_ns=t_s, t_r_ns=t_r,
                        sender_cpu=run.sender_cpu, receiver_cpu=run.receiver_cpu)  # fmt: skip
        outcome = _stream(link, spec, quotas, on_tick)
        path["throttled"] = {s: q.throttle() for s, q in quotas.items() if q is not None}
        path["cpu_quota"] = {
            s: q.describe() for s, q in quotas.items() if q is not None
        } or "none (full cores)"
        link_record = link.describe()
    link_record["path"] = (
        "veth (no emulator process)" + (", tbf rate" if run.profile.down.rate_bps else ", unshaped")
        if link_record["backend"] == PLUMBING_BACKEND
        else f"emulated link ({link_record['backend']}) for delay/loss/trace/queue"
    )
    sender, receiver = outcome["send"].summary(), outcome["recv"].summary()
    provenance = {
        "host_cpu": cpu_provenance(),  # the lab's one name for a trial's machine (findings, export)
        "clock": cal.clock,
        "calibration": {"method": run.calibration if run.path == "app" else "offline",
                        "stream_work_ns": cal.stream.get("work_ns")},
        "wait_granularity": cal.wait,
        "pair": {"mode": spec.mode, "device": spec.device, "record": spec.record, "wait": spec.wait,
                 "t_s_ns": t_s, "t_r_ns": t_r},
        **path,
        "tcp": {"sender": sender.get("tcp"), "receiver": receiver.get("tcp")},
    }  # fmt: skip
    return VoseOutcome(
        summary=_summary(run, outcome, t_s, t_r, cal),
        series=_series(outcome, run.sender_cpu, run.receiver_cpu),
        calibration=cal,
        provenance=provenance,
        link=link_record,
        sender=sender,
        receiver=receiver,
    )


def _calibrate(run: VoseRun) -> Calibration:
    """Each side's stages timed on that side's own core: the sender's on sender_cpu, the receiver's
    on receiver_cpu."""
    cal = calibrate(run.record, run.sender_cpu, samples=run.calibration_samples)
    on_receiver = calibrate(run.record, run.receiver_cpu, samples=run.calibration_samples)
    cal.stages.update({key: stage for key, stage in on_receiver.stages.items() if key[1] == "recv"})
    return cal


def _prepare_path(link: EmulatedLink, run: VoseRun) -> dict[str, Any]:
    """Offloads (TSO/GSO/GRO off; checksum offload by path and mode) and RPS on both ends, read back."""
    offloads: dict[str, Any] = {}
    rps: dict[str, str] = {}
    for side, ns, ifname, cpu in (("sender", "client", link.client_if, run.sender_cpu),
                                  ("receiver", "server", link.server_if, run.receiver_cpu)):  # fmt: skip
        if link.backend in ("netem", PLUMBING_BACKEND):
            offloads[side] = set_offloads(link.ns(ns), ifname, **_offload_plan(run))
        if run.rps:
            rps[side] = _set_rps(link, ns, ifname, cpu)
    if run.path == "kernel_csum" and not offloads:
        raise QoelabError("path kernel_csum needs a veth path (no delay or loss): the TUN link has no "
                          "checksum offload flags")  # fmt: skip
    pinning = {"sender_cpu": run.sender_cpu, "receiver_cpu": run.receiver_cpu, "rps": rps or "off"}
    return {"offloads": offloads, "pinning": pinning}


CALIBRATION_STREAM_S = 1.0


def _calibrate_in_stream(link: EmulatedLink, run: VoseRun, cal: Calibration) -> None:
    """Time the record work inside short streams on this path, as the thesis timed its functions in
    the running kernel: with the device's pieces in software, with the accelerated instructions, and
    with nothing done (inf). A tight loop on one record runs warmer than a stream does."""
    impls = ["software", "inf"]
    if cal.has("hardware") and run.device != "checksum":
        impls.insert(1, "hardware")
    work: dict[str, dict[str, float]] = {}
    for impl in impls:
        spec = PairSpec(mode=impl, device=run.device, record=run.record, duration_s=CALIBRATION_STREAM_S,
                        sender_cpu=run.sender_cpu, receiver_cpu=run.receiver_cpu)  # fmt: skip
        out = _stream(link, spec, {"send": None, "recv": None}, None)
        work[impl] = {side: float(out[side].summary()["work_ns"]["median"]) for side in ("send", "recv")}
    cal.set_stream(run.device, work)


def _stream(
    link: EmulatedLink,
    spec: PairSpec,
    quotas: dict[str, CpuQuota | None],
    on_tick: Callable[[dict[str, Any]], None] | None,
) -> dict[str, Any]:
    import subprocess

    def start(role: str, ns: str, quota: CpuQuota | None, cb: Any) -> PairProcess:
        argv = spec.argv(role, link.server_ip, PORT)
        if role == "recv":
            argv += ["--timeout", str(LISTEN_TIMEOUT_S + 5)]
        proc = link.popen_in(ns, argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        if quota is not None:  # at once: its first milliseconds (set-up, not records) run unthrottled
            quota.add(proc.pid)
        return PairProcess(role, proc, cb)

    cpus = sorted({spec.sender_cpu, spec.receiver_cpu})
    with host.CpuSampler(cpus, interval_s=spec.tick_s) as sampler:
        receiver = start("recv", "server", quotas["recv"], on_tick)
        receiver.wait_listening(LISTEN_TIMEOUT_S)
        started = time.monotonic()
        sender = start("send", "client", quotas["send"], None)
        limit = spec.duration_s + 60
        codes = (sender.finish(limit), receiver.finish(limit))
        window = (started, time.monotonic())
    if any(codes):
        raise failure(sender, receiver)
    return {"send": sender, "recv": receiver, "sampler": sampler, "window": window}


def _cpu_means(sampler: host.CpuSampler, cpu: int) -> dict[str, float]:
    """Mean of the whole intervals inside the stream (the first and last are partial), else totals."""
    rows = [r for r in sampler.series() if r["cpu"] == cpu]
    inner = rows[1:-1] if len(rows) >= 4 else []
    if not inner:
        return sampler.totals(cpu)
    return {k: statistics.fmean(r[k] for r in inner) for k in ("user", "system", "irq", "softirq", "busy")}


def _summary(run: VoseRun, out: dict[str, Any], t_s: float, t_r: float, cal: Calibration) -> dict[str, float]:
    snd, rcv = out["send"].summary(), out["recv"].summary()
    elapsed_r = max(float(rcv["t"]), 1e-9)
    elapsed_s = max(float(snd["t"]), 1e-9)
    summary: dict[str, float] = {
        "throughput_bps": 8.0 * float(rcv["bytes"]) / elapsed_r,
        "records": float(rcv["records"]),
        "T_S_ns": t_s,
        "T_R_ns": t_r,
        "T_S_software_ns": software_ns(cal, run, "send"),
        "T_R_software_ns": software_ns(cal, run, "recv"),
        "busy_fraction": float(snd["busy_ns"]) / 1e9 / elapsed_s,
        "busy_fraction_receiver": float(rcv["busy_ns"]) / 1e9 / elapsed_r,
        "thread_cpu_sender": (float(snd["utime_s"]) + float(snd["stime_s"])) / elapsed_s,
        "thread_cpu_receiver": (float(rcv["utime_s"]) + float(rcv["stime_s"])) / elapsed_r,
        "wait_ns_per_iteration": float(cal.wait.get("ns_per_iteration", math.nan)),
        # Every 64th record's work timed in place: against T from the calibration, the evidence
        # for how well a tight loop stands for the work inside the stream.
        "work_ns_sender": float((snd.get("work_ns") or {}).get("median", math.nan)),
        "work_ns_receiver": float((rcv.get("work_ns") or {}).get("median", math.nan)),
    }
    for role, cpu in (("sender", run.sender_cpu), ("receiver", run.receiver_cpu)):
        means = _cpu_means(out["sampler"], cpu)
        summary[f"cpu_{role}"] = means["busy"]
        for part in ("user", "system", "softirq"):
            summary[f"cpu_{role}_{part}"] = means[part]
    if cal.has("hardware") and run.path == "app" and run.device != "checksum":
        summary["speedup_measured_send"] = cal.measured_speedup(run.device, "send")
        summary["speedup_measured_recv"] = cal.measured_speedup(run.device, "recv")
    if run.mode == "vose":
        s_send, s_recv = speedups(cal, run)
        summary.update({"speedup_send": s_send, "speedup_recv": s_recv})
    return {k: v for k, v in summary.items() if math.isfinite(v)}  # JSON has no nan or inf


def _per_second(
    ticks: list[dict[str, Any]], value: Callable[[dict[str, Any]], float]
) -> list[tuple[float, float]]:
    """(t, change of ``value`` per second) between consecutive tick lines of one end."""
    out: list[tuple[float, float]] = []
    last_t, last_v = 0.0, 0.0
    for tick in ticks:
        t, v = float(tick["t"]), value(tick)
        if t > last_t:
            out.append((round(t, 3), (v - last_v) / (t - last_t)))
        last_t, last_v = t, v
    return out


# series name -> (end, what its tick lines count): goodput and sent rate in bit/s, the thread's user +
# system time and the emulated-device wait as shares of each second.
TICK_SERIES: dict[str, tuple[str, Callable[[dict[str, Any]], float]]] = {
    "goodput_bps": ("recv", lambda d: 8.0 * float(d["bytes"])),
    "sent_bps": ("send", lambda d: 8.0 * float(d["bytes"])),
    "thread_cpu_sender": ("send", lambda d: float(d["utime_s"]) + float(d["stime_s"])),
    "thread_cpu_receiver": ("recv", lambda d: float(d["utime_s"]) + float(d["stime_s"])),
    "busy_fraction": ("send", lambda d: float(d["busy_ns"]) / 1e9),
    "busy_fraction_receiver": ("recv", lambda d: float(d["busy_ns"]) / 1e9),
}


def _series(out: dict[str, Any], sender_cpu: int, receiver_cpu: int) -> list[tuple[str, float, float]]:
    series = [
        (name, t, v)
        for name, (end, value) in TICK_SERIES.items()
        for t, v in _per_second(out[end].ticks(), value)
    ]
    roles = {sender_cpu: "sender", receiver_cpu: "receiver"}
    for row in out["sampler"].series():
        for part in ("busy", "user", "system", "softirq"):
            name = f"cpu_{roles[row['cpu']]}" + ("" if part == "busy" else f"_{part}")
            series.append((name, round(float(row["t"]), 3), float(row[part])))
    return series
