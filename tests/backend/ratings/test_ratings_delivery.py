"""Seen means seen (issue 14, finding 5b): a recorded stimulus must have reached the page, by the server's
own record of the bytes it served, before a rating is stored; screening shows sessions that look unwatched.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest
from django.db import connection
from rest_framework.test import APIClient

pytestmark = pytest.mark.django_db

POINTS = [{"protocol": p, "rate": "1mbit", "delay": "10ms", "pages": 20} for p in ("vnc", "x2go")]


@pytest.fixture
def campaign(alice: Any, videos: dict[str, Path]) -> Any:
    from ratings import campaigns
    from ratings.demo import add_video_artifact, demo_sweep

    sweep = demo_sweep(alice, POINTS)
    for trial in sweep.trials.all():
        add_video_artifact(trial, videos["reference"], reference=True)
        add_video_artifact(trial, videos["degraded"])
    return campaigns.open_campaign(campaigns.create_campaign(alice, name="seen", sweep=sweep, seed=3))


def start(campaign: Any) -> tuple[Any, str, APIClient, int]:
    from ratings import invitations

    ((ev, raw),) = invitations.invite(campaign, count=1)
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Evaluator {raw}")
    assert api.post("/api/rate/consent/").status_code == 200
    return ev, raw, api, api.get("/api/rate/state/").json()["condition"]["id"]


def report_both_ended(api: APIClient, cond: int) -> dict[str, Any]:
    for stage in ("reference", "degraded"):
        r = api.post("/api/rate/screens/", {"condition": cond, "stage": stage, "index": 0}, format="json")
        assert r.status_code == 200
    return r.json()


def fetch(client: Any, url: str, **headers: str) -> tuple[int, bytes, Any]:
    r = client.get(url, headers=headers)
    body = b"".join(r.streaming_content) if r.streaming else r.content
    return r.status_code, body, r


def rate(api: APIClient, campaign: Any, cond: int) -> Any:
    return api.post(
        "/api/rate/ratings/",
        {"condition": cond, "scores": dict.fromkeys(campaign.aspect_keys, 4)},
        format="json",
    )


def test_it_refuses_a_rating_whose_videos_were_never_fetched_although_the_page_reported_them_ended(
    campaign: Any,
) -> None:
    from ratings.models import Rating

    ev, raw, api, cond = start(campaign)
    state = report_both_ended(api, cond)
    assert state["reference_done"] and state["degraded_done"] and not state["enabled"]
    assert "never reached this page" in state["delivery_problem"]
    r = rate(api, campaign, cond)
    assert r.status_code == 409
    assert r.json()["detail"].startswith("The reference video never reached this page")
    assert "video of the case never reached this page" in r.json()["detail"]
    assert not Rating.objects.filter(evaluator=ev).exists()
    # The form page says the same sentence where the lock text is.
    page = APIClient().get(f"/rate/{raw}/").content.decode()
    assert "The reference video never reached this page" in page and 'id="rating-fields" disabled' in page


def test_it_serves_byte_ranges_and_needs_the_ranges_to_cover_each_whole_file(
    campaign: Any, videos: dict[str, Path]
) -> None:
    from ratings.models import MediaDelivery

    ev, raw, api, cond = start(campaign)
    ref, deg = (f"/rate/{raw}/media/{cond}/{s}/" for s in ("reference", "degraded"))
    whole = videos["reference"].read_bytes()
    size, half = len(whole), len(whole) // 2
    code, body, r = fetch(api, ref, Range=f"bytes=0-{half - 1}")
    assert (code, body, r["Content-Range"], r["Accept-Ranges"]) == (
        206,
        whole[:half],
        f"bytes 0-{half - 1}/{size}",
        "bytes",
    )
    assert fetch(api, deg)[0] == 200
    report_both_ended(api, cond)
    r = rate(api, campaign, cond)
    pct = int(100 * half / size)  # 49 or 50: the encoder's output size varies by a few bytes
    assert r.status_code == 409
    assert r.json()["detail"].startswith(f"Only {pct} % of the reference video reached"), r.json()
    # The rest, as a browser resuming the download asks for it (an open-ended range).
    code, body, _ = fetch(api, ref, Range=f"bytes={half}-")
    assert (code, body) == (206, whole[half:])
    assert fetch(api, ref, Range=f"bytes={size}-")[0] == 416
    rows = MediaDelivery.objects.filter(evaluator=ev, condition_id=cond, stage="reference").order_by("id")
    assert [(d.sent_from, d.sent_to) for d in rows] == [(0, half), (half, size)]  # the 416 served nothing
    assert all(d.finished_at for d in rows)
    assert rate(api, campaign, cond).status_code == 201


def test_a_download_cut_off_by_the_client_counts_only_the_bytes_written(campaign: Any) -> None:
    from ratings.models import MediaDelivery

    ev, raw, api, cond = start(campaign)
    r = api.get(f"/rate/{raw}/media/{cond}/reference/")
    stream = r._iterator  # the body as the web server iterates it
    first = next(stream)
    stream.close()  # the browser went away after the first block: the server closes the response
    row = MediaDelivery.objects.get(evaluator=ev, condition_id=cond, stage="reference")
    assert row.sent_from == 0 and row.sent_to <= len(first) < row.file_size and row.finished_at
    fetch(api, f"/rate/{raw}/media/{cond}/degraded/")
    report_both_ended(api, cond)
    assert "% of the reference video reached" in rate(api, campaign, cond).json()["detail"]


def test_screening_flags_ratings_faster_than_the_videos_and_ratings_without_delivery(
    campaign: Any, client: Any
) -> None:
    from ratings import analysis, flow, invitations
    from ratings.models import Rating

    ev, raw, api, cond = start(campaign)
    for stage in ("reference", "degraded"):
        fetch(api, f"/rate/{raw}/media/{cond}/{stage}/")
    report_both_ended(api, cond)
    assert rate(api, campaign, cond).status_code == 201  # rated at once: the two videos last 4 s
    # A rating stored without any delivery (e.g. before the server checked it).
    other, _ = invitations.invite(campaign, count=1)[0]
    other = flow.give_consent(other)
    Rating.objects.create(evaluator=other, condition_id=other.order[0], aspect="screen", score=5)
    result = analysis.analyze(campaign)
    flagged = {s["label"]: " ".join(s["reasons"]) for s in result["suspicious"]}
    assert "the videos last 4.0 s" in flagged[ev.label] and "rated 0." in flagged[ev.label]
    assert "the reference video never reached the page" in flagged[other.label]
    client.force_login(campaign.owner)
    page = client.get(f"/campaigns/{campaign.pk}/results/").content.decode()
    assert "Suspicious sessions" in page and f'data-suspicious="{other.label}"' in page
    page = client.get(f"/campaigns/{campaign.pk}/").content.decode()  # the campaign page says so too
    assert f'data-suspicious="{ev.label}"' in page and f'data-suspicious="{other.label}"' in page


@pytest.mark.django_db(transaction=True)
def test_concurrent_evaluators_submitting_three_times_at_once_store_each_rating_once(campaign: Any) -> None:
    from ratings.models import Rating

    people = [start(campaign) for _ in range(8)]
    for _, raw, api, cond in people:
        for stage in ("reference", "degraded"):
            fetch(api, f"/rate/{raw}/media/{cond}/{stage}/")
        report_both_ended(api, cond)
    codes: list[int] = []
    barrier = threading.Barrier(len(people) * 3)

    def submit(raw: str, cond: int) -> None:
        api = APIClient()
        api.credentials(HTTP_AUTHORIZATION=f"Evaluator {raw}")
        try:
            barrier.wait()
            codes.append(rate(api, campaign, cond).status_code)
        finally:
            connection.close()

    threads = [
        threading.Thread(target=submit, args=(raw, cond)) for _, raw, _, cond in people for _ in range(3)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(codes) == [200] * 16 + [201] * 8
    n_aspects = len(campaign.aspect_keys)
    for ev, _, _, cond in people:
        assert Rating.objects.filter(evaluator=ev, condition_id=cond).count() == n_aspects


def test_the_playback_rule_excludes_an_evaluator_who_replayed_past_115_percent_of_the_clips(
    alice: Any, videos: dict[str, Path], client: Any
) -> None:
    from ratings import analysis, campaigns
    from ratings.demo import add_video_artifact, demo_sweep
    from ratings.models import Playback

    sweep = demo_sweep(alice, POINTS)
    for trial in sweep.trials.all():
        add_video_artifact(trial, videos["reference"], reference=True)
        add_video_artifact(trial, videos["degraded"])
    campaign = campaigns.open_campaign(
        campaigns.create_campaign(
            alice, name="played", sweep=sweep, seed=3, screening={"playback": {"on": True}}
        )
    )
    replays = {}
    for label, reference_plays in (("once", 1), ("thrice", 3)):
        ev, raw, api, cond = start(campaign)
        replays[label] = ev.label
        # A played_s the page could not have measured is refused, naming the field and its bound.
        r = api.post(
            "/api/rate/screens/",
            {"condition": cond, "stage": "reference", "index": 0, "played_s": -1},
            format="json",
        )
        assert r.status_code == 400 and "played_s" in r.json()["errors"][0]["field"]
        while cond is not None:
            for stage, plays in (("reference", reference_plays), ("degraded", 1)):
                fetch(api, f"/rate/{raw}/media/{cond}/{stage}/")
                for _ in range(plays):  # each play to the end reports its seconds; replays add rows
                    body = {"condition": cond, "stage": stage, "index": 0, "played_s": 2.0}
                    assert api.post("/api/rate/screens/", body, format="json").status_code == 200
            assert rate(api, campaign, cond).status_code == 201
            cond = (api.get("/api/rate/state/").json()["condition"] or {}).get("id")
    assert (
        Playback.objects.filter(evaluator__label=replays["thrice"]).count() == 4 * campaign.conditions.count()
    )
    result = analysis.analyze(campaign)
    reasons = {e["label"]: e["reasons"] for e in result["evaluators"]}
    assert reasons[replays["once"]] == []
    # Each case: 3 × 2 s of reference and 2 s of case against 4 s of video: 200 %.
    assert reasons[replays["thrice"]] == ["played 200% of the clips' length (> 115%)"]
    assert "playback" in [r["key"] for r in result["rule"]["active"]]
    # Off (the default), the same plays exclude nobody.
    campaign.screening = {}
    campaign.save(update_fields=["screening"])
    assert all(not e["reasons"] for e in analysis.analyze(campaign)["evaluators"])
