"""The vose trial and job type: T per mode from a literal calibration, the parameters' bounds and
which of them apply, and real trials between two namespaces joined by a veth pair (two seconds each,
200 calibration samples) with their offloads read back, a CPU quota, and a run killed mid-stream
that the worker's cleanup clears.

Nothing about speed is asserted beyond "more than nothing"; waits are polls with generous deadlines.
"""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from qoelab import jobs
from qoelab.emulation.cleanup import leftovers
from qoelab.emulation.system import ENV_MARK, find_tool, new_prefix
from qoelab.errors import ParameterError, QoelabError
from qoelab.jobs.vose import inapplicable, requires_for
from qoelab.jobtype import TrialContext
from qoelab.params import validate_params
from qoelab.runner import cleanup_prefix
from qoelab.vose import pair, quota
from qoelab.vose.pair import Calibration
from qoelab.vose.trial import VoseRun, device_times, run_trial, software_ns, speedups

REPO = Path(__file__).resolve().parents[2]
JOB = jobs.get("vose")


# --- T per mode, from a literal calibration ------------------------------------------------------


def _lines(impl: str, medians: dict[tuple[str, str], float]) -> list[dict[str, Any]]:
    """What `vose-pair calibrate --impl IMPL` prints, with these (side, stage) medians in ns."""
    sha1 = "masked" if impl == "software" else "native"
    head = {"type": "calibration", "impl": impl, "record": 1448, "clock": "tsc", "invariant_tsc": True,
            "ticks_per_ns": 1.0, "sha1": sha1, "aesni": True}  # fmt: skip
    stages = [
        {"type": "stage", "side": side, "stage": stage, "n": 200, "mean_ticks": ns, "median_ticks": ns,
         "p99_ticks": ns, "min_ticks": ns, "mean_ns": ns, "median_ns": ns, "p99_ns": ns, "min_ns": ns}
        for (side, stage), ns in medians.items()
    ]  # fmt: skip
    wait = {"type": "wait", "ticks_per_iteration": 30.0, "ns_per_iteration": 30.0, "busy_late_ns": 300.0,
            "sleep_late_ns": 60000.0, "target_ns": 10000}  # fmt: skip
    return [head, *stages, wait]


# T_software: aes_cbc 8000 ns send, 12000 ns receive; csum 100 and 50. Hardware aes_cbc 1000 and 4000:
# measured speedups 8 and 3.
SOFTWARE = {("send", "none"): 40, ("recv", "none"): 60, ("send", "aes_cbc"): 8040, ("recv", "aes_cbc"): 12060,
            ("send", "csum"): 140, ("recv", "csum"): 110}  # fmt: skip
HARDWARE = {("send", "none"): 40, ("recv", "none"): 60, ("send", "aes_cbc"): 1040, ("recv", "aes_cbc"): 4060}


def calibration(hardware: bool = True) -> Calibration:
    cal = Calibration(record=1448)
    cal.add(_lines("software", SOFTWARE))
    if hardware:
        cal.add(_lines("hardware", HARDWARE))
    else:
        cal.clock["hardware_note"] = "this CPU has no AES-NI: there is no hardware case to time"
    return cal


@pytest.mark.parametrize("mode", ["software", "hardware", "inf"])
def test_only_vose_waits(mode):
    cal = calibration()
    for path in ("app", "kernel_csum"):
        assert device_times(cal, VoseRun(path=path, mode=mode, device="aes_cbc", speedup=4)) == (0.0, 0.0)


