"""Issue 14, finding 1: every page carries a Content-Security-Policy that allows no inline script and
no inline style, and no page of ours needs one (browser tests check the same pages in Chromium).
"""

from __future__ import annotations

from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from django.test import Client

pytestmark = pytest.mark.django_db


def directives(policy: str) -> dict[str, list[str]]:
    out = {}
    for part in policy.split(";"):
        name, *values = part.split()
        out[name] = values
    return out


class InlineFinder(HTMLParser):
    """What a strict CSP would block in a page: inline scripts, style attributes and elements,
    event-handler attributes, javascript: URLs."""

    def __init__(self) -> None:
        super().__init__()
        self.found: list[str] = []
        self._in_script = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if tag == "script" and not a.get("src") and a.get("type") not in ("application/json", "importmap"):
            self.found.append(f"inline <script> at line {self.getpos()[0]}")
        if tag == "style":
            self.found.append(f"<style> element at line {self.getpos()[0]}")
        for name, value in attrs:
            if name == "style":
                self.found.append(f'style="{value}" on <{tag}> at line {self.getpos()[0]}')
            if name.startswith("on"):
                self.found.append(f"{name}= on <{tag}> at line {self.getpos()[0]}")
            if name in ("href", "src", "action") and (value or "").strip().lower().startswith("javascript:"):
                self.found.append(f"javascript: URL on <{tag}>")


def inline_content(html: str) -> list[str]:
    finder = InlineFinder()
    finder.feed(html)
    return finder.found


def assert_strict_page(resp: Any, url: str) -> None:
    assert resp.status_code == 200, (url, resp.status_code)
    assert resp["Content-Type"].startswith("text/html"), url
    csp = directives(resp["Content-Security-Policy"])
    assert csp["script-src"] == ["'self'"], url
    assert csp["style-src"] == ["'self'"], url
    assert csp["object-src"] == ["'none'"] and csp["base-uri"] == ["'none'"], url
    assert csp["frame-ancestors"] == ["'none'"], url
    assert inline_content(resp.content.decode()) == [], url


@pytest.fixture
def staff(alice: Any) -> Any:
    alice.is_staff = alice.is_superuser = True
    alice.save()
    return alice


@pytest.fixture
def videos(tmp_path_factory: Any) -> Path:
    from ratings.demo import make_video

    return make_video(tmp_path_factory.mktemp("csp") / "clip.webm", seconds=0.5, size="160x120")


def test_the_login_page_and_the_dashboard_pages_allow_no_inline_code(
    alice: Any, client_for: Any, sweep_of: Any
) -> None:
    assert_strict_page(Client().get("/accounts/login/"), "/accounts/login/")
    sweep = sweep_of()
    trial = sweep.trials.first()
    c = client_for(alice)
    for url in (
        "/",
        f"/experiments/{sweep.experiment_id}/",
        "/sweeps/new/",
        "/sweeps/new/?job_type=t_link",
        "/reproduce/",
        f"/sweeps/{sweep.pk}/",
        f"/trials/{trial.pk}/",
        "/campaigns/",
        "/campaigns/new/",
    ):
        assert_strict_page(c.get(url), url)


def test_the_campaign_and_evaluator_pages_allow_no_inline_code(
    alice: Any, client_for: Any, videos: Path
) -> None:
    from ratings import campaigns, demo, flow, invitations

    sweep = demo.demo_sweep(
        alice, [{"protocol": "vnc", "rate": "1mbit"}, {"protocol": "vnc", "rate": "2mbit"}]
    )
    for trial in sweep.trials.all():
        demo.add_video_artifact(trial, videos, reference=True)
        demo.add_video_artifact(trial, videos)
    campaign = campaigns.open_campaign(campaigns.create_campaign(alice, name="c", sweep=sweep, seed=1))
    c = client_for(alice)
    for url in (f"/campaigns/{campaign.pk}/", f"/campaigns/{campaign.pk}/results/"):
        assert_strict_page(c.get(url), url)
    ((evaluator, token),) = invitations.invite(campaign, count=1)
    browser = Client()
    assert_strict_page(browser.get(f"/rate/{token}/"), "consent page")
    flow.give_consent(evaluator)
    page = browser.get(f"/rate/{token}/")
    assert_strict_page(page, "condition page")
    assert b"<video" in page.content  # the page that plays the recordings (media-src 'self')
    assert directives(page["Content-Security-Policy"])["media-src"][0] == "'self'"


def test_the_admin_allows_no_inline_code(staff: Any, client_for: Any) -> None:
    assert_strict_page(Client().get("/admin/login/"), "/admin/login/")
    c = client_for(staff)
    for url in (
        "/admin/",
        "/admin/experiments/sweep/",
        "/admin/auth/user/",
        f"/admin/auth/user/{staff.pk}/change/",
    ):
        assert_strict_page(c.get(url), url)


def test_the_api_pages_run_no_inline_script(alice: Any, client_for: Any) -> None:
    c = client_for(alice)
    docs = c.get("/api/docs/")
    assert docs.status_code == 200
    csp = directives(docs["Content-Security-Policy"])
    assert csp["script-src"] == ["'self'"] and "'unsafe-inline'" in csp["style-src"]
    scripts = [f for f in inline_content(docs.content.decode()) if "script" in f]
    assert scripts == []  # Swagger UI's init script is loaded from a URL
    assert c.get("/api/docs/?script=").status_code == 200


def test_the_live_pages_may_open_websockets_to_the_lab_and_the_setting_narrows_them(settings: Any) -> None:
    resp = Client().get("/accounts/login/")
    assert directives(resp["Content-Security-Policy"])["connect-src"] == ["'self'", "ws:", "wss:"]
    settings.QOELAB_CSP_CONNECT_SRC = "wss://lab1.example.org:6080"
    resp = Client().get("/accounts/login/")
    assert directives(resp["Content-Security-Policy"])["connect-src"] == [
        "'self'",
        "wss://lab1.example.org:6080",
    ]


def test_every_response_carries_a_policy(alice: Any, api_client_for: Any) -> None:
    for resp in (api_client_for(alice).get("/api/experiments/"), Client().get("/no/such/page/")):
        assert "default-src" in resp["Content-Security-Policy"]
