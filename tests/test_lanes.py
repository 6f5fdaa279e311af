"""The two lanes of ``make test`` (tests/fixtures/lanes.py), in real inner pytest-xdist runs: the guest
files share one lane, each file stays in one lane, every test's lane is in junit.xml, a guest test
outside the guest files is refused, and a failed guest image build fails the lanes' tests with its
log instead of an internal error."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections import defaultdict
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent

# A guest test holds its lane a moment, so with the guest files split over both lanes the idle
# lane would take the second one.
BODY = """
import time, pytest
{mark}
@pytest.mark.parametrize("n", range(3))
def test_x(n):
    time.sleep({pause})
"""


@pytest.fixture
def inner(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    monkeypatch.setenv("PYTHONPATH", str(TESTS))
    # Not the real build's directory: an inner lane would write its wait over the outer run's.
    monkeypatch.delenv("QOELAB_VM_IMAGE_BUILD", raising=False)
    pytester.makeini("[pytest]\nmarkers =\n    guest: boots a guest\n")
    (pytester.path / "tests").mkdir()
    pytester.makeconftest("pytest_plugins = ['fixtures.lanes', 'fixtures.vm_image_build']")
    return pytester


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest_subprocess(
        "-p", "no:django", "-p", "no:cacheprovider", "-n", "2", "--dist", "loadfile",
        "--no-loadscope-reorder", "--junitxml=junit.xml", "tests", *args,
    )  # fmt: skip


def write(pytester: pytest.Pytester, path: str, body: str) -> None:
    file = pytester.path / path
    file.parent.mkdir(parents=True, exist_ok=True)
    file.write_text(body)


def lanes_by_file(junit: Path) -> dict[str, set[str]]:
    lanes: dict[str, set[str]] = defaultdict(set)
    for tc in ET.parse(junit).getroot().iter("testcase"):
        lane = [p.get("value") for p in tc.iter("property") if p.get("name") == "lane"]
        lanes[tc.get("classname", "")].update(lane)
    return lanes


def test_guest_files_share_one_lane_and_every_file_stays_in_one(inner: pytest.Pytester) -> None:
    write(inner, "tests/workers/vm/test_vm_guest.py", BODY.format(mark="", pause=0.3))
    write(inner, "tests/integration/test_vm_sweep.py", BODY.format(mark="", pause=0.3))
    for name in "abc":
        write(inner, f"tests/workers/test_{name}.py", BODY.format(mark="", pause=0.05))
    result = run(inner)
    result.assert_outcomes(passed=15)
    lanes = lanes_by_file(inner.path / "junit.xml")
    guests = lanes["tests.workers.vm.test_vm_guest"], lanes["tests.integration.test_vm_sweep"]
    assert len(lanes) == 5 and all(len(lane) == 1 for lane in lanes.values()), lanes  # file, lane
    assert guests[0] == guests[1], lanes  # the guests one after another
    assert set().union(*lanes.values()) == {"gw0", "gw1"}, lanes  # and both lanes worked


def test_a_guest_test_outside_the_guest_files_is_refused(inner: pytest.Pytester) -> None:
    write(inner, "tests/workers/test_stray.py", BODY.format(mark="pytestmark = pytest.mark.guest", pause=0))
    result = run(inner)
    result.assert_outcomes(errors=3)
    assert any("test_stray.py boots a guest but is not in GUEST_FILES" in line for line in result.outlines)


def test_a_failed_build_fails_the_lanes_tests_with_its_log(
    inner: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    build = tmp_path / "vm-image"
    build.mkdir()
    (build / "log").write_text("vm-image: debootstrap\nE: Unable to fetch some archives\n")
    (build / "pid").write_text("1\n")
    (build / "rc").write_text("7\n")
    monkeypatch.setenv("QOELAB_VM_IMAGE_BUILD", str(build))
    for name in "ab":
        write(inner, f"tests/workers/test_{name}.py", BODY.format(mark="", pause=0))
    result = run(inner)
    result.assert_outcomes(errors=6)  # in setup, before the test body
    text = "\n".join(result.outlines)
    assert "INTERNALERROR" not in text, text
    assert "the guest image build failed (exit status 7)" in text and "Unable to fetch" in text, text