def test_vose_waits_t_software_over_the_speedup_on_each_side():
    cal = calibration()
    run = VoseRun(mode="vose", device="aes_cbc", speedup=4)
    assert (software_ns(cal, run, "send"), software_ns(cal, run, "recv")) == (8000, 12000)
    assert speedups(cal, run) == (4.0, 4.0)
    assert device_times(cal, run) == (2000, 3000)
    # The receiver's own speedup overrides the common one on its side only.
    run_r = VoseRun(mode="vose", device="aes_cbc", speedup=4, speedup_r=8)
    assert speedups(cal, run_r) == (4.0, 8.0)
    assert device_times(cal, run_r) == (2000, 1500)
    assert device_times(cal, VoseRun(mode="vose", device="aes_cbc", speedup=math.inf)) == (0.0, 0.0)
    assert device_times(cal, VoseRun(mode="vose", device="aes_cbc", speedup=1)) == (8000, 12000)


def test_measured_is_this_hosts_software_over_hardware_time():
    cal = calibration()
    run = VoseRun(mode="vose", device="aes_cbc", speedup="measured")
    assert speedups(cal, run) == pytest.approx((8.0, 3.0))
    # T = T_software / (T_software / T_hardware): the emulated device takes the hardware's time.
    assert device_times(cal, run) == pytest.approx((1000, 4000))
    # speedup_r does not override a measured speedup: both sides are measured.
    run_r = VoseRun(mode="vose", device="aes_cbc", speedup="measured", speedup_r=100)
    assert speedups(cal, run_r) == pytest.approx((8.0, 3.0))


def test_measured_without_the_accelerated_case_says_why():
    run = VoseRun(mode="vose", device="aes_cbc", speedup="measured")
    with pytest.raises(QoelabError, match="measured needs the accelerated case, and this CPU has no AES-NI"):
        device_times(calibration(hardware=False), run)


def test_the_kernel_path_times_the_checksum_and_its_measured_speedup_is_the_offload_flag():
    cal = calibration()
    run = VoseRun(path="kernel_csum", mode="vose", device="sha1_aes_cbc", speedup=2)
    assert (run.pair_mode, run.pair_device) == ("vose", "checksum")
    assert (software_ns(cal, run, "send"), software_ns(cal, run, "recv")) == (100, 50)
    assert device_times(cal, run) == (50, 25)
    measured = VoseRun(path="kernel_csum", mode="vose", speedup="measured")
    assert speedups(cal, measured) == (math.inf, math.inf)
    assert device_times(cal, measured) == (0.0, 0.0)
    # Without a calibration of the accelerated case, too: the kernel's is the NIC flag.
    assert device_times(calibration(hardware=False), measured) == (0.0, 0.0)
    for mode in ("software", "hardware", "inf"):
        assert VoseRun(path="kernel_csum", mode=mode).pair_mode == "inf"
    assert (VoseRun(mode="hardware").pair_mode, VoseRun(mode="hardware").pair_device) == (
        "hardware",
        "sha1_aes_cbc",
    )


def test_a_trial_refuses_cores_it_cannot_have():
    with pytest.raises(ParameterError, match="receiver_cpu: must differ from sender_cpu"):
        VoseRun(sender_cpu=0, receiver_cpu=0).check_cpus()
    with pytest.raises(ParameterError, match="sender_cpu: cpu 4095 is not available"):
        VoseRun(sender_cpu=4095, receiver_cpu=0).check_cpus()


# --- parameters ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "field", "said"),
    [
        ({"speedup": 0.5}, "speedup", "must be 1 to 1000, inf or measured, got 0.5"),
        ({"speedup": 5000}, "speedup", "must be 1 to 1000, inf or measured, got 5000"),
        ({"speedup": "fast"}, "speedup", "must be 1 to 1000, inf or measured, got 'fast'"),
        ({"speedup": math.nan}, "speedup", "must be 1 to 1000"),
        ({"speedup_r": 0.5}, "speedup_r", "must be 1 to 1000 or inf, got 0.5"),
        ({"speedup_r": "measured"}, "speedup_r", "must be 1 to 1000 or inf, got 'measured'"),
        ({"record": 100}, "record", "greater than or equal to 256"),
        ({"record": 70000}, "record", "less than or equal to 65536"),
        ({"cpu_quota": 0.05}, "cpu_quota", "greater than or equal to 0.1"),
        ({"cpu_quota": 1.5}, "cpu_quota", "less than or equal to 1"),
        ({"duration": "0.5s"}, "duration", "must be at least 1s"),
        ({"duration": 0.5}, "duration", "must be at least 1s"),
        ({"sender_cpu": 0, "receiver_cpu": 0}, "receiver_cpu", "must differ from sender_cpu (0)"),
        # The receiver's default core (1) is checked too.
        ({"sender_cpu": 1}, "receiver_cpu", "must differ from sender_cpu (1)"),
        ({"mode": "hardware", "device": "checksum"}, "device", "offload flag of path kernel_csum"),
    ],
)
def test_bad_parameters_name_the_field_and_the_bound(raw, field, said):
    with pytest.raises(ParameterError) as err:
        validate_params(JOB.params, raw)
    assert [e["field"] for e in err.value.errors] == [field]
    assert said in err.value.errors[0]["message"]


