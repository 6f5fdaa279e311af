"""ACR and ACR-HR campaigns beside DCR (issue 36, item 4), on real PostgreSQL: what the evaluator is
shown and asked (ITU-T P.910's quality scale, the case alone, a hidden reference that looks like any
case), what the server accepts, and the quantity every result names (ACR MOS; ACR-HR DMOS = vote −
the same evaluator's vote on the hidden reference + 5).
"""

from __future__ import annotations

import csv
import hashlib
import io
import re
from pathlib import Path
from typing import Any

import pytest
from rest_framework.test import APIClient

pytestmark = pytest.mark.django_db

POINTS = [
    {"protocol": p, "rate": "1mbit", "delay": d, "pages": 20}
    for p in ("vnc", "spice")
    for d in ("10ms", "100ms")
]


@pytest.fixture
def make_campaign(alice: Any, videos: dict[str, Path]) -> Any:
    from ratings import campaigns
    from ratings.demo import add_video_artifact, demo_sweep

    def make(method: str, **kw: Any) -> Any:
        sweep = demo_sweep(alice, POINTS)
        for trial in sweep.trials.all():
            add_video_artifact(trial, videos["reference"], reference=True)
            add_video_artifact(trial, videos["degraded"])
        made = campaigns.create_campaign(alice, name=method, sweep=sweep, method=method, seed=5, **kw)
        return campaigns.open_campaign(made)

    return make


def evaluator(campaign: Any) -> tuple[str, APIClient]:
    from ratings import invitations

    ((_ev, raw),) = invitations.invite(campaign, count=1)
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Evaluator {raw}")
    assert api.post("/api/rate/consent/").status_code == 200
    return raw, api


def see_the_case(api: APIClient, raw: str, cond: int) -> tuple[dict[str, Any], bytes]:
    """Fetch the case's video in full (as the page's <video> does) and report it ended."""
    r = api.get(f"/rate/{raw}/media/{cond}/degraded/")
    assert r.status_code == 200
    body = b"".join(r.streaming_content)
    r = api.post("/api/rate/screens/", {"condition": cond, "stage": "degraded", "index": 0}, format="json")
    assert r.status_code == 200, r.json()
    return r.json(), body


def walk(campaign: Any, score_of: Any) -> dict[int, bytes]:
    """One evaluator through every case: ``score_of(condition)`` per case; returns each case's video."""
    from ratings.models import Condition

    raw, api = evaluator(campaign)
    shown = {}
    while (cond := api.get("/api/rate/state/").json()["condition"]) is not None:
        state, shown[cond["id"]] = see_the_case(api, raw, cond["id"])
        assert state["enabled"], state
        score = score_of(Condition.objects.get(pk=cond["id"]))
        r = api.post(
            "/api/rate/ratings/",
            {"condition": cond["id"], "scores": dict.fromkeys(campaign.aspect_keys, score)},
            format="json",
        )
        assert r.status_code == 201, r.json()
    return shown


def test_an_acr_case_is_the_video_alone_answered_on_the_quality_scale(
    make_campaign: Any, client: Any
) -> None:
    campaign = make_campaign("acr")
    kinds = set(campaign.conditions.values_list("kind", flat=True))
    assert "gold" in kinds and "hidden_ref" not in kinds
    raw, api = evaluator(campaign)
    state = api.get("/api/rate/state/").json()
    assert state["method"] == "acr"
    assert [s["label"] for s in state["scale"]] == ["Excellent", "Good", "Fair", "Poor", "Bad"]
    cond = state["condition"]["id"]
    form = state["condition"]["form"]
    assert form["stages"] == ["degraded"] and form["reference_done"] and not form["enabled"]
    # No reference stage: neither reported nor served.
    r = api.post("/api/rate/screens/", {"condition": cond, "stage": "reference", "index": 0}, format="json")
    assert r.status_code == 400 and r.json()["detail"] == "stage must be one of degraded"
    assert api.get(f"/rate/{raw}/media/{cond}/reference/").status_code == 404
    r = api.post(
        "/api/rate/ratings/",
        {"condition": cond, "scores": dict.fromkeys(campaign.aspect_keys, 4)},
        format="json",
    )
    assert r.status_code == 409 and "Please watch the video to the end first" in r.json()["detail"]
    # The page: the case alone and P.910's ACR question and grades, no reference step.
    page = client.get(f"/rate/{raw}/").content.decode()
    assert "How good was the quality of what you saw?" in page and "Play the case" in page
    assert "Play the reference" not in page and "Excellent" in page and "Imperceptible" not in page
    state, _ = see_the_case(api, raw, cond)
    assert state["enabled"]
    r = api.post(
        "/api/rate/ratings/",
        {"condition": cond, "scores": dict.fromkeys(campaign.aspect_keys, 4)},
        format="json",
    )
    assert r.status_code == 201


