"""Drive ``vose-pair`` (C, ``vose/csrc/``): calibrate the primitives, derive T_S and T_R, run one stream.

The device time of thesis 000 eqs. (3.1)-(3.2) is T = T_software / speedup, per side. T_software
of a device is what the device's pieces cost one record on the pinned core: the median of the
record's work with those pieces done, minus the median with nothing done (the timing's own floor).
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import subprocess
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from qoelab import helpers
from qoelab.errors import QoelabError

log = logging.getLogger("qoelab.vose")
ENV_BINARY = helpers.VOSE_PAIR.env
NOT_BUILT = helpers.VOSE_PAIR.not_built
DEVICES = ("checksum", "sha1_only", "aes_only", "aes_cbc", "sha1_aes", "sha1_aes_cbc")
MODES = ("software", "hardware", "vose", "inf")
# The primitive a `qoelab vose validate` compares, and the device that offloads exactly it.
PRIMITIVE_DEVICE = {"aes": "aes_cbc", "sha1": "sha1_only", "checksum": "checksum"}
EXIT_REASONS = {
    2: "bad arguments",
    3: "integrity check failed",
    4: "handshake refused",
    5: "network or system",
}


class PairError(QoelabError):
    """vose-pair failed; the message is its own sentence."""


binary_path = helpers.VOSE_PAIR.path


def require_binary() -> Path:
    return helpers.VOSE_PAIR.require(PairError)


def _json_lines(text: Iterable[str]) -> list[dict[str, Any]]:
    out = []
    for line in text:
        line = line.strip()
        if line.startswith("{"):
            out.append(json.loads(line))
    return out


@dataclass(frozen=True)
class Stage:
    """One calibrated piece of work on one side: cycles (TSC ticks) and ns per record."""

    impl: str
    side: str
    stage: str
    n: int
    mean_ns: float
    median_ns: float
    p99_ns: float
    min_ns: float
    median_ticks: float

    @classmethod
    def from_line(cls, impl: str, d: dict[str, Any]) -> Stage:
        return cls(impl, d["side"], d["stage"], int(d["n"]), float(d["mean_ns"]), float(d["median_ns"]),
                   float(d["p99_ns"]), float(d["min_ns"]), float(d["median_ticks"]))  # fmt: skip


@dataclass
class Calibration:
    """Both implementations' stage timings of one record size, with the clock and wait facts."""

    record: int
    stages: dict[tuple[str, str, str], Stage] = field(default_factory=dict)  # (impl, side, stage)
    clock: dict[str, Any] = field(default_factory=dict)
    wait: dict[str, Any] = field(default_factory=dict)
    stream: dict[str, Any] = field(default_factory=dict)  # set_stream(): the in-stream timings

    def add(self, lines: Sequence[dict[str, Any]]) -> None:
        head = next((d for d in lines if d.get("type") == "calibration"), None)
        if head is None:
            raise PairError("vose-pair calibrate printed no calibration header")
        impl = head["impl"]
        # update, not replace: the software run's sha1_software must survive the hardware run's add
        self.clock.update({k: head[k] for k in ("clock", "invariant_tsc", "ticks_per_ns", "aesni")})
        self.clock[f"sha1_{impl}"] = head.get("sha1")
        for d in lines:
            if d.get("type") == "stage":
                st = Stage.from_line(impl, d)
                self.stages[(impl, st.side, st.stage)] = st
            elif d.get("type") == "wait" and impl == "software":
                self.wait = {k: v for k, v in d.items() if k != "type"}

    def set_stream(self, device: str, work_ns: dict[str, dict[str, float]]) -> None:
        """Per-record work timed inside short streams, {impl: {side: median ns}} with impl software,
        hardware and inf (nothing done): T of ``device`` is then impl minus inf, as measured in place."""
        self.stream = {"device": device, "work_ns": work_ns}

    def device_ns(self, device: str, side: str, impl: str = "software") -> float:
        """T of the device's pieces per record on ``side`` (send|recv), never < 0: from the streams when
        they timed this device (work with the device's pieces minus work without them), else from
        the tight-loop stages (median minus the timing floor)."""
        stream = self.stream
        if stream and stream["device"] == device and impl in stream["work_ns"] and "inf" in stream["work_ns"]:
            return max(0.0, stream["work_ns"][impl][side] - stream["work_ns"]["inf"][side])
        try:
            work = self.stages[(impl, side, device)].median_ns
            floor = self.stages[(impl, side, "none")].median_ns
        except KeyError:
            raise PairError(f"no {impl} calibration of {device} on the {side} side") from None
        return max(0.0, work - floor)

    def has(self, impl: str) -> bool:
        return any(k[0] == impl for k in self.stages)

    def measured_speedup(self, device: str, side: str) -> float:
        """T_software / T_hardware of the device on one side: the speedup a VOSE run must emulate."""
        hw = self.device_ns(device, side, "hardware")
        sw = self.device_ns(device, side, "software")
        if sw <= 0:
            how = "inside the streams" if self.stream.get("device") == device else "in the tight loop"
            raise PairError(
                f"the {side} side's {device} work timed {how} cost nothing in software, so there is no "
                "speedup to measure (calibration offline times it apart from the stream)"
            )
        return math.inf if hw <= 0 else sw / hw

    def samples(self) -> list[dict[str, Any]]:
        return [
            {"impl": s.impl, "side": s.side, "stage": s.stage, "n": s.n, "mean_ns": s.mean_ns,
             "median_ns": s.median_ns, "p99_ns": s.p99_ns, "min_ns": s.min_ns, "median_ticks": s.median_ticks}
            for s in self.stages.values()
        ]  # fmt: skip