def test_good_parameters_resolve_to_a_run():
    run = validate_params(JOB.params, {"mode": "vose", "speedup": "inf", "speedup_r": "12"}).to_run()
    assert (run.speedup, run.speedup_r) == (math.inf, 12.0)
    assert validate_params(JOB.params, {"speedup": "measured"}).to_run().speedup == "measured"
    hw_kernel = validate_params(JOB.params, {"path": "kernel_csum", "mode": "hardware", "device": "checksum"})
    assert hw_kernel.to_run().pair_mode == "inf"
    run = validate_params(JOB.params, {"sender_cpu": 1, "receiver_cpu": 0, "duration": "3s"}).to_run()
    assert (run.sender_cpu, run.receiver_cpu, run.duration_s) == (1, 0, 3.0)


def _params(**raw: Any):
    return validate_params(JOB.params, raw)


def test_speedup_and_wait_apply_only_to_vose_and_the_device_not_to_the_kernel_path():
    assert inapplicable(_params(mode="vose")) == set()
    for mode in ("software", "hardware", "inf"):
        assert inapplicable(_params(mode=mode, device="aes_cbc")) == {"speedup", "speedup_r", "wait"}
    kernel = inapplicable(_params(path="kernel_csum", mode="vose"))
    assert "device" in kernel and not {"speedup", "speedup_r", "wait"} & kernel
    assert {"device", "speedup", "speedup_r", "wait"} <= inapplicable(
        _params(path="kernel_csum", mode="software")
    )


@pytest.mark.parametrize(
    ("raw", "extra"),
    [
        ({"mode": "hardware", "device": "aes_only"}, {"vose.aesni"}),
        ({"mode": "hardware", "device": "aes_cbc"}, {"vose.aesni"}),
        ({"mode": "hardware", "device": "sha1_only"}, {"vose.sha_ni"}),
        ({"mode": "hardware", "device": "sha1_aes"}, {"vose.aesni", "vose.sha_ni"}),
        ({"mode": "hardware", "device": "sha1_aes_cbc"}, {"vose.aesni", "vose.sha_ni"}),
        ({"mode": "hardware", "path": "kernel_csum"}, set()),  # the offload flag needs no instruction
        ({"mode": "software", "device": "sha1_aes_cbc"}, set()),
        ({"mode": "vose", "device": "sha1_aes_cbc", "speedup": 10}, set()),
        ({"mode": "inf", "device": "aes_cbc"}, set()),
    ],
)
def test_only_hardware_runs_ask_for_the_accelerated_instructions(raw, extra):
    needs = requires_for(_params(**raw))
    assert needs == {"netns", "vose", *extra}
    assert JOB.requires <= needs


# --- real trials -----------------------------------------------------------------------------------


def _flags() -> set[str]:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("flags"):
            return set(line.partition(":")[2].split())
    return set()


