"""An evaluator rates a recorded campaign in Debian's Chromium: open the link, consent, train,
rate recorded conditions (videos without skip controls), reload mid-campaign and resume, finish.

Runs against pytest-django's live server with real PostgreSQL rows and real WebM recordings made
by ffmpeg and stored as trial artifacts of kind ``video`` (no Celery worker is needed here).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

import pytest

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

# A recorded campaign asks only what a viewer can judge (ratings.choices.RECORDED_ASPECTS).
ASPECTS = ["Screen response time", "Image clarity"]
SCALE = {
    5: "Imperceptible",
    4: "Perceptible but not annoying",
    3: "Slightly annoying",
    2: "Annoying",
    1: "Very annoying",
}


@pytest.fixture
def recorded_campaign(alice: Any, recorded_sweep: Any) -> tuple[Any, str]:
    from ratings import campaigns, invitations

    campaign = campaigns.open_campaign(
        campaigns.create_campaign(alice, name="e2e rating", sweep=recorded_sweep, seed=3)
    )
    ((_, token),) = invitations.invite(campaign, labels=["E1"])
    return campaign, token


def _watch(page: Any, stage: str) -> None:
    name = "Play the reference" if stage == "reference" else "Play the case to rate"
    page.get_by_role("button", name=name, exact=True).click()
    page.locator(f"[data-seen='{stage}']").filter(has_text="Watched").wait_for(timeout=15_000)


def _answer(page: Any, score: int) -> None:
    for aspect in ASPECTS:
        page.get_by_role("radiogroup", name=aspect).get_by_role(
            "radio", name=f"{score} {SCALE[score]}"
        ).check()
    page.get_by_role("button", name="Save my answers and continue").click()


def test_an_evaluator_consents_trains_rates_resumes_after_reload_and_finishes(
    live_server: Any, chromium_page: Any, recorded_campaign: tuple[Any, str], save_screenshot: Any
) -> None:
    from ratings.delivery import stage_deliveries
    from ratings.models import Evaluator, Rating

    campaign, token = recorded_campaign
    page = chromium_page
    page.goto(f"{live_server.url}/rate/{token}/")
    page.get_by_role("heading", name="Welcome, and thank you for helping").wait_for()
    page.get_by_label("I have read this and agree to take part").check()
    page.get_by_role("button", name="Start").click()

    # Training: the best, then the worst anchor.
    page.get_by_role("heading", name="Practice 1 of 2: the best case").wait_for()
    first_radio = page.get_by_role("radiogroup", name=ASPECTS[0]).get_by_role("radio", name="5 Imperceptible")
    assert first_radio.is_disabled(), "the form must stay closed before the videos were watched"
    assert page.get_by_role("button", name="Play the case to rate").is_disabled()
    assert page.locator("video#video-reference").evaluate("v => v.controls") is False
    _watch(page, "reference")
    _watch(page, "degraded")
    first_radio.wait_for(state="attached")
    page.wait_for_function("() => !document.getElementById('rating-fields').disabled")
    _answer(page, 5)
    page.get_by_role("heading", name="Practice 2 of 2: the worst case").wait_for()
    _watch(page, "reference")
    _watch(page, "degraded")
    page.wait_for_function("() => !document.getElementById('rating-fields').disabled")
    _answer(page, 1)

    # First real case, answered with the keyboard for one aspect.
    page.get_by_role("heading", name="Case 1 of 6").wait_for()
    _watch(page, "reference")
    _watch(page, "degraded")
    page.wait_for_function("() => !document.getElementById('rating-fields').disabled")
    group = page.get_by_role("radiogroup", name=ASPECTS[0])
    group.get_by_role("radio", name="5 Imperceptible").focus()
    page.keyboard.press("ArrowRight")  # moves to and selects the next grade: 4
    assert group.get_by_role("radio", name="4 Perceptible but not annoying").is_checked()
    for aspect in ASPECTS[1:]:
        page.get_by_role("radiogroup", name=aspect).get_by_role("radio", name="3 Slightly annoying").check()
    page.get_by_role("button", name="Save my answers and continue").click()

    # Second case: watch the reference only, then reload: the page resumes at the same step.
    page.get_by_role("heading", name="Case 2 of 6").wait_for()
    _watch(page, "reference")
    page.reload()
    page.get_by_role("heading", name="Case 2 of 6").wait_for()
    assert page.locator("[data-seen='reference']").inner_text() == "Watched ✓"
    assert page.get_by_role("button", name="Play the case to rate").is_enabled()
    assert page.evaluate("() => document.getElementById('rating-fields').disabled") is True
    ev = Evaluator.objects.get(campaign=campaign, label="E1")
    assert ev.position == 3
    _watch(page, "degraded")
    page.wait_for_function("() => !document.getElementById('rating-fields').disabled")
    _answer(page, 3)

    # The rest of the cases on a tablet held upright, just wide enough for the 800 px videos.
    page.set_viewport_size({"width": 820, "height": 1180})
    for n in range(3, 7):
        page.get_by_role("heading", name=f"Case {n} of 6").wait_for()
        if n == 3:
            box = page.locator(".choice").first.bounding_box()
            assert box["height"] >= 48 and box["width"] > 600, box  # one large target per row
            assert page.evaluate("() => document.documentElement.scrollWidth") <= 820
            save_screenshot(page, "rating/condition_tablet")
        _watch(page, "reference")
        _watch(page, "degraded")
        page.wait_for_function("() => !document.getElementById('rating-fields').disabled")
        _answer(page, 4)

    page.get_by_role("heading", name="Thank you!").wait_for()
    save_screenshot(page, "rating/finished")
    ev.refresh_from_db()
    assert ev.finished_at is not None
    ratings = Rating.objects.filter(evaluator=ev)
    assert ratings.filter(phase="training").count() == 2 * len(ASPECTS)
    assert ratings.filter(phase="main").count() == 6 * len(ASPECTS)
    assert set(ratings.filter(phase="training").values_list("score", flat=True)) == {5, 1}
    assert ratings.filter(phase="main", aspect="screen_response", score=4).exists()
    # Seen means seen: Chromium's playback fetched every byte of both videos of each rated condition.
    for cid in ev.order:
        cond = campaign.conditions.get(pk=cid)
        assert all(d.complete for d in stage_deliveries(ev, cond).values()), cond.label
    assert not [p for p in page.qoelab_problems if not re.search(r"favicon", p)], page.qoelab_problems


def test_reporting_the_videos_ended_without_playing_them_keeps_the_form_closed(
    live_server: Any, chromium_page: Any, recorded_campaign: tuple[Any, str]
) -> None:
    from ratings.models import Rating

    campaign, token = recorded_campaign
    page = chromium_page
    page.goto(f"{live_server.url}/rate/{token}/")
    page.get_by_label("I have read this and agree to take part").check()
    page.get_by_role("button", name="Start").click()
    page.get_by_role("heading", name="Practice 1 of 2: the best case").wait_for()
    # What a console user can do: report both videos ended without pressing Play.
    page.wait_for_function("() => !!window.qoelabRate")  # the page script has run
    page.evaluate("() => window.qoelabRate.reportScreen('reference', 0)")
    page.evaluate("() => window.qoelabRate.reportScreen('degraded', 0)")
    page.locator("#form-lock").filter(has_text="never reached this page").wait_for(timeout=10_000)
    assert page.evaluate("() => document.getElementById('rating-fields').disabled") is True
    # Forcing the form open in the page does not help: the server refuses and says why.
    page.evaluate("() => { document.getElementById('rating-fields').disabled = false; }")
    _answer(page, 5)
    page.get_by_role("alert").filter(has_text="The reference video never reached this page").wait_for()
    assert not Rating.objects.filter(evaluator__campaign=campaign).exists()
    # Playing them for real opens the form.
    _watch(page, "reference")
    _watch(page, "degraded")
    page.wait_for_function("() => !document.getElementById('rating-fields').disabled")


def test_the_researcher_sees_dmos_and_the_charts_after_a_rating(
    live_server: Any, chromium_page: Any, recorded_campaign: tuple[Any, str], alice: Any, log_in: Any
) -> None:
    from django.test import Client

    from ratings import flow
    from ratings.models import Evaluator

    campaign, token = recorded_campaign
    ev = flow.give_consent(Evaluator.objects.get(campaign=campaign))
    gold = campaign.conditions.get(kind="gold").pk
    for cid in ev.order:
        ev.refresh_from_db()
        for stage in ("reference", "degraded"):
            b"".join(Client().get(f"/rate/{token}/media/{cid}/{stage}/").streaming_content)  # delivered
            flow.record_screen(ev, cid, stage, 0)
        # 5 on the reference-vs-reference trap, or screening would exclude this evaluator.
        flow.submit_ratings(ev, cid, {k: 5 if cid == gold else 3 for k in campaign.aspect_keys})
    page = chromium_page
    log_in(page, live_server.url, alice, next=f"/campaigns/{campaign.pk}/results/")
    page.get_by_role("heading", name="Results: e2e rating").wait_for()
    table = page.get_by_role("table", name=re.compile("After exclusion"))
    assert "3.00 (n=1)" in table.first.inner_text()
    chart = "window.Chart?.getChart(document.querySelector('figure[data-chart-key=\"fig43\"] canvas'))"
    page.wait_for_function(f"() => !!{chart}", timeout=15_000)  # drawn after the page's data fetch
    points = page.evaluate(
        """() => {
          const c = window.Chart.getChart(document.querySelector('figure[data-chart-key="fig43"] canvas'));
          return c.data.datasets.map((d) => ({label: d.label, n: d.data.length}));
        }"""
    )
    assert points == [{"label": "delay 10ms", "n": 1}, {"label": "delay 100ms", "n": 1}]
    # On the DCR scale whatever the data, a legend even for one series, one x tick per condition,
    # and a caption that says these are single answers (n = 1), not means with intervals.
    axes = page.evaluate(
        """() => {
          const c = window.Chart.getChart(document.querySelector('figure[data-chart-key="fig43"] canvas'));
          const xs = new Set(c.data.datasets.flatMap((d) => d.data.map((p) => p.x)));
          return {min: c.scales.y.min, max: c.scales.y.max, legend: c.options.plugins.legend.display,
                  ticks: c.scales.x.ticks.length, xs: xs.size};
        }"""
    )
    assert (axes["min"], axes["max"], axes["legend"]) == (1, 5, True)
    assert axes["ticks"] == axes["xs"]
    stat = page.locator('figure[data-chart-key="fig43"] [data-role="chart-stat"]')
    assert stat.inner_text() == "single run per point, no CI"

    # Figures for a paper: PNG and SVG with the caption under the plot and the spec inside.
    fig43 = page.locator('figure[data-chart-key="fig43"]')
    with page.expect_download() as dl:
        fig43.get_by_role("button", name="Download SVG").click()
    svg = Path(dl.value.path()).read_text()
    dl.value.save_as(Path(__file__).resolve().parents[3] / "test-results" / "rating" / "fig43.svg")
    assert dl.value.suggested_filename.endswith(".svg")
    root = ElementTree.fromstring(svg)
    ns = {"s": "http://www.w3.org/2000/svg"}
    assert "single run per point, no CI" in root.find("s:desc", ns).text
    spec = json.loads(root.find("s:metadata", ns).text)
    assert (spec["figure"], spec["aspect"], spec["evaluators"]) == ("fig43", "screen_response", "screened")
    assert len(root.findall(".//s:circle", ns)) == 2  # one per condition, as drawn
    with page.expect_download() as dl:
        fig43.get_by_role("button", name="Download PNG").click()
    png = Path(dl.value.path()).read_bytes()
    dl.value.save_as(Path(__file__).resolve().parents[3] / "test-results" / "rating" / "fig43.png")
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    at = png.index(b"tEXt")  # the chunk's length is the 4 bytes before its type
    keyword, text = png[at + 4 : at + 4 + int.from_bytes(png[at - 4 : at], "big")].split(b"\0", 1)
    assert keyword == b"qoelab-spec" and json.loads(text)["caption"].startswith("Fig. 4.3")
    assert not page.qoelab_problems, page.qoelab_problems


def test_an_acr_hr_evaluator_watches_each_case_alone_and_the_page_reports_what_it_played(
    live_server: Any, chromium_page: Any, alice: Any, recorded_sweep: Any, save_screenshot: Any
) -> None:
    """ITU-T P.910's ACR with hidden reference in Chromium: one video per case, the quality scale,
    the hidden reference among the cases; every play's seconds reach the server (issue 36)."""
    from ratings import campaigns, invitations
    from ratings.delivery import video_duration
    from ratings.models import Evaluator, Playback, Rating

    campaign = campaigns.open_campaign(
        campaigns.create_campaign(alice, name="e2e acr-hr", sweep=recorded_sweep, seed=3, method="acr-hr")
    )
    ((_, token),) = invitations.invite(campaign, labels=["H1"])
    page = chromium_page
    page.goto(f"{live_server.url}/rate/{token}/")
    page.get_by_text("how good its quality was").wait_for()
    page.get_by_label("I have read this and agree to take part").check()
    page.get_by_role("button", name="Start").click()
    total = campaign.conditions.count()
    for n in range(total):
        page.locator("h1").filter(has_text=re.compile(r"(Practice|Case) \d+ of \d+")).wait_for()
        assert page.get_by_role("button", name=re.compile("reference")).count() == 0
        page.get_by_role("button", name="Play the case", exact=True).click()
        page.locator("[data-seen='degraded']").filter(has_text="Watched").wait_for(timeout=15_000)
        page.wait_for_function("() => !document.getElementById('rating-fields').disabled")
        if n == 2:
            save_screenshot(page, "rating/acr_case")
        for aspect in ASPECTS:
            page.get_by_role("radiogroup", name=aspect).get_by_role("radio", name="4 Good").check()
        page.get_by_role("button", name="Save my answers and continue").click()
    page.get_by_role("heading", name="Thank you!").wait_for()
    ev = Evaluator.objects.get(campaign=campaign, label="H1")
    assert Rating.objects.filter(evaluator=ev).count() == total * len(ASPECTS)
    # The hidden reference was rated like any case, and each play reported about its video's length.
    hidden = campaign.conditions.get(kind="hidden_ref")
    assert Rating.objects.filter(evaluator=ev, condition=hidden).count() == len(ASPECTS)
    plays = Playback.objects.filter(evaluator=ev)
    assert plays.count() == total and {p.stage for p in plays} == {"degraded"}
    for play in plays:
        length = video_duration(play.condition.recording)
        assert length is not None and abs(play.seconds - length) < 0.5, (play.seconds, length)
    assert not [p for p in page.qoelab_problems if not re.search(r"favicon", p)], page.qoelab_problems