def test_the_consent_page_describes_the_method_the_evaluator_will_answer(
    make_campaign: Any, client: Any
) -> None:
    from ratings import invitations

    for method, wording, grade in (("acr", "how good its quality was", "Excellent"),
                                   ("dcr", "worse than the reference", "Imperceptible")):  # fmt: skip
        ((_ev, raw),) = invitations.invite(make_campaign(method), count=1)
        page = client.get(f"/rate/{raw}/").content.decode()
        assert wording in page and grade in page, method


def test_acr_hr_dmos_is_each_vote_minus_the_same_evaluators_hidden_reference_vote_plus_5(
    make_campaign: Any, client: Any, alice: Any
) -> None:
    from ratings import analysis
    from ratings.choices import ConditionKind

    campaign = make_campaign("acr-hr")
    conds = list(campaign.conditions.all())
    hidden = [c for c in conds if c.kind == ConditionKind.HIDDEN_REFERENCE]
    assert len(hidden) == 1 and not [c for c in conds if c.kind == ConditionKind.GOLD]
    assert hidden[0].recording_id == hidden[0].reference_id is not None
    normal = sorted((c for c in conds if c.kind == ConditionKind.NORMAL), key=lambda c: c.position)
    base = {c.pk: 2 + i % 3 for i, c in enumerate(normal)}  # 2, 3, 4, 2: distinct per condition
    # Three evaluators; each rates the hidden reference differently, so their DMOS differ by that.
    reference_votes = {0: 4, 1: 5, 2: 3}
    for who, ref_vote in reference_votes.items():
        shown = walk(
            campaign,
            lambda c, who=who, ref_vote=ref_vote: (
                ref_vote
                if c.kind == ConditionKind.HIDDEN_REFERENCE
                else min(5, base.get(c.pk, 4) + (who == 1))
            ),
        )
        # The hidden reference is served as a case ("degraded" stage), with the reference's bytes.
        ref_sha = hidden[0].reference.sha256
        assert hashlib.sha256(shown[hidden[0].pk]).hexdigest() == ref_sha
    result = analysis.analyze(campaign)
    assert result["quantity"] == "ACR-HR DMOS" and result["method_notes"] == []
    for row in result["all"]["dmos"]:
        votes = [min(5, base[row["condition"]] + (who == 1)) for who in reference_votes]
        expected = [v - reference_votes[who] + 5 for who, v in zip(reference_votes, votes, strict=True)]
        assert row["n"] == 3
        assert row["mean"] == pytest.approx(sum(expected) / 3)
    # The hidden reference is not a row of its own, and its vote is the gold trap: evaluator 2 rated
    # it 3, so the default trap rule (3 or lower) names it.
    assert {r["condition"] for r in result["all"]["dmos"]} == {c.pk for c in normal}
    excluded = {e["label"]: e["reasons"] for e in result["excluded"]}
    assert any("rated the hidden reference 3 or lower" in r for rs in excluded.values() for r in rs)
    # Charts: y widens past 5 when a mean does (a case rated above its reference is valid, P.910).
    assert result["y_range"]["y_max"] >= max(r["mean"] for r in result["all"]["dmos"])
    # Every output names the quantity: the results page, the summary CSV.
    client.force_login(alice)
    page = client.get(f"/campaigns/{campaign.pk}/results/").content.decode()
    assert "ACR-HR DMOS" in page and "ACR-HR (ACR with hidden reference: DMOS)" in page
    assert "DCR mean (the thesis' DMOS)" not in page
    body = b"".join(client.get(f"/campaigns/{campaign.pk}/export/dmos.csv").streaming_content).decode()
    assert {r["quantity"] for r in csv.DictReader(io.StringIO(body))} == {"ACR-HR DMOS"}


def test_the_hidden_reference_looks_like_any_case_to_the_evaluator(make_campaign: Any, client: Any) -> None:
    from ratings.choices import ConditionKind
    from ratings.models import Condition

    campaign = make_campaign("acr-hr")
    raw, api = evaluator(campaign)
    pages = {}
    while (cond := api.get("/api/rate/state/").json()["condition"]) is not None:
        kind = Condition.objects.get(pk=cond["id"]).kind
        page = client.get(f"/rate/{raw}/").content.decode()
        if kind in (ConditionKind.HIDDEN_REFERENCE, ConditionKind.NORMAL):
            pages[kind] = page
        see_the_case(api, raw, cond["id"])
        api.post(
            "/api/rate/ratings/",
            {"condition": cond["id"], "scores": dict.fromkeys(campaign.aspect_keys, 3)},
            format="json",
        )

    def same(page: str) -> str:  # the page without what differs between any two cases
        page = re.sub(r'name="csrfmiddlewaretoken" value="[^"]*"', "", page)
        return re.sub(r"\d+", "N", page)

    hidden, normal = pages[ConditionKind.HIDDEN_REFERENCE], pages[ConditionKind.NORMAL]
    assert "Hidden reference" not in hidden and "How good was the quality" in hidden
    # The same page as a normal case, word for word: only ids, counters and the CSRF token differ.
    assert same(hidden) == same(normal)