def _trial_skip() -> str | None:
    if os.geteuid() != 0:
        return "needs root (network namespaces, ethtool, cgroups)"
    if len(os.sched_getaffinity(0)) < 2:
        return "needs two cores: the sender and the receiver are pinned to their own"
    try:
        find_tool("ethtool")
    except QoelabError as err:
        return str(err)
    subprocess.run(["make", "-s", "-C", str(REPO / "workers" / "qoelab" / "vose" / "csrc")], check=False)
    return None if os.access(pair.binary_path(), os.X_OK) else pair.NOT_BUILT


_SKIP = _trial_skip()
FLAGS = _flags()
trial_marks = [pytest.mark.netns, pytest.mark.slow, pytest.mark.skipif(_SKIP is not None, reason=_SKIP or "")]
needs_aesni = pytest.mark.skipif("aes" not in FLAGS, reason="this CPU has no AES-NI: no hardware case")
needs_quota = pytest.mark.skipif(
    not (quota._v2_has_cpu() or quota._v1_has_cpu()),
    reason="no cgroup cpu controller mounted (v2 cpu.max or v1 cpu.cfs_quota_us)",
)
CORES = sorted(os.sched_getaffinity(0))[:2]
SHORT = {"duration": 2, "calibration_samples": 200, "sender_cpu": CORES[0], "receiver_cpu": CORES[-1]}


def trial(fn):
    for mark in reversed(trial_marks):
        fn = mark(fn)
    return fn


@pytest.fixture
def prefix():
    name = new_prefix("qlvt")
    yield name
    cleanup_prefix(name)


def _cgroups(prefix: str) -> list[str]:
    return sorted(
        str(p) for base in {quota.CGROUP_ROOT, quota.CGROUP_V1_CPU} for p in base.glob(prefix + "*")
    )


