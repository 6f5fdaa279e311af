"""What a job type declares about itself (qoelab.jobtype): the probes that report its capabilities
and the cleanups of its leftovers, and how capabilities.detect() and runner.cleanup_prefix read them
from the registry alone."""

from __future__ import annotations

import ast
import dataclasses
import os
import re
import secrets
from collections.abc import Iterator
from pathlib import Path

import pytest
from pydantic import BaseModel

from qoelab import findings, jobs, presets, runner
from qoelab.findings.base import INCONCLUSIVE, Check, Comparison, Report, Scope
from qoelab.jobtype import Cleanup, HostProbe, JobType, TrialContext, TrialResult, resolve
from qoelab.preset import Chapter, Preset

# What the two test cleanups below saw: whether the trial's namespace still existed when they ran.
SEEN: list[tuple[str, bool]] = []


def _namespace_exists(prefix: str) -> bool:
    from pyroute2 import netns

    return any(n.startswith(prefix) for n in netns.listnetns())


def inside_cleanup(prefix: str) -> list[str]:
    SEEN.append(("inside", _namespace_exists(prefix)))
    return [f"inside {prefix}"]


def after_cleanup(prefix: str) -> list[str]:
    SEEN.append(("after", _namespace_exists(prefix)))
    return [f"after {prefix}"]


def probe_flags(found: HostProbe) -> None:
    found.set("t.plugin", True)
    found.set("t.plugin.missing", False)


def _nothing_to_compare(scope: Scope) -> tuple[list[Comparison], list[str]]:
    return [], ["this test's check compares nothing"]


REPORT = Report(
    "t_report",
    "A test's findings",
    (Check("t_check", "T check", "a claim", "Fig. 0", None, (), _nothing_to_compare),),
    {"t_check": "the paper's value"},
)


CHAPTER = Chapter(
    "t_report",
    "A test's chapter",
    (
        Preset(
            key="t-one",
            report="t_report",
            figure="Fig. T",
            title="one",
            description="a test's preset",
            kind="sweep",
            job_type="t_plugin",
            grids={"quick": {}, "full": {}},
        ),
    ),  # fmt: skip
    note="see `docs/architecture.md`",
)


class _Nothing(BaseModel):
    pass


def _never(params: BaseModel, ctx: TrialContext) -> TrialResult:
    raise AssertionError("not run")


@pytest.fixture
def plugin_job() -> Iterator[JobType]:
    """A job type registered for one test, declaring a probe and a cleanup in each round."""
    job = JobType(
        name="t_plugin",
        title="T",
        description="a job type of this test",
        params=_Nothing,
        requires=frozenset({"t.plugin"}),
        run=_never,
        probes=(f"{__name__}:probe_flags",),
        cleanups=(
            Cleanup(f"{__name__}:after_cleanup", after_link=True),
            Cleanup(f"{__name__}:inside_cleanup"),
        ),
        reports=(f"{__name__}:REPORT",),
        presets=f"{__name__}:CHAPTER",
    )
    jobs.register(job)
    try:
        yield job
    finally:
        del jobs.REGISTRY[job.name]


def test_every_declared_probe_and_cleanup_names_a_function() -> None:
    refs = [r for job in jobs.REGISTRY.values() for r in (*job.probes, *(c.remove for c in job.cleanups))]
    assert refs, "no job type declares a probe or a cleanup"
    for ref in refs:
        assert callable(resolve(ref)), ref


def test_a_reference_to_nothing_is_refused_naming_it() -> None:
    with pytest.raises(ImportError, match="'qoelab.rd.capability:no_such' does not name a function"):
        resolve("qoelab.rd.capability:no_such")


def test_every_capability_a_job_type_requires_has_a_probe_that_reports_it() -> None:
    """Each job type's probes (with the platform's flags) set every flag its ``requires`` names, and
    every False flag carries a reason."""
    from qoelab import capabilities

    found = HostProbe({}, {})
    for ref in dict.fromkeys(r for job in jobs.REGISTRY.values() for r in job.probes):
        resolve(ref)(found)
    platform = {"netns", "link", "userspace_link", "iperf3", "tshark", "nft", *capabilities.EMULATION_CAPS}
    for job in jobs.REGISTRY.values():
        assert job.requires - platform <= found.caps.keys(), job.name
    assert {
        "rd.x2go.client",
        "vm",
        "apt.nbd",
        "storage.guest",
        "vose.aesni",
        "thinclient",
    } <= found.caps.keys()
    assert all(found.reasons.get(name) for name, ok in found.caps.items() if not ok)


def test_the_storage_probe_reads_the_vm_flag_an_earlier_probe_set() -> None:
    from qoelab.storage.capability import probe

    found = HostProbe({"vm": False}, {})
    probe(found)
    assert not found.caps["storage.guest"] and not found.caps["storage.disk_rate"]
    assert found.reasons["storage.guest"] == "no QEMU guest can run here (see vm)"
    assert "no QEMU guest" in found.reasons["storage.disk_rate"]


def test_detect_reports_a_registered_job_types_own_flags(plugin_job: JobType) -> None:
    from qoelab import capabilities

    facts = capabilities.detect(probe_kvm=False)
    assert facts["capabilities"]["t.plugin"] is True
    assert facts["capabilities"]["t.plugin.missing"] is False
    assert facts["reasons"]["t.plugin.missing"] == "not available"


