"""The trial page's "Traffic by paper 002's rule" table: an rd_qoe trial's capture classified by the
paper's flow rule (provenance ``thinclient_classify``), measured values beside the paper's RDP ones."""

from __future__ import annotations

import html
import re
from typing import Any

import pytest
from pydantic import BaseModel, ConfigDict, Field

from dashboard import trialpage
from experiments.services import create_sweep
from qoelab import params
from qoelab.jobs import REGISTRY
from qoelab.jobtype import JobType, TrialResult
from qoelab.thinclient.classify import PAPER

pytestmark = pytest.mark.django_db


class RateParams(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_default=True)
    rate: params.Rate() = Field(description="bottleneck rate")


def _never_run(p: BaseModel, ctx: object) -> TrialResult:
    raise AssertionError("the trial page tests do not run trials")


CLASSIFY_JOB = JobType(
    name="t_classify",
    title="classification demo",
    description="a job type whose trials carry a flow classification in their provenance",
    params=RateParams,
    requires=frozenset({"netns"}),
    run=_never_run,
)

# What rd_qoe stored for a 40-key X2Go typing trial (rounded), the paper's values as classify gives them.
CLASSIFIED = {
    "pcap": "capture.pcap",
    "server_ip": "198.18.0.2",
    "server_port": 22,
    "capture_point": "client side of the emulated link",
    "alpha": 0.6,
    "beta": 0.3143,
    "p_I": 0.3571,
    "p_B": 0.6429,
    "c_B": 2.306,
    "t_II_s": 0.0322,
    "t_IB_s": 0.2522,
    "t_BI_s": 0.2612,
    "t_BB_s": None,
    "flows_interactive": 20,
    "flows_bulk": 36,
    "bytes_per_packet_interactive": 155.2,
    "bytes_per_packet_bulk": 143.6,
    "tau_s": 10**-2.2,
    "connections": 1,
    "segments": 103,
    "gap_histogram": [{"log10_gap": -3.5, "count": 4}],
    "paper": dict(PAPER),
}


@pytest.fixture
def classify_job(monkeypatch: pytest.MonkeyPatch) -> JobType:
    monkeypatch.setitem(REGISTRY, CLASSIFY_JOB.name, CLASSIFY_JOB)
    return CLASSIFY_JOB


def _trial(user: Any, provenance: dict[str, Any]) -> Any:
    body = {"experiment": {"name": "classify"}, "job_type": CLASSIFY_JOB.name, "grid": {"rate": ["10mbit"]}}
    trial = create_sweep(body, user).trials.get()
    type(trial).objects.filter(pk=trial.pk).update(provenance=provenance)
    return trial


def _table(page: str) -> dict[str, tuple[str, str]]:
    """Each row's (this trial, paper) as shown, by the quantity's raw name."""
    table = page.split('aria-label="Traffic by paper 002\'s rule"', 1)[1].split("</table>", 1)[0]
    rows = re.findall(
        r'<tr data-classify="([^"]+)"><td>[^<]*</td>'
        r'<td class="num"><span class="qty" title="[^"]*">([^<]*)</span></td>'
        r'<td class="num"><span class="qty" title="[^"]*">([^<]*)</span></td>',
        table,
    )
    return {k: (html.unescape(m), html.unescape(p)) for k, m, p in rows}


def test_the_table_shows_each_measured_value_beside_the_papers(client_for, alice, classify_job) -> None:
    trial = _trial(alice, {"protocol": "x2go", "thinclient_classify": CLASSIFIED})
    page = client_for(alice).get(f"/trials/{trial.pk}/").content.decode()
    assert (
        "<h2>Traffic by paper 002&#x27;s rule</h2>" in page or "<h2>Traffic by paper 002's rule</h2>" in page
    )
    rows = _table(page)
    assert list(rows) == [key for key, _label, _unit in trialpage.CLASSIFY_ROWS]
    assert rows["alpha"] == ("0.6", "0.09")
    assert rows["beta"] == ("0.3143", "0.42")
    assert rows["p_I"] == ("0.3571", "0.82")
    assert rows["c_B"] == ("2.306", "7.4")
    assert rows["t_II_s"] == ("32.2 ms", "270 ms")
    assert rows["t_BB_s"][0] == "–"  # nothing measured: a dash, not 0
    assert rows["bytes_per_packet_interactive"] == ("155.2 B", "137.2 B")
    assert rows["bytes_per_packet_bulk"] == ("143.6 B", "936.2 B")
    tau = page.split('data-field="thinclient-tau">', 1)[1].split("</p>", 1)[0]
    assert 'τ = <span class="qty"' in tau and "6.31 ms</span>" in tau and "the paper's threshold" in tau
    assert "20 interactive and 36 bulk flows from 103 segments of 198.18.0.2:22 on 1 connection," in tau
    # No inline style or script came with it (the page's CSP forbids them).
    section = page.split("Traffic by paper 002", 1)[1].split("<h2>Provenance</h2>", 1)[0]
    assert "style=" not in section and "<script" not in section


def test_a_different_tau_is_named_beside_the_papers(client_for, alice, classify_job) -> None:
    trial = _trial(alice, {"thinclient_classify": {**CLASSIFIED, "tau_s": 0.02}})
    page = client_for(alice).get(f"/trials/{trial.pk}/").content.decode()
    tau = page.split('data-field="thinclient-tau">', 1)[1].split("</p>", 1)[0]
    assert "20 ms</span>" in tau and "(the paper's τ: <span" in tau and "6.31 ms" in tau


def test_a_missing_capture_is_said_instead_of_the_table(client_for, alice, classify_job) -> None:
    missing = {"pcap": "capture.pcap", "error": "no capture: the trial has no capture.pcap"}
    trial = _trial(alice, {"thinclient_classify": missing})
    page = client_for(alice).get(f"/trials/{trial.pk}/").content.decode()
    assert "No classification of this trial's capture: no capture: the trial has no capture.pcap." in page
    assert 'aria-label="Traffic by paper 002\'s rule"' not in page


def test_a_trial_without_a_classification_has_no_such_section(client_for, alice, classify_job) -> None:
    trial = _trial(alice, {"protocol": "vnc"})
    page = client_for(alice).get(f"/trials/{trial.pk}/").content.decode()
    assert "paper 002" not in page
    assert trialpage.thinclient_table(None) is None and trialpage.thinclient_table({"x": 1}) is None
