"""What the rating-campaign tests share besides their fixtures (conftest.py): the demo sweep's
points, an evaluator's API client, the walk through a campaign's conditions, and a fake live-session
provider, a fake because the real one starts remote-desktop sessions (the RD job type) and the tests
that use it check the slot queue and the pages, not the sessions.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rest_framework.test import APIClient

POINTS = [
    {"protocol": p, "rate": "1mbit", "delay": d, "pages": 20}
    for p in ("vnc", "x2go")
    for d in ("10ms", "100ms")
]
# Link verification of each trial, as the worker stores it (the measured goodput is an input here).
LINKS = [{"measured": {"tcp_down_bps": bps}} for bps in (0.93e6, 0.91e6, 0.94e6, 0.90e6)]


def ev_client(token: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Evaluator {token}")
    return client


def watch(client: APIClient, condition: int, stages: tuple[str, ...] = ("reference", "degraded")) -> None:
    """Fetch the condition's videos in full from the media view, as the page's <video> elements do."""
    token = client._credentials["HTTP_AUTHORIZATION"].split()[1]
    for stage in stages:
        r = client.get(f"/rate/{token}/media/{condition}/{stage}/")
        assert r.status_code == 200
        b"".join(r.streaming_content)


def ready_to_rate(token: str) -> tuple[APIClient, int]:
    """An evaluator who consented and saw both videos of their first condition, all screens: the
    client and that condition's id, ready for a rating to be posted."""
    client = ev_client(token)
    client.post("/api/rate/consent/")
    cond = client.get("/api/rate/state/").json()["condition"]["id"]
    watch(client, cond)
    for stage in ("reference", "degraded"):
        client.post("/api/rate/screens/", {"condition": cond, "stage": stage, "index": 0}, format="json")
    return client, cond


def walk(
    client: APIClient, scores: Callable[[dict[str, Any], int], int] | int = 4, stop_after: int | None = None
) -> int:
    """Go through the evaluator's conditions over the API; returns how many were rated."""
    assert client.post("/api/rate/consent/").status_code == 200
    done = 0
    while True:
        state = client.get("/api/rate/state/").json()
        cond = state["condition"]
        if cond is None or (stop_after is not None and done >= stop_after):
            return done
        watch(client, cond["id"])
        for stage in ("reference", "degraded"):
            r = client.post(
                "/api/rate/screens/", {"condition": cond["id"], "stage": stage, "index": 0}, format="json"
            )
            assert r.status_code == 200, r.json()
        values = {
            a["key"]: (scores(cond, i) if callable(scores) else scores)
            for i, a in enumerate(state["aspects"])
        }
        r = client.post("/api/rate/ratings/", {"condition": cond["id"], "scores": values}, format="json")
        assert r.status_code == 201, r.json()
        done += 1


# A minimal session provider (QOELAB_LIVE_SESSION_PROVIDER = "rating_helpers"); the real one comes
# with the RD job type.
STOPPED: list[int] = []


def start_session(slot: Any) -> dict[str, str]:
    return {"websocket_url": f"ws://lab.invalid/slot/{slot.pk}", "client": "novnc"}


def stop_session(slot: Any) -> None:
    STOPPED.append(slot.pk)
