"""Hold a guest's QEMU to a share of the host's CPU: the slowed condition of a reliability benchmark.

The guest's browser once stalled on some hosts and not on others (docs/vm.md, "Why the guest's
browser stalled"): a race that a slower TCG guest loses. Rather than wait for a slow machine, a run
sets ``QOELAB_VM_CPU_QUOTA`` (in cores, e.g. ``0.6``) and every guest's QEMU, with all its vCPU
threads, is put in a CPU cgroup with that quota (cgroup v2 ``cpu.max`` or v1 ``cpu.cfs_quota_us``).
Unset, nothing changes. The quota is recorded in the trial's provenance (``vm.cpu_quota``).
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from qoelab.errors import ParameterError, QoelabError

ENV_CPU_QUOTA = "QOELAB_VM_CPU_QUOTA"
CGROUP_ROOT = Path("/sys/fs/cgroup")
PERIOD_US = 100_000
QUOTA_BOUNDS = (0.05, 64.0)  # cores


class ThrottleError(QoelabError):
    """The host cannot hold QEMU to a CPU quota (no CPU cgroup controller here)."""


def cpu_quota_from_env() -> float | None:
    """The quota asked for in ``QOELAB_VM_CPU_QUOTA`` (cores), None when unset or empty."""
    raw = os.environ.get(ENV_CPU_QUOTA, "").strip()
    if not raw:
        return None
    try:
        cores = float(raw)
    except ValueError:
        raise ParameterError(ENV_CPU_QUOTA, f"must be a number of cores, got {raw!r}") from None
    low, high = QUOTA_BOUNDS
    if not low <= cores <= high:
        raise ParameterError(ENV_CPU_QUOTA, f"must be {low}..{high} cores, got {cores}")
    return cores


def _cpu_hierarchy() -> tuple[Path, str]:
    """Where CPU cgroups are made here and which interface: ("v2", root) or ("v1", the cpu mount)."""
    if (CGROUP_ROOT / "cgroup.controllers").exists():
        if "cpu" not in (CGROUP_ROOT / "cgroup.controllers").read_text().split():
            raise ThrottleError("cgroup v2 without the cpu controller: cannot hold QEMU to a quota")
        return CGROUP_ROOT, "v2"
    for name in ("cpu", "cpu,cpuacct"):
        if (CGROUP_ROOT / name / "cpu.cfs_quota_us").exists():
            return CGROUP_ROOT / name, "v1"
    raise ThrottleError(f"no CPU cgroup under {CGROUP_ROOT}: cannot hold QEMU to a quota")


def hold(pid: int, cores: float, name: str) -> Path:
    """Put process ``pid`` (all its threads) in a new cgroup ``qoelab-<name>`` limited to ``cores``."""
    root, version = _cpu_hierarchy()
    group = root / f"qoelab-{name}"
    group.mkdir(exist_ok=True)
    quota = int(cores * PERIOD_US)
    if version == "v2":
        with contextlib.suppress(OSError):  # already enabled, or enabled by whoever owns the root
            (root / "cgroup.subtree_control").write_text("+cpu")
        (group / "cpu.max").write_text(f"{quota} {PERIOD_US}")
    else:
        (group / "cpu.cfs_period_us").write_text(str(PERIOD_US))
        (group / "cpu.cfs_quota_us").write_text(str(quota))
    (group / "cgroup.procs").write_text(str(pid))
    return group


def release(group: Path) -> None:
    """Remove a guest's cgroup once its QEMU has exited (an empty cgroup is removed by rmdir)."""
    with contextlib.suppress(FileNotFoundError, OSError):
        group.rmdir()


def leftover_groups(prefix: str) -> list[Path]:
    """Cgroups of guests under ``prefix`` that a killed worker left (removed by its cleanup)."""
    try:
        root, _version = _cpu_hierarchy()
    except ThrottleError:
        return []
    return sorted(root.glob(f"qoelab-{prefix}*"))
