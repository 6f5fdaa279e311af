"""VOSE host helpers: CPU provenance and accounting, veth offloads via ethtool, the CPU quota cgroup."""

import os
import platform
import secrets
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from qoelab.errors import ParameterError
from qoelab.hostfacts import CPUFREQ_ABSENT, PROVENANCE_FLAGS, cpu_provenance
from qoelab.vose import offloads, quota
from qoelab.vose.host import (
    CLK_TCK,
    CpuSampler,
    fractions,
    parse_proc_stat,
    parse_task_stat,
    thread_times,
)
from qoelab.vose.offloads import OffloadError, parse_offloads, read_offloads, set_offloads
from qoelab.vose.quota import CpuQuota, QuotaError, remove_leftover_quotas

PROC_STAT = """\
cpu  5209 0 2987 91562 469 0 174 39 0 0
cpu0 2353 0 1223 46644 22 0 38 21 0 0
cpu1 2856 7 1764 44917 447 0 136 17 3 0
intr 333860 0 0 0
ctxt 789096
"""

# `ethtool -k` on a veth (ethtool 6.1, kernel 6.18), shortened; `lo` has rx-checksumming fixed.
ETHTOOL_K = """\
Features for qltab12cda:
rx-checksumming: off
tx-checksumming: on
\ttx-checksum-ipv4: off [fixed]
\ttx-checksum-ip-generic: on
scatter-gather: on
\ttx-scatter-gather: on
tcp-segmentation-offload: off
\ttx-tcp-segmentation: off [requested on]
generic-segmentation-offload: off
generic-receive-offload: on [fixed]
large-receive-offload: off [fixed]
"""


def _cpu_seconds(pid: int) -> float:
    return sum(t["utime"] + t["stime"] for t in thread_times(pid).values())


def _wait_for(what: str, check, timeout: float = 10.0):
    deadline = time.monotonic() + timeout
    while not (value := check()):
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.02)
    return value


def _stop(proc: subprocess.Popen) -> None:
    proc.kill()
    proc.wait(timeout=10)


# --- CPU provenance ---------------------------------------------------------------------------------


def test_cpu_provenance_describes_this_host():
    prov = cpu_provenance()
    cpuinfo = Path("/proc/cpuinfo").read_text()
    present = set(next(ln for ln in cpuinfo.splitlines() if ln.startswith(("flags", "Features"))).split())
    assert prov["flags"] == [f for f in PROVENANCE_FLAGS if f in present]
    assert prov["invariant_tsc"] == ({"constant_tsc", "nonstop_tsc"} <= present)
    assert prov["cpus"] == os.cpu_count()
    assert prov["kernel"] == platform.release()
    assert prov["model"] and prov["model"] in cpuinfo + platform.processor() + "unknown"
    if Path("/sys/devices/system/cpu/cpu0/cpufreq").is_dir():
        assert 0 in prov["cpufreq"]
    else:
        assert prov["cpufreq"] == CPUFREQ_ABSENT


# --- /proc/stat -------------------------------------------------------------------------------------


def test_parse_proc_stat_keeps_only_the_numbered_cpu_lines():
    stat = parse_proc_stat(PROC_STAT)
    assert stat == {
        0: (2353, 0, 1223, 46644, 22, 0, 38, 21, 0, 0),
        1: (2856, 7, 1764, 44917, 447, 0, 136, 17, 3, 0),
    }


def test_fractions_split_an_interval_by_kind():
    before = (100, 0, 50, 800, 50, 0, 0, 0, 0, 0)
    # +60 user, +10 nice, +20 system, +90 idle, +10 iowait, +5 irq, +5 softirq: 200 ticks
    after = (160, 10, 70, 890, 60, 5, 5, 0, 7, 0)
    f = fractions(before, after)
    assert f["user"] == pytest.approx(0.35)
    assert f["system"] == pytest.approx(0.10)
    assert f["irq"] == f["softirq"] == pytest.approx(0.025)
    assert f["idle"] == pytest.approx(0.5)
    assert f["steal"] == 0
    assert f["busy"] == pytest.approx(0.5)
    assert f["busy_s"] == pytest.approx(100 / CLK_TCK)
    assert f["span_s"] == pytest.approx(200 / CLK_TCK)