@pytest.mark.netns
def test_cleanup_runs_a_job_types_cleanups_around_the_links_own(plugin_job: JobType) -> None:
    """The inside round sees the trial's namespace, the after round runs once it is gone."""
    if os.geteuid() != 0:
        pytest.skip("needs root to create network namespaces")
    from pyroute2 import netns

    prefix = "qz" + secrets.token_hex(3)
    netns.create(prefix + "s")
    SEEN.clear()
    try:
        removed = runner.cleanup_prefix(prefix)
    finally:
        if _namespace_exists(prefix):
            netns.remove(prefix + "s")
    assert SEEN == [("inside", True), ("after", False)]
    assert removed[0] == f"inside {prefix}" and removed[-1] == f"after {prefix}"
    assert any(prefix + "s" in item for item in removed), removed


def test_a_cleanup_two_job_types_declare_runs_once(plugin_job: JobType) -> None:
    twin = dataclasses.replace(plugin_job, name="t_plugin_twin")
    jobs.register(twin)
    SEEN.clear()
    try:
        runner.cleanup_prefix("qz" + secrets.token_hex(3))
    finally:
        del jobs.REGISTRY[twin.name]
    assert [what for what, _ in SEEN] == ["inside", "after"]


def _imported(path: Path) -> set[str]:
    """Every module ``path`` imports, function-local imports included."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            found |= {node.module, *(f"{node.module}.{a.name}" for a in node.names)}
    return found


def test_the_central_modules_name_no_job_type_and_import_no_engine() -> None:
    """capabilities, runner, findings, presets and the Reproduce page loop over the registry: they
    import no engine package and no job module, and no string in them is a job type's name."""
    src = Path(runner.__file__).parent
    engines = ("qoelab.rd", "qoelab.vm", "qoelab.apt", "qoelab.storage", "qoelab.vose", "qoelab.thinclient")
    central = ("capabilities.py", "runner.py", "findings/__init__.py", "presets.py", "preset.py",
               "estimate.py", "cli.py", "run_cli.py", "../../backend/dashboard/reproduce.py")  # fmt: skip
    for module in central:
        imports = _imported(src / module)
        job_modules = tuple(f"qoelab.jobs.{name}" for name in jobs.REGISTRY)
        bad = sorted(m for m in imports if m.startswith(engines + job_modules))
        assert not bad, f"{module} imports {bad}"
        text = " ".join(
            n.value
            for n in ast.walk(ast.parse((src / module).read_text()))
            if isinstance(n, ast.Constant) and isinstance(n.value, str)
        )  # every string, its help texts and docstrings included
        named = {name for name in jobs.REGISTRY if re.search(rf"\b{name}\b", text)}
        assert not named, f"{module} names {sorted(named)}"


def test_findings_read_the_reports_job_types_declare(plugin_job: JobType) -> None:
    assert findings.JOB_REPORTS["t_plugin"] == "t_report"
    assert findings.JOB_REPORTS["rd_qoe"] == "ch4" and "sb001" in findings.HOST_BOUND
    assert findings.REPORT_TITLES["t_report"] == "A test's findings"
    assert findings.PAPER_VALUES["t_report"]["t_check"] == "the paper's value"
    [found] = findings.evaluate("t_report", [{"params": {"rate": 1e6}, "summary": {}}])
    assert (found.verdict, found.reason) == (INCONCLUSIVE, "this test's check compares nothing")


def test_two_job_types_cannot_declare_one_report(plugin_job: JobType) -> None:
    jobs.register(dataclasses.replace(plugin_job, name="t_plugin_twin", probes=(), cleanups=()))
    try:
        with pytest.raises(
            ValueError, match="findings report 't_report' declared by t_plugin and t_plugin_twin"
        ):
            findings.REPORTS["t_report"]
    finally:
        del jobs.REGISTRY["t_plugin_twin"]


def test_presets_collect_the_chapters_job_types_declare(plugin_job: JobType) -> None:
    assert [c.report for c in presets.chapters()] == ["ch4", "ch2", "ch3", "tc002", "sb001", "t_report"]
    assert presets.get("t-one").job_type == "t_plugin"
    assert presets.chapter("t_report").note == "see `docs/architecture.md`"
    assert presets.get("ch4-fig46").sweep_spec("quick")["fixed"]["pages"] == 5  # rd_qoe's five screens
    assert "pages" not in presets.get("ch4-table42").conditions("quick")[0]["params"]  # not a campaign's
    with pytest.raises(ValueError, match="unknown preset 't-two'"):
        presets.get("t-two")


def test_two_chapters_cannot_declare_one_preset_key(plugin_job: JobType) -> None:
    jobs.register(dataclasses.replace(plugin_job, name="t_plugin_twin", probes=(), cleanups=(), reports=()))
    try:
        with pytest.raises(ValueError, match="preset 't-one' declared in chapters t_report and t_report"):
            presets.every()
    finally:
        del jobs.REGISTRY["t_plugin_twin"]


def test_every_declared_estimate_answers_without_past_trials_and_says_so() -> None:
    for job in jobs.REGISTRY.values():
        if job.estimate is None:
            continue
        seconds, basis = resolve(job.estimate.ref)([{}], 2, [])
        assert seconds > 0 and basis, job.name
        assert "default" in basis or "no such trial" in basis, (job.name, basis)


def test_the_generic_estimates_read_past_runs() -> None:
    from qoelab.estimate import PastRun, for_duration, median_wall_time

    past = [PastRun({"duration": 10.0, "family": "a"}, {}, s) for s in (14.0, 16.0, 30.0)]
    total, basis = for_duration([{"duration": 20.0}], 3, past)
    assert total == 3 * (6.0 + 20.0) and basis == "6 s per trial besides its stream (from 3 such trials here)"
    total, basis = median_wall_time([{"family": "a"}, {"family": "b"}], 1, past, by="family", default_s=50.0)
    assert total == 16.0 + 50.0
    assert basis == "the median trial of each family (from 3 such trials here; 50 s without one)"
