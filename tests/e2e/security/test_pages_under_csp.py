"""The pages the other browser tests do not open, under the Content-Security-Policy in Chromium: the
New-sweep form's job-type switch (a static script now), the admin and the API docs. Chromium reports
every CSP violation as a console error, which ``page.qoelab_problems`` collects.
"""

from __future__ import annotations

from typing import Any

import pytest

pytestmark = [pytest.mark.e2e]


def _log_in(page: Any, url: str, user: Any) -> None:
    page.goto(url + "/accounts/login/")
    page.get_by_label("Username").fill(user.username)
    page.get_by_label("Password").fill(f"{user.username}-password-1")
    page.get_by_role("button", name="Log in").click()
    page.get_by_role("heading", name="Experiments").wait_for()


def test_the_job_type_switch_the_admin_and_the_api_docs_run_without_a_csp_violation(
    live_server: Any, alice: Any, chromium_page: Any
) -> None:
    alice.is_staff = alice.is_superuser = True
    alice.save()
    page = chromium_page
    missing: list[str] = []
    page.on("response", lambda r: missing.append(r.url) if r.status == 404 else None)
    _log_in(page, live_server.url, alice)

    page.goto(live_server.url + "/sweeps/new/")
    assert page.get_by_label("Job type").input_value() == "link_check"
    page.get_by_label("Job type").select_option("storage_apt")
    page.wait_for_url("**job_type=storage_apt**")  # the script submitted the form on change

    page.goto(live_server.url + "/admin/auth/user/")
    page.get_by_role("link", name="alice").first.click()
    page.get_by_role("heading", name="Change user").wait_for()

    page.goto(live_server.url + "/api/docs/")
    page.locator(".swagger-ui .info .title").wait_for()  # Swagger UI started from its script URL
    page.wait_for_load_state("networkidle")  # whatever the page loads after its title, loaded
    # The admin's pages name no favicon, so Chromium asks for /favicon.ico (404); nothing else is missing.
    assert all(url.endswith("/favicon.ico") for url in missing), missing
    problems = [p for p in page.qoelab_problems if "404 (Not Found)" not in p]
    assert problems == [], page.qoelab_problems