def test_fractions_ignore_iowait_stepping_back_and_an_empty_interval_gives_zeros():
    f = fractions((0, 0, 0, 0, 10, 0, 0, 0), (50, 0, 0, 50, 5, 0, 0, 0))
    assert (f["user"], f["idle"], f["busy"]) == (0.5, 0.5, 0.5)
    same = (1, 2, 3, 4, 5, 6, 7, 8)
    assert set(fractions(same, same).values()) == {0.0}


def test_the_sampler_records_each_interval_and_the_whole_window():
    spin = threading.Event()

    def burn() -> None:
        while not spin.is_set():
            pass

    burner = threading.Thread(target=burn, daemon=True)
    with CpuSampler([0, 1], interval_s=0.1) as sampler:
        burner.start()
        try:
            _wait_for("three intervals per CPU", lambda: len(sampler.series()) >= 6)
        finally:
            spin.set()
            burner.join()
    rows = sampler.series()
    kinds = ("user", "system", "irq", "softirq", "idle", "steal", "busy")
    for cpu in (0, 1):
        mine = [r for r in rows if r["cpu"] == cpu]
        assert [r["t"] for r in mine] == sorted(r["t"] for r in mine)
        assert all(0 <= r[k] <= 1 for r in mine for k in kinds)
        total = sampler.totals(cpu)
        assert sum(total[k] for k in ("user", "system", "irq", "softirq", "idle", "steal")) == pytest.approx(
            1
        )
        assert total["busy"] == pytest.approx(1 - total["idle"])
        assert total["wall_s"] >= mine[-1]["t"] - 0.001
    # The burner kept one of the two CPUs busy: together at least some busy time was seen.
    assert sampler.totals(0)["busy_s"] + sampler.totals(1)["busy_s"] > 0


def test_the_sampler_stops_at_once_however_long_its_interval():
    start = time.monotonic()
    with CpuSampler([0], interval_s=600) as sampler:
        pass
    assert time.monotonic() - start < 5
    assert sampler.totals(0)["wall_s"] < 5


def test_the_sampler_refuses_a_cpu_that_is_not_online():
    with pytest.raises(ValueError, match="CPU 9999 is not online"), CpuSampler([9999]):
        pass


# --- per-thread times -------------------------------------------------------------------------------


def test_parse_task_stat_survives_parentheses_and_spaces_in_comm():
    rest = " ".join(str(n) for n in range(4, 53))  # fields 4..52, each holding its own number
    line = f"1234 (a) (b c)) R {rest}\n"
    parsed = parse_task_stat(line)
    assert parsed == {"comm": "a) (b c)", "utime": 14 / CLK_TCK, "stime": 15 / CLK_TCK, "processor": 39}


def test_thread_times_lists_each_thread_of_a_process():
    ready, done = threading.Event(), threading.Event()
    tids: list[int] = []

    def worker() -> None:
        tids.append(threading.get_native_id())
        ready.set()
        done.wait(30)

    t = threading.Thread(target=worker, name="vose-probe")
    t.start()
    try:
        ready.wait(10)
        times = thread_times(os.getpid())
    finally:
        done.set()
        t.join()
    assert {os.getpid(), tids[0]} <= set(times)
    for entry in times.values():
        assert entry["utime"] >= 0 and entry["stime"] >= 0
        assert 0 <= entry["processor"] < os.cpu_count()
    assert times[os.getpid()]["utime"] + times[os.getpid()]["stime"] > 0


def test_thread_times_of_a_missing_process_is_empty():
    pid_max = int(Path("/proc/sys/kernel/pid_max").read_text())
    assert thread_times(pid_max + 1) == {}


# --- ethtool offloads -------------------------------------------------------------------------------


def test_parse_offloads_reads_the_top_level_features_and_which_are_fixed():
    assert parse_offloads(ETHTOOL_K) == {
        "rx-checksumming": False,
        "tx-checksumming": True,
        "scatter-gather": True,
        "tcp-segmentation-offload": False,
        "generic-segmentation-offload": False,
        "generic-receive-offload": True,
        "fixed": ["generic-receive-offload"],
    }