def _pair_processes(prefix: str) -> list[tuple[int, str]]:
    """Live vose-pair ends (pid, recv|send) started for this prefix (their environment carries it)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
            if len(argv) < 2 or not argv[0].endswith(b"vose-pair") or argv[1] not in (b"recv", b"send"):
                continue
            env = (entry / "environ").read_bytes().split(b"\0")
        except OSError:
            continue  # it exited meanwhile
        if f"{ENV_MARK}={prefix}".encode() in env:
            found.append((int(entry.name), argv[1].decode()))
    return sorted(found)


def _left(prefix: str) -> dict[str, list[Any]]:
    found = leftovers(prefix)
    return {
        "namespaces": sorted(p.name for p in Path("/run/netns").glob(prefix + "*")),
        "devices": found["devices"],
        "processes": found["processes"] + _pair_processes(prefix),
        "cgroups": _cgroups(prefix),
    }


NOTHING = {"namespaces": [], "devices": [], "processes": [], "cgroups": []}


def _check_summary(s: dict[str, float], vose: bool) -> None:
    assert s["throughput_bps"] > 0 and s["records"] > 0
    for role in ("sender", "receiver"):
        assert 0 <= s[f"cpu_{role}"] <= 1.05, s
    if vose:
        assert s["T_S_ns"] > 0 and s["T_R_ns"] > 0
        assert s["busy_fraction"] > 0 and s["busy_fraction_receiver"] > 0
        assert s["T_S_ns"] == pytest.approx(s["T_S_software_ns"] / s["speedup_send"])
        assert s["T_R_ns"] == pytest.approx(s["T_R_software_ns"] / s["speedup_recv"])
    else:
        assert s["T_S_ns"] == s["T_R_ns"] == 0
        assert s["busy_fraction"] == s["busy_fraction_receiver"] == 0
        assert "speedup_send" not in s


def _check_offloads(offloads: dict[str, Any], checksum: bool) -> None:
    assert set(offloads) == {"sender", "receiver"}
    for end in offloads.values():
        assert end["tx-checksumming"] is checksum and end["rx-checksumming"] is checksum
        for feature in (
            "tcp-segmentation-offload",
            "generic-segmentation-offload",
            "generic-receive-offload",
        ):
            assert end[feature] is False, feature


@trial
@pytest.mark.parametrize(
    ("mode", "device", "extra"),
    [
        pytest.param("software", "sha1_aes_cbc", {}, id="software-sha1_aes_cbc"),
        pytest.param("hardware", "aes_cbc", {}, marks=needs_aesni, id="hardware-aes_cbc"),
        # measured needs the accelerated case's calibration: AES-NI
        pytest.param("vose", "sha1_aes_cbc", {"speedup": "measured"}, marks=needs_aesni, id="vose-measured"),
        pytest.param("inf", "aes_cbc", {}, id="inf-aes_cbc"),
    ],
)
def test_an_app_path_trial_in_each_mode(prefix, mode, device, extra):
    run = validate_params(JOB.params, {**SHORT, "mode": mode, "device": device, **extra}).to_run()
    out = run_trial(run, prefix)
    s = out.summary
    _check_summary(s, vose=mode == "vose")
    if mode == "vose":  # measured: this host's T_software / T_hardware, as the summary reports it
        assert s["speedup_send"] == s["speedup_measured_send"]
        assert s["speedup_recv"] == s["speedup_measured_recv"]
    assert out.receiver["records"] == out.sender["acked"] == s["records"]
    _check_offloads(out.provenance["offloads"], checksum=True)
    pair_record = {
        "mode": mode,
        "device": device,
        "record": 1448,
        "t_s_ns": s["T_S_ns"],
        "t_r_ns": s["T_R_ns"],
    }
    assert pair_record.items() <= out.provenance["pair"].items()
    assert out.provenance["pinning"]["sender_cpu"] == CORES[0]
    assert out.provenance["pinning"]["receiver_cpu"] == CORES[-1]
    assert out.provenance["cpu_quota"] == "none (full cores)" and out.provenance["throttled"] == {}
    assert out.provenance["clock"]["sha1_software"] == "masked"
    assert "veth" in out.link["path"] and out.link["backend"] == "veth"
    assert out.link["prefix"] == prefix
    assert {name for name, _, _ in out.series} >= {"goodput_bps", "cpu_sender", "cpu_receiver"}
    assert _left(prefix) == NOTHING


@trial
@pytest.mark.parametrize("mode", ["software", "vose"])
def test_a_kernel_checksum_trial_through_the_job(prefix, tmp_path, mode):
    params = validate_params(JOB.params, {**SHORT, "path": "kernel_csum", "mode": mode, "speedup": 2})
    ctx = TrialContext("t", tmp_path, prefix)
    result = JOB.run(params, ctx)
    s = result.summary
    _check_summary(s, vose=mode == "vose")
    assert "speedup_measured_send" not in s  # the kernel's hardware case is a flag, not an instruction
    # software: veth computes and verifies the checksum on both ends; vose: the flag stays on, the pair waits
    _check_offloads(result.provenance["offloads"], checksum=mode != "software")
    assert result.provenance["pair"]["device"] == "checksum"
    assert result.provenance["pair"]["mode"] == ("vose" if mode == "vose" else "inf")
    assert "veth" in result.link["path"]
    detail = json.loads((tmp_path / "vose.json").read_text())
    assert detail["summary"] == s and detail["receiver"]["records"] == s["records"]
    assert [(a.path, a.kind) for a in ctx.artifacts] == [(tmp_path / "vose.json", "json")]
    assert {x.kind for x in result.samples} == {"calibration"}
    assert {x.values["stage"] for x in result.samples} >= {"none", "csum"}
    assert result.provenance["elapsed_s"] > 0
    assert _left(prefix) == NOTHING


@trial
def test_a_trial_over_a_trace_link_runs_in_the_emulator_and_keeps_its_link_log(prefix, tmp_path):
    """A trace (issue 37) needs the userspace emulator even with no delay or loss: the trial runs over
    it, not over the plain veth pair, and keeps the per-millisecond link log as an artifact."""
    from qoelab.emulation import linklog

    params = validate_params(JOB.params, {**SHORT, "link_trace": "Verizon-LTE-short.down", "queue": "codel"})
    ctx = TrialContext("t", tmp_path, prefix)
    result = JOB.run(params, ctx)
    _check_summary(result.summary, vose=False)
    assert result.link["backend"] == "userspace" and "trace" in result.link["path"]
    assert result.link["traces"]["down"]["name"] == "Verizon-LTE-short.down"
    log = json.loads((tmp_path / linklog.ARTIFACT).read_text())
    assert set(log["directions"]) == {"down", "up"} and sum(log["directions"]["up"]["offered_bytes"]) > 0
    assert (tmp_path / linklog.ARTIFACT, "json") in [(a.path, a.kind) for a in ctx.artifacts]
    assert _left(prefix) == NOTHING


@trial
@needs_quota
def test_a_cpu_quota_is_a_bandwidth_quota_on_each_end_and_goes_away(prefix):
    seen: list[dict[str, list[int]]] = []

    def on_tick(line: dict[str, Any]) -> None:
        if line["type"] == "tick":  # both ends are running: look at their cgroups from the inside
            seen.append({Path(c).name: quota._pids(Path(c)) for c in _cgroups(prefix)})

    raw = {**SHORT, "mode": "vose", "device": "aes_cbc", "speedup": 4, "cpu_quota": 0.5}
    out = run_trial(validate_params(JOB.params, raw).to_run(), prefix, on_tick=on_tick)
    _check_summary(out.summary, vose=True)
    quotas = out.provenance["cpu_quota"]
    assert set(quotas) == {"send", "recv"}
    for side, q in quotas.items():
        assert "CPU bandwidth quota" in q["note"] and "not a lower clock frequency" in q["note"]
        assert q["kind"] in (quota.KIND_V1, quota.KIND_V2)
        assert (q["fraction"], q["quota_us"], q["period_us"]) == (0.5, 50_000, 100_000)
        assert Path(q["path"]).name == f"{prefix}q{side[0]}"
        assert not Path(q["path"]).exists()
    assert set(out.provenance["throttled"]) == {"send", "recv"}
    assert seen, "the receiver printed no tick while the stream ran"
    assert set(seen[0]) == {f"{prefix}qs", f"{prefix}qr"}
    assert any(len(s[f"{prefix}qr"]) == 1 and len(s[f"{prefix}qs"]) == 1 for s in seen), seen
    assert _left(prefix) == NOTHING


KILLED_TRIAL = """
from qoelab import jobs
from qoelab.params import validate_params
from qoelab.vose.trial import run_trial
raw = dict(duration=30, calibration_samples=200, mode='vose', device='aes_cbc', speedup=4, cpu_quota=0.5,
           sender_cpu={send}, receiver_cpu={recv})
run_trial(validate_params(jobs.get('vose').params, raw).to_run(), {prefix!r})
"""


@trial
@needs_quota
def test_a_trial_killed_mid_stream_leaves_nothing_after_cleanup(prefix):
    code = KILLED_TRIAL.format(send=CORES[0], recv=CORES[-1], prefix=prefix)
    proc = subprocess.Popen([sys.executable, "-c", code], start_new_session=True)
    try:
        deadline = time.monotonic() + 90
        while {role for _, role in _pair_processes(prefix)} != {"recv", "send"}:
            assert proc.poll() is None, f"the trial ended (exit {proc.returncode}) before its stream started"
            assert time.monotonic() < deadline, "the vose-pair ends never started"
            time.sleep(0.1)
    finally:
        proc.send_signal(signal.SIGKILL)  # the trial's Python only: its ends are left running
        proc.wait(timeout=30)
    left = _left(prefix)
    assert left["namespaces"] == [f"{prefix}c", f"{prefix}s"] and len(_pair_processes(prefix)) == 2, left
    assert sorted(Path(c).name for c in left["cgroups"]) == [f"{prefix}qr", f"{prefix}qs"]
    cleanup_prefix(prefix)
    assert _left(prefix) == NOTHING