def test_the_method_is_checked_and_named_where_a_campaign_is_made(
    alice: Any, api_client_for: Any, client: Any
) -> None:
    from ratings import campaigns

    by_hand = [{"params": {"protocol": "vnc", "rate": "1mbit", "delay": "10ms"}}]
    with pytest.raises(campaigns.CampaignError) as err:
        campaigns.create_campaign(alice, name="x", conditions=by_hand, method="mos")
    assert err.value.errors == [{"field": "method", "message": "must be one of acr, acr-hr, dcr"}]
    with pytest.raises(campaigns.CampaignError) as err:
        campaigns.create_campaign(alice, name="x", conditions=by_hand, method="acr-hr", mode="live")
    assert err.value.errors[0]["field"] == "method" and "recorded campaign" in err.value.errors[0]["message"]
    api = api_client_for(alice)
    r = api.post("/api/campaigns/", {"name": "x", "conditions": by_hand, "method": "mos"}, format="json")
    assert r.status_code == 400 and r.json()["errors"][0]["field"] == "method"
    r = api.post("/api/campaigns/", {"name": "x", "conditions": by_hand, "method": "acr"}, format="json")
    assert r.status_code == 201 and r.json()["method"] == "acr"
    # The researcher's form: the method chosen, or refused by field.
    client.force_login(alice)
    form = {"name": "form acr-hr", "mode": "recorded", "method": "acr-hr", "conditions": "vnc 1mbit 10ms"}
    assert client.post("/campaigns/new/", form).status_code == 302
    made = campaigns.owned_campaigns(alice).get(name="form acr-hr")
    assert made.method == "acr-hr" and made.conditions.filter(kind="hidden_ref").count() == 1
    bad = client.post("/campaigns/new/", {**form, "name": "live", "mode": "live"})
    assert bad.status_code == 400 and b"acr-hr needs a recorded campaign" in bad.content
    # Live ACR: the session alone (no reference stage to go through first).
    live = campaigns.create_campaign(alice, name="live acr", conditions=by_hand, method="acr", mode="live")
    assert live.stages == ("degraded",)
    # A DCR campaign made before the method existed keeps its meaning.
    assert campaigns.create_campaign(alice, name="dcr", conditions=by_hand).stages == (
        "reference",
        "degraded",
    )


def test_an_acr_campaigns_results_say_acr_mos_and_do_not_compare_with_the_thesis_dcr_findings(
    make_campaign: Any, client: Any, alice: Any
) -> None:
    from ratings import analysis
    from ratings.choices import ConditionKind

    campaign = make_campaign("acr", add_repeat=False)
    for bump in (0, 1):
        walk(
            campaign, lambda c, bump=bump: 5 if c.kind != ConditionKind.NORMAL else 2 + bump + c.position % 2
        )
    result = analysis.analyze(campaign)
    assert result["quantity"] == "ACR MOS" and result["y_range"] == {"y_min": 1.0, "y_max": 5.0}
    assert result["findings"]["checks"] == [] and "Not compared" in result["findings"]["note"]
    assert result["subject_model"]["quantity"].startswith("ACR score by")
    client.force_login(alice)
    page = client.get(f"/campaigns/{campaign.pk}/results/").content.decode()
    assert "ACR MOS" in page and "Not compared" in page and "MOS in the layout of Table 4.2" in page


def test_a_live_acr_case_is_the_remote_session_alone(alice: Any, client: Any, settings: Any) -> None:
    from ratings import campaigns, invitations

    settings.QOELAB_LIVE_SESSION_PROVIDER = "rating_helpers"  # its fake start_session/stop_session
    by_hand = [{"params": {"protocol": "vnc", "rate": "1mbit", "delay": d}} for d in ("10ms", "100ms")]
    live = campaigns.open_campaign(
        campaigns.create_campaign(alice, name="live acr", conditions=by_hand, method="acr", mode="live")
    )
    ((_ev, raw),) = invitations.invite(live, count=1)
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Evaluator {raw}")
    assert api.post("/api/rate/consent/").status_code == 200
    cond = api.get("/api/rate/state/").json()["condition"]["id"]
    page = client.get(f"/rate/{raw}/").content.decode()
    assert 'data-reference="none"' in page and "Step 1: use the remote desktop" in page
    assert 'data-role="reference"' not in page and "How good was the quality of the remote desktop?" in page
    assert "Excellent" in page and "Imperceptible" not in page
    r = api.post("/api/rate/screens/", {"condition": cond, "stage": "reference", "index": 0}, format="json")
    assert r.status_code == 400