@pytest.fixture
def veth():
    """A veth pair between two throwaway namespaces; yields (namespace, interface) of one end."""
    from qoelab.emulation.cleanup import cleanup_leftovers
    from qoelab.emulation.system import create_netns, find_tool, has_net_admin

    if not has_net_admin():
        pytest.skip("needs root or CAP_NET_ADMIN to create network namespaces")
    prefix = "qlt" + secrets.token_hex(3)
    ns_a, ns_b = prefix + "a", prefix + "b"
    try:
        create_netns(ns_a)
        create_netns(ns_b)
        # The ends are named after their namespaces: a bare "a" would be read as ip's "address" keyword.
        ip = find_tool("ip", "iproute2")
        subprocess.run(
            [ip, "-n", ns_a, "link", "add", ns_a, "type", "veth", "peer", "name", ns_b], check=True
        )
        subprocess.run([ip, "-n", ns_a, "link", "set", ns_b, "netns", ns_b], check=True)
        yield ns_a, ns_a
    finally:
        cleanup_leftovers(prefix)
        assert not [n for n in os.listdir("/run/netns") if n.startswith(prefix)]


@pytest.mark.netns
def test_offloads_switch_off_and_on_on_a_veth(veth):
    ns, ifname = veth
    off = set_offloads(ns, ifname, tx_csum=False, rx_csum=False)
    assert off == read_offloads(ns, ifname)
    for feature in ("tx-checksumming", "rx-checksumming", "tcp-segmentation-offload"):
        assert off[feature] is False
    assert off["generic-segmentation-offload"] is False and off["generic-receive-offload"] is False

    on = set_offloads(ns, ifname, tx_csum=True, rx_csum=True, tso=True, gso=True, gro=True, sg=True)
    for feature in offloads.OFFLOAD_FEATURES:
        assert on[feature] is True, feature
    assert read_offloads(ns, ifname)["fixed"] == []


@pytest.mark.netns
def test_an_offload_the_driver_fixes_is_named_in_the_error(veth):
    ns, _ = veth
    assert "rx-checksumming" in read_offloads(ns, "lo")["fixed"]
    with pytest.raises(OffloadError, match=r"^rx-checksumming stayed on on lo .*driver fixes it"):
        set_offloads(ns, "lo", tx_csum=True, rx_csum=False)


@pytest.mark.netns
def test_offloads_of_a_missing_interface_or_namespace_are_an_offload_error(veth):
    ns, _ = veth
    with pytest.raises(OffloadError, match="cannot read the offloads of nosuchif"):
        read_offloads(ns, "nosuchif")
    with pytest.raises(OffloadError, match="nosuchif"):
        set_offloads(ns, "nosuchif", tx_csum=False, rx_csum=False)
    with pytest.raises(OffloadError, match="in namespace qltnonexistent"):
        read_offloads("qltnonexistent", "lo")


# --- CPU quota --------------------------------------------------------------------------------------


def test_a_quota_refuses_fractions_outside_one_core_and_below_the_kernels_least_quota():
    for bad in (0, -0.5, 1.5):
        with pytest.raises(ParameterError, match="fraction"):
            CpuQuota("qltbad", bad)
    with pytest.raises(ParameterError, match="least quota"):
        CpuQuota("qltbad", 0.005)
    with pytest.raises(ParameterError, match="name"):
        CpuQuota("../escape", 0.5)


@pytest.fixture
def quota_prefix():
    """A random cgroup name prefix; whatever a test leaves under it is removed afterwards."""
    if os.geteuid() != 0:
        pytest.skip("needs root to create cgroups")
    if not (quota._v2_has_cpu() or quota._v1_has_cpu()):
        pytest.skip("no cgroup cpu controller mounted (v2 cpu.max or v1 cpu.cfs_quota_us)")
    prefix = "qlt" + secrets.token_hex(3)
    yield prefix
    assert remove_leftover_quotas(prefix) == []


def _quota_files(q: CpuQuota) -> str:
    path = Path(q.describe()["path"])
    if q.kind == quota.KIND_V2:
        return (path / "cpu.max").read_text().strip()
    return " ".join((path / f).read_text().strip() for f in ("cpu.cfs_quota_us", "cpu.cfs_period_us"))


def _state(pid: int) -> str:
    return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]


def _cgroup_of(pid: int) -> str:
    return Path(f"/proc/{pid}/cgroup").read_text()


