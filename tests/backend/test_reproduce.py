"""The Reproduce page: every thesis experiment with its size and an estimate from this lab's own
trials, started with one click (a sweep, or a live rating campaign)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from dashboard import reproduce
from experiments.choices import TrialStatus
from experiments.models import Sweep
from experiments.services import create_sweep
from qoelab import presets
from qoelab.rd import estimate as rd_estimate
from qoelab.storage import estimate as storage_estimate
from results.models import SummaryValue

pytestmark = pytest.mark.django_db


@pytest.fixture
def browser(alice) -> Client:
    c = Client()
    c.force_login(alice)
    return c


def finished_rd_trial(alice, protocol: str, rate: str, duration_s: float, t_ms: float, n: int = 5) -> None:
    """A succeeded rd_qoe trial as a worker would leave it: times and the summary the estimate reads."""
    spec = {"experiment": {"name": "past"}, "job_type": "rd_qoe", "name": f"{protocol} {rate}",
            "grid": {"rate": [rate]}, "fixed": {"protocol": protocol, "delay": "10ms"}}  # fmt: skip
    sweep = create_sweep(spec, alice)
    trial = sweep.trials.get()
    start = timezone.now() - timedelta(hours=1)
    type(trial).objects.filter(pk=trial.pk).update(
        status=TrialStatus.SUCCEEDED, started_at=start, finished_at=start + timedelta(seconds=duration_s)
    )
    SummaryValue.objects.create(trial=trial, name="T_ms", value=t_ms)
    SummaryValue.objects.create(trial=trial, name="n", value=n)


def test_the_page_lists_every_chapter_4_experiment_with_trials_and_an_estimate(browser):
    page = browser.get("/reproduce/").content.decode()
    for p in presets.chapter("ch4").presets:
        assert f'data-preset="{p.key}"' in page and p.figure in page
    fig46 = page.split('data-preset="ch4-fig46"', 1)[1].split("</section>", 1)[0]
    quick = fig46.split('data-size="quick"', 1)[1].split("</tr>", 1)[0]
    assert 'data-field="units">27<' in quick  # 3 protocols x 3 rates x 3 repetitions
    assert "from defaults (no trial of their protocol measured here yet)" in quick
    assert "one slot (no worker is live now)" in quick
    full = fig46.split('data-size="full"', 1)[1].split("</tr>", 1)[0]
    assert 'data-field="units">330<' in full  # the thesis' 11 bandwidths, 10 runs
    table42 = page.split('data-preset="ch4-table42"', 1)[1].split("</section>", 1)[0]
    assert "per evaluator" in table42 and "Create campaign" in table42


def test_the_estimate_comes_from_this_labs_trials_at_the_same_or_nearest_condition(alice):
    # VNC at 1 Mbit/s: 40 s for 5 updates of T = 2 s with Q = P = 0.5 s -> overhead 40 - 5 x 3 = 25 s.
    finished_rd_trial(alice, "vnc", "1mbit", duration_s=40.0, t_ms=2000.0)
    finished_rd_trial(alice, "vnc", "100mbit", duration_s=30.0, t_ms=200.0)
    past = rd_estimate.past_trials(reproduce.past_runs("rd_qoe"))
    at_1 = {
        "protocol": "vnc",
        "rate": 1e6,
        "delay": 0.010,
        "loss": 0.0,
        "pages": 5,
        "quiet": 0.5,
        "pause": 0.5,
    }
    seconds, basis = rd_estimate.estimate_trial(at_1, past)
    overhead = sorted([40.0 - 5 * 3.0, 30.0 - 5 * 1.2])  # median of the two trials' overheads
    assert basis == "measured" and seconds == pytest.approx(sum(overhead) / 2 + 5 * 3.0)
    near_2 = {**at_1, "rate": 2e6, "pages": 10}
    seconds, basis = rd_estimate.estimate_trial(near_2, past)
    # The measured T at 1 Mbit/s, carried over by the model's ratio (about half at twice the rate).
    ratio = rd_estimate.model_t_s("vnc", 2e6, 0.01, 0) / rd_estimate.model_t_s("vnc", 1e6, 0.01, 0)
    assert 0.4 < ratio < 0.6
    assert basis == "nearest" and seconds == pytest.approx(sum(overhead) / 2 + 10 * (2.0 * ratio + 1.0))
    assert rd_estimate.estimate_trial({**at_1, "protocol": "x2go"}, past)[1] == "default"
    plan = reproduce.plan(presets.get("ch4-fig46"), "quick")
    # VNC at 1 and 100 Mbit/s measured, at 10 Mbit/s the nearest; SPICE and X2Go have no trial yet.
    assert plan["basis"].startswith("6 trials at a condition measured here; 3 trials from the nearest")


def test_one_click_starts_the_quick_sweep_and_its_page_checks_the_findings(browser):
    resp = browser.post("/reproduce/ch4-fig47/start/", {"size": "quick"})
    sweep = Sweep.objects.get()
    assert resp.status_code == 302 and resp["Location"] == f"/sweeps/{sweep.pk}/"
    assert sweep.trial_count == 54 and sweep.job_type == "rd_qoe"
    assert sweep.grid["delay"] == ["10ms", "50ms", "200ms"] and sweep.repetitions == 3
    assert {t.resolved["tcp_cc"] for t in sweep.trials.all()} == {"cubic"}
    page = browser.get(resp["Location"]).content.decode()
    assert "Thesis findings" in page and "inconclusive" in page


def test_one_click_creates_the_live_dcr_campaign_of_table_4_2(browser):
    from ratings.models import Campaign

    resp = browser.post("/reproduce/ch4-table42/start/", {"size": "full"})
    campaign = Campaign.objects.get()
    assert resp.status_code == 302 and resp["Location"] == f"/campaigns/{campaign.pk}/"
    assert campaign.mode == "live"
    normal = campaign.conditions.filter(kind="normal")
    assert normal.count() == 9
    assert {(c.params["protocol"], c.params["delay"]) for c in normal} == {
        (p, d) for p in ("vnc", "spice", "x2go") for d in ("10ms", "100ms", "200ms")
    }
    assert {c.params["rate"] for c in normal} == {"1mbit"}


def test_one_click_records_the_table_4_2_sessions_and_makes_the_recorded_campaign_from_them(browser):
    from ratings.models import Campaign

    resp = browser.post("/reproduce/ch4-table42/start/", {"size": "full", "mode": "recorded"})
    campaign = Campaign.objects.get()
    assert resp.status_code == 302 and resp["Location"] == f"/campaigns/{campaign.pk}/"
    assert campaign.mode == "recorded" and campaign.name.endswith("(full, recorded)")
    sweep = campaign.sweep
    assert sweep.job_type == "rd_qoe" and sweep.trials.count() == 9  # one session per condition
    assert {t.params["record"] for t in sweep.trials.all()} == {True}
    normal = campaign.conditions.filter(kind="normal")
    assert {(c.params["protocol"], c.params["delay"]) for c in normal} == {
        (p, d) for p in ("vnc", "spice", "x2go") for d in ("10ms", "100ms", "200ms")
    }
    # It opens only once every condition has its recordings (the sweep has not run yet).
    page = browser.get(resp["Location"]).content.decode()
    assert "recordings" in page
    assert browser.post("/reproduce/ch4-table42/start/", {"size": "full", "mode": "both"}).status_code == 400
    assert Campaign.objects.count() == 1 and Sweep.objects.count() == 1


def test_a_bad_size_or_preset_is_a_400_and_creates_nothing(browser):
    assert browser.post("/reproduce/ch4-fig46/start/", {"size": "huge"}).status_code == 400
    assert browser.post("/reproduce/ch9-fig1/start/", {"size": "quick"}).status_code == 400
    assert not Sweep.objects.exists()


def test_the_page_lists_the_chapter_2_experiments_with_an_estimate_from_defaults(browser):
    page = browser.get("/reproduce/").content.decode()
    assert "Chapter 2: storage APT" in page
    for p in presets.chapter("ch2").presets:
        assert f'data-preset="{p.key}"' in page and p.figure in page
    s1 = page.split('data-preset="ch2-s1"', 1)[1].split("</section>", 1)[0]
    quick = s1.split('data-size="quick"', 1)[1].split("</tr>", 1)[0]
    assert 'data-field="units">15<' in quick
    assert "6 s per trial and 8 APT steps (defaults: no storage-APT trial here yet)" in quick
    # 3 runs of: APT 6 + 8 x 5 + 30 s, and 4 x (6 + 5 + 30 s) for vanilla and N = 4/16/64 (warm-up 5 s).
    assert reproduce.plan(presets.get("ch2-s1"), "quick")["seconds"] == 3 * (76 + 4 * 41)


def test_one_click_starts_the_s1_sweep_with_apt_and_vanilla_once_per_run(browser):
    resp = browser.post("/reproduce/ch2-s1/start/", {"size": "quick"})
    sweep = Sweep.objects.get()
    assert resp.status_code == 302 and sweep.job_type == "storage_apt" and sweep.trial_count == 15
    assert {t.resolved["tcp_cc"] for t in sweep.trials.all()} == {"reno"}
    page = browser.get(resp["Location"]).content.decode()
    assert "BDL-APT" in page and 'data-finding="apt_converges"' in page


def test_the_page_lists_the_chapter_3_experiments_with_an_estimate_from_defaults(browser):
    page = browser.get("/reproduce/").content.decode()
    assert "Chapter 3: offload emulation" in page
    for p in presets.chapter("ch3").presets:
        assert f'data-preset="{p.key}"' in page and p.figure in page
    # Fig. 3.11 quick: 2 runs of software, hardware and vose at 5 speedups, each 5 s + its 10 s stream.
    plan = reproduce.plan(presets.get("ch3-fig311"), "quick")
    assert plan["units"] == 14 and plan["seconds"] == 14 * (5 + 10)
    assert "no such trial here yet" in plan["basis"]


def test_one_click_starts_the_fig312_sweep_of_five_devices(browser):
    resp = browser.post("/reproduce/ch3-fig312/start/", {"size": "quick"})
    sweep = Sweep.objects.get()
    assert resp.status_code == 302 and sweep.job_type == "vose" and sweep.trial_count == 25
    assert {t.resolved["device"] for t in sweep.trials.all()} == {
        "aes_only", "aes_cbc", "sha1_only", "sha1_aes", "sha1_aes_cbc"}  # fmt: skip


def test_the_page_lists_the_paper_002_experiments_with_an_estimate_from_defaults(browser):
    page = browser.get("/reproduce/").content.decode()
    assert "Paper 002: thin-client traffic" in page
    for p in presets.chapter("tc002").presets:
        assert f'data-preset="{p.key}"' in page and p.figure in page
    # E1/E2 quick: 2 buffers x 2 queues x SACK off/on x 2 seeds, each 5 s + its 30 s replay.
    plan = reproduce.plan(presets.get("tc002-e1e2"), "quick")
    assert plan["units"] == 16 and plan["seconds"] == 16 * (5 + 30)
    assert "no such trial here yet" in plan["basis"]
    assert reproduce.plan(presets.get("tc002-e8"), "full")["units"] == 2 * 6 * 7  # the paper's 7 runs


def test_one_click_starts_the_e7_sweep_and_its_page_checks_paper_002(browser):
    resp = browser.post("/reproduce/tc002-e7/start/", {"size": "quick"})
    sweep = Sweep.objects.get()
    assert resp.status_code == 302 and sweep.job_type == "thinclient_tcp" and sweep.trial_count == 4
    assert {(t.resolved["connections"], t.resolved["experiment"]) for t in sweep.trials.all()} == {
        ("separate", "e7")}  # fmt: skip
    page = browser.get(resp["Location"]).content.decode()
    assert 'data-finding="separate_propagation"' in page


def test_thesis_001_is_listed_and_its_realistic_sweep_starts_with_one_click(browser):
    page = browser.get("/reproduce/").content.decode()
    assert "Thesis 001: NFS, iSCSI and Swift" in page
    for p in presets.chapter("sb001").presets:
        assert f'data-preset="{p.key}"' in page
    plan = reproduce.plan(presets.get("sb001-realistic"), "quick")
    assert plan["units"] == 3 * 4 and plan["seconds"] == 12 * storage_estimate.DEFAULT_TRIAL_S
    assert "no such trial here yet" in plan["basis"]
    resp = browser.post("/reproduce/sb001-realistic/start/", {"size": "quick"})
    sweep = Sweep.objects.get()
    assert resp.status_code == 302 and sweep.job_type == "storage_bench" and sweep.trial_count == 12
    resolved = {(t.resolved["target"], t.resolved["rtt"], t.resolved["loss"], t.resolved["jitter"])
                for t in sweep.trials.all()}  # fmt: skip
    assert resolved == {(target, 0.05, 0.1, 0.01) for target in ("nfs", "iscsi", "swift")}


def test_the_page_shows_the_labs_verdicts_on_its_committed_results(browser):
    from qoelab.findings import REPORTS
    from qoelab.findings.committed import committed_report

    page = browser.get("/reproduce/").content.decode()
    section = page.split('id="committed-verdicts"', 1)[1]
    report = committed_report()
    for name, fam in report["families"].items():
        assert f'data-family="{name}"' in section, name
        block = section.split(f'data-family="{name}"', 1)[1].split("</section>", 1)[0]
        assert block.count("<tr data-check=") == len(fam["checks"]) >= len(REPORTS[name])
    # ch4 lists its files; the DCR family, with no rating campaign committed, says "not run".
    ch4 = section.split('data-family="ch4"', 1)[1].split("</section>", 1)[0]
    assert "<code>benchmarks/presets/results/ch4-fig48-quick.jsonl</code>" in ch4
    dcr = section.split('data-family="ch4-dcr"', 1)[1].split("</section>", 1)[0]
    assert 'data-verdict="not run"' in dcr


def test_a_run_longer_than_an_hour_starts_only_after_a_confirmation(browser):
    """Issue 33: full presets (up to 7.5 h) started on one click."""
    from experiments.models import Sweep

    resp = browser.post("/reproduce/ch4-fig46/start/", {"size": "full"})
    page = resp.content.decode()
    assert resp.status_code == 200 and 'id="long-run"' in page and "Start anyway" in page
    assert 'name="confirm" value="yes"' in page and not Sweep.objects.exists()
    resp = browser.post("/reproduce/ch4-fig46/start/", {"size": "full", "confirm": "yes"})
    assert resp.status_code == 302 and Sweep.objects.get().trials.count() == 330