def device_time(t_software_ns: float, speedup: float) -> float:
    """Eqs. (3.1)/(3.2): T = T_software / speedup; speedup inf gives 0 (the device takes no time).

    A researcher's speedup is 1 to 1000 (the parameter's bounds); a measured one may be below 1
    (an accelerator slower than software on this host), which is still a device time."""
    if not speedup > 0:
        raise ValueError(f"speedup must be positive, got {speedup}")
    return 0.0 if math.isinf(speedup) else t_software_ns / speedup


def calibrate(record: int, cpu: int, samples: int = 2000, hardware: bool = True) -> Calibration:
    """Time every stage on ``cpu`` in software (SHA-NI masked) and, if asked, with AES-NI/SHA-NI."""
    binary = require_binary()
    cal = Calibration(record=record)
    for impl in ("software", "hardware") if hardware else ("software",):
        argv = [str(binary), "calibrate", "--impl", impl, "--record", str(record), "--cpu", str(cpu),
                "--samples", str(samples)]  # fmt: skip
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=300)
        if proc.returncode != 0:
            if impl == "hardware" and proc.returncode == 2:
                cal.clock["hardware_note"] = proc.stderr.strip()
                continue
            raise PairError(proc.stderr.strip() or f"vose-pair calibrate exited {proc.returncode}")
        cal.add(_json_lines(proc.stdout.splitlines()))
    return cal


@dataclass
class PairSpec:
    """One stream's settings, as both ends must agree on them (the handshake checks)."""

    mode: str
    device: str
    record: int = 1448
    duration_s: float = 10.0
    wait: str = "busy"
    t_s_ns: float = 0.0
    t_r_ns: float = 0.0
    sender_cpu: int = 0
    receiver_cpu: int = 1
    seed: int = 1
    tick_s: float = 1.0
    corrupt_record: int | None = None  # tests: flip a bit of this record after the sender's work

    def argv(self, role: str, addr: str, port: int) -> list[str]:
        t = self.t_s_ns if role == "send" else self.t_r_ns
        cpu = self.sender_cpu if role == "send" else self.receiver_cpu
        argv = [str(require_binary()), role, "--addr", addr, "--port", str(port), "--mode", self.mode,
                "--device", self.device, "--record", str(self.record), "--cpu", str(cpu), "--wait",
                self.wait, "--seed", str(self.seed), "--tick", str(self.tick_s),
                "--duration", str(self.duration_s)]  # fmt: skip
        if self.mode == "vose" and t > 0:
            argv += ["--t-ns", f"{t:.3f}"]
        if role == "send" and self.corrupt_record is not None:
            argv += ["--corrupt", str(self.corrupt_record)]
        return argv


class PairProcess:
    """One running end: its JSON lines collected by a thread, its stderr kept for the error."""

    def __init__(self, role: str, proc: subprocess.Popen, on_line: Callable[[dict], None] | None = None):
        self.role = role
        self.proc = proc
        self.lines: list[dict[str, Any]] = []
        self._on_line = on_line
        self._listening = threading.Event()
        self._reader = threading.Thread(target=self._read, name=f"vose-{role}", daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for raw in self.proc.stdout:
            if not raw.startswith("{"):
                continue
            d = json.loads(raw)
            self.lines.append(d)
            if d.get("type") == "listening":
                self._listening.set()
            elif self._on_line is not None:
                try:
                    self._on_line(d)
                except Exception:  # a broken callback must not stop the reading: the end would block
                    log.exception("the %s end's line callback failed", self.role)
        self._listening.set()  # EOF: whoever waits must look at the exit status

    def wait_listening(self, timeout: float) -> None:
        if self._listening.wait(timeout) and self.ticks("listening"):
            return
        if self._listening.is_set():
            # EOF without the line: the receiver is exiting; its stdout closes before it can be
            # reaped, so wait for the exit status the message is made of.
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=5)
        self.proc.poll()
        raise PairError(f"the receiver did not listen within {timeout:g} s: {self.error_text()}")

    def ticks(self, kind: str = "tick") -> list[dict[str, Any]]:
        return [d for d in self.lines if d.get("type") == kind]

    def summary(self) -> dict[str, Any]:
        found = self.ticks("summary")
        if not found:
            raise PairError(f"the {self.role} end printed no summary: {self.error_text()}")
        return found[-1]

    def finish(self, timeout: float) -> int:
        try:
            code = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise PairError(f"the {self.role} end did not finish within {timeout:g} s") from None
        self._reader.join(timeout=5)
        return code

    def error_text(self) -> str:
        err = ""
        if self.proc.stderr is not None and self.proc.poll() is not None:
            err = self.proc.stderr.read() or ""
        code = self.proc.returncode
        why = EXIT_REASONS.get(code or 0, f"exit {code}")
        text = " ".join(line.removeprefix("vose-pair: ") for line in err.strip().splitlines()[-2:])
        return text or why


def failure(sender: PairProcess, receiver: PairProcess) -> PairError:
    """One sentence for a failed stream: the receiver's word first, since it holds the checks."""
    parts = []
    for end in (receiver, sender):
        if end.proc.returncode:
            parts.append(f"{end.role}: {end.error_text()}")
    return PairError("; ".join(parts) or "the stream failed")