@pytest.mark.netns
def test_a_quota_holds_its_limit_and_its_process_and_hands_it_back_on_exit(quota_prefix):
    name = quota_prefix + "s"
    sleeper = subprocess.Popen(["sleep", "30"])
    try:
        with CpuQuota(name, 0.2) as q:
            desc = q.describe()
            path = Path(desc["path"])
            assert path.name == name and path.is_dir()
            assert desc["quota_us"] == 20_000 and desc["period_us"] == 100_000 and desc["fraction"] == 0.2
            assert desc["kind"] in (quota.KIND_V1, quota.KIND_V2)
            assert "not a lower clock frequency" in desc["note"]
            assert _quota_files(q) == "20000 100000"
            q.add(sleeper.pid)
            assert q.pids() == [sleeper.pid]
            assert f"/{name}\n" in _cgroup_of(sleeper.pid)
        assert not path.exists()
        assert sleeper.poll() is None, "the quota's exit must not kill its processes"
        assert f"/{name}\n" not in _cgroup_of(sleeper.pid)
    finally:
        _stop(sleeper)


@pytest.mark.netns
def test_a_full_core_quota_sets_no_limit_but_still_makes_the_cgroup(quota_prefix):
    with CpuQuota(quota_prefix + "f", 1.0) as q:
        assert q.quota_us == -1
        assert _quota_files(q) == ("max 100000" if q.kind == quota.KIND_V2 else "-1 100000")
        path = Path(q.describe()["path"])
        assert path.is_dir()
    assert not path.exists()


@pytest.mark.netns
def test_a_busy_loop_under_a_fifth_of_a_core_gets_clearly_less_than_a_core(quota_prefix):
    spinner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        with CpuQuota(quota_prefix + "b", 0.2) as q:
            q.add(spinner.pid)
            cpu0, t0 = _cpu_seconds(spinner.pid), time.monotonic()
            time.sleep(1.5)
            cpu1, t1 = _cpu_seconds(spinner.pid), time.monotonic()
            path = Path(q.describe()["path"])
        # Load on the machine can only lower the share, so an upper bound cannot fail from it.
        assert (cpu1 - cpu0) / (t1 - t0) < 0.6
        throttle = q.throttle()
        assert set(throttle) == {"nr_periods", "nr_throttled", "throttled_s"}
        assert throttle["nr_throttled"] <= throttle["nr_periods"]
        usage = q.usage_s()
        assert usage is None or usage <= cpu1 + 0.5
    finally:
        _stop(spinner)
    assert not path.exists()


@pytest.mark.netns
def test_a_quota_is_removed_even_when_its_process_died_unreaped(quota_prefix):
    sleeper = subprocess.Popen(["sleep", "30"])
    try:
        with CpuQuota(quota_prefix + "z", 0.5) as q:
            q.add(sleeper.pid)
            sleeper.kill()
            _wait_for("the killed process to be a zombie", lambda: _state(sleeper.pid) == "Z")
            path = Path(q.describe()["path"])
        assert not path.exists()
    finally:
        _stop(sleeper)


@pytest.mark.netns
def test_a_quota_that_already_exists_is_a_quota_error(quota_prefix):
    with CpuQuota(quota_prefix + "d", 0.5), pytest.raises(QuotaError, match="already exists"):
        CpuQuota(quota_prefix + "d", 0.5).__enter__()


@pytest.mark.netns
def test_remove_leftover_quotas_removes_only_its_prefix_and_keeps_the_processes(quota_prefix):
    other = "qlt" + secrets.token_hex(3)
    sleeper = subprocess.Popen(["sleep", "30"])
    left = CpuQuota(quota_prefix + "x", 0.5).__enter__()
    try:
        left.add(sleeper.pid)
        path = Path(left.describe()["path"])
        with CpuQuota(other + "o", 0.5) as kept:
            assert remove_leftover_quotas(quota_prefix) == [str(path)]
            assert Path(kept.describe()["path"]).is_dir()
        assert not path.exists()
        assert sleeper.poll() is None
        assert f"/{path.name}\n" not in _cgroup_of(sleeper.pid)
        assert remove_leftover_quotas(quota_prefix) == []
    finally:
        _stop(sleeper)
        remove_leftover_quotas(other)


def test_remove_leftover_quotas_refuses_a_prefix_that_could_match_everything():
    with pytest.raises(ValueError):
        remove_leftover_quotas("")
