"""What machine ran a trial or a benchmark run: the CPU's model, clock, flags and frequency state.

Recorded with every result that depends on the host's speed (VOSE trials, the storage benchmark's
guest under TCG, benchmark rows), so findings can judge each machine's results apart
(``qoelab.findings.base.machine``).
"""

from __future__ import annotations

import contextlib
import os
import platform
import shutil
import subprocess
from pathlib import Path
from typing import Any

import qoelab

PROVENANCE_FLAGS = (
    "aes",
    "sha_ni",
    "avx",
    "avx2",
    "avx512f",
    "ssse3",
    "pclmulqdq",
    "constant_tsc",
    "nonstop_tsc",
    "rdtscp",
    "tsc_known_freq",
)
CPUFREQ_ABSENT = "not exposed (frequency cannot be changed here)"
SYS_CPU = Path("/sys/devices/system/cpu")


def _first_cpuinfo_block(text: str) -> dict[str, str]:
    info: dict[str, str] = {}
    for line in text.splitlines():
        if not line.strip():
            if info:
                break  # every processor block repeats the model and flags
            continue
        key, sep, value = line.partition(":")
        if sep:
            info.setdefault(key.strip(), value.strip())
    return info


def _cpufreq() -> dict[int, dict[str, Any]] | str:
    found: dict[int, dict[str, Any]] = {}
    for cpu_dir in SYS_CPU.glob("cpu[0-9]*"):
        freq_dir = cpu_dir / "cpufreq"
        if not freq_dir.is_dir():
            continue
        entry: dict[str, Any] = {}
        with contextlib.suppress(OSError, ValueError):
            entry["scaling_cur_freq"] = int((freq_dir / "scaling_cur_freq").read_text())  # kHz
        with contextlib.suppress(OSError):
            entry["governor"] = (freq_dir / "scaling_governor").read_text().strip()
        found[int(cpu_dir.name[3:])] = entry
    return dict(sorted(found.items())) or CPUFREQ_ABSENT


def cpu_provenance() -> dict[str, Any]:
    """Model, crypto/TSC flags, CPU count, kernel and cpufreq state, for a trial's record.

    ``cpufreq`` maps each CPU to ``scaling_cur_freq`` (kHz) and ``governor``, or is the sentence
    :data:`CPUFREQ_ABSENT` where the kernel exposes no cpufreq (typical in VMs).
    """
    info = _first_cpuinfo_block(Path("/proc/cpuinfo").read_text())
    # x86 says "model name" and "flags"; arm64 says "Model"/"CPU part" and "Features".
    model = info.get("model name") or info.get("Model") or info.get("Hardware") or platform.processor()
    present = set((info.get("flags") or info.get("Features") or "").split())
    flags = [f for f in PROVENANCE_FLAGS if f in present]
    return {
        "model": model or "unknown",
        # The clock the kernel calibrated (BogoMIPS / 2 in MHz on x86): the model name alone does
        # not tell two machines apart (findings judge host-bound results per machine).
        "bogomips": info.get("bogomips") or info.get("BogoMIPS"),
        "flags": flags,
        "invariant_tsc": {"constant_tsc", "nonstop_tsc"} <= present,
        "cpus": os.cpu_count(),
        "kernel": platform.release(),
        "cpufreq": _cpufreq(),
    }


def run_facts() -> dict[str, Any]:
    """The machine and code of a benchmark row: ``{"cpu", "bogomips", "cores", "kernel", "node",
    "code_revision"}`` (the ``host`` a findings row carries, plus what reproduces it)."""

    cpu = cpu_provenance()
    return {
        "cpu": cpu["model"],
        "bogomips": cpu["bogomips"],
        "cores": cpu["cpus"],
        "kernel": cpu["kernel"],
        "node": platform.node(),
        "code_revision": code_revision(),
    }


REPO_DIR = Path(__file__).resolve().parent.parent.parent


def code_revision() -> str:
    """``git describe`` of the checkout this code runs from, else the package version.

    QOELAB_CODE_REVISION overrides both (container images have no .git).
    """
    override = os.environ.get("QOELAB_CODE_REVISION", "").strip()
    if override:
        return override
    if (REPO_DIR / ".git").exists() and shutil.which("git"):
        try:
            out = subprocess.run(
                ["git", "-c", f"safe.directory={REPO_DIR}", "-C", str(REPO_DIR), "describe", "--always",
                 "--dirty", "--tags"],
                capture_output=True, text=True, timeout=10, check=True,
            )  # fmt: skip
            if out.stdout.strip():
                return out.stdout.strip()
        except (OSError, subprocess.SubprocessError):
            pass
    return f"qoelab {qoelab.__version__}"
