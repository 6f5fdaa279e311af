"""Lists that scale (issue 15), in Chromium: a lab with many experiments, sweeps and trials; the researcher
filters with the GET filter bars, pages through with the pager links and sees the right counts."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from django.utils import timezone

from experiments.choices import TrialStatus
from experiments.models import Experiment, Sweep, Trial

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

PROTOCOLS = ["rdp", "vnc", "x2go"]
RATES = ["1mbit", "10mbit", "100mbit", "1gbit", "10gbit"]
STATUSES = [TrialStatus.SUCCEEDED] * 6 + [
    TrialStatus.FAILED,
    TrialStatus.PENDING,
    TrialStatus.RUNNING,
    "cancelled",
]


def make_lab(owner: Any) -> tuple[Experiment, Sweep]:
    """55 experiments; the newest holds 23 finished one-trial sweeps and a 300-trial sweep (bulk_create)."""
    Experiment.objects.bulk_create(
        [Experiment(owner=owner, name=f"old-{i:02d}", job_type="t_link") for i in range(54)]
    )
    exp = Experiment.objects.create(owner=owner, name="big-lab", job_type="t_link")
    for i in range(23):
        s = Sweep.objects.create(
            experiment=exp,
            name=f"done-{i:02d}",
            job_type="t_link",
            grid={"rate": ["1mbit"]},
            seed=1,
            trial_count=1,
            created_by=owner,
        )
        Trial.objects.create(
            sweep=s, index=0, params={"rate": "1mbit"}, resolved={}, status=TrialStatus.SUCCEEDED
        )
    big = Sweep.objects.create(
        experiment=exp,
        name="big-sweep",
        job_type="t_link",
        grid={"protocol": PROTOCOLS, "rate": RATES},
        grid_order=["protocol", "rate"],
        repetitions=20,
        seed=1,
        trial_count=300,
        created_by=owner,
    )
    start = timezone.now() - dt.timedelta(hours=1)
    rows, i = [], 0
    for rep in range(20):
        for p in PROTOCOLS:
            for r in RATES:
                status = STATUSES[i % len(STATUSES)]
                done = status in (TrialStatus.SUCCEEDED, TrialStatus.FAILED)
                rows.append(
                    Trial(
                        sweep=big,
                        index=i,
                        params={"protocol": p, "rate": r},
                        resolved={"protocol": p, "rate": r},
                        repetition=rep,
                        status=status,
                        started_at=start if done else None,
                        finished_at=start + dt.timedelta(seconds=i + 1) if done else None,
                    )
                )
                i += 1
    Trial.objects.bulk_create(rows)
    return exp, big


def count(page: Any, name: str) -> str:
    return page.locator(f'#{name}-pager [data-count="{name}"]').inner_text().strip()


def test_researcher_filters_and_pages_long_lists(
    live_server: Any, chromium_page: Any, alice: Any, log_in: Any
) -> None:
    exp, big = make_lab(alice)
    page = chromium_page
    log_in(page, live_server.url, alice, next="/")

    # Experiments: 55, 50 a page; the next page link, then a name filter.
    assert count(page, "experiments") == "1–50 of 55"
    with page.expect_navigation():
        page.locator("#experiments-pager").get_by_role("link", name="Next ›").click()
    page.wait_for_load_state("load")
    assert count(page, "experiments") == "51–55 of 55"
    filters = page.locator("#experiments-filters")
    filters.get_by_label("Name contains", exact=True).fill("big")
    with page.expect_navigation():
        filters.get_by_role("button", name="Apply").click()
    page.wait_for_load_state("load")
    assert count(page, "experiments") == "1–1 of 1 (filtered)"
    with page.expect_navigation():
        page.get_by_role("link", name="big-lab").click()
    page.wait_for_load_state("load")

    # Sweeps of the experiment: 24, 10 a page, only the finished ones, page 3 keeps the filter.
    assert count(page, "sweeps") == "1–24 of 24"
    filters = page.locator("#sweeps-filters")
    filters.get_by_label("Status", exact=True).select_option("finished")
    filters.get_by_label("Per page", exact=True).select_option("10")
    with page.expect_navigation():
        filters.get_by_role("button", name="Apply").click()
    page.wait_for_load_state("load")
    assert count(page, "sweeps") == "1–10 of 23 (filtered)"
    with page.expect_navigation():
        page.locator("#sweeps-pager").get_by_role("link", name="Last »").click()
    page.wait_for_load_state("load")
    assert count(page, "sweeps") == "21–23 of 23 (filtered)"
    assert "status=finished" in page.url and "page=3" in page.url
    assert page.get_by_role("link", name="big-sweep").count() == 0

    # A sweep's 300 trials: failed vnc ones, two pages of 10; the progress counts cover all trials.
    page.goto(f"{live_server.url}/sweeps/{big.pk}/")
    assert count(page, "trials") == "1–50 of 300"
    filters = page.locator("#trials-filters")
    filters.get_by_label("Status", exact=True).select_option("failed")
    filters.get_by_label("Protocol", exact=True).select_option("vnc")
    filters.get_by_label("Per page", exact=True).select_option("10")
    with page.expect_navigation():
        filters.get_by_role("button", name="Apply").click()
    page.wait_for_load_state("load")
    n_failed_vnc = Trial.objects.filter(sweep=big, status="failed", params__protocol="vnc").count()
    assert n_failed_vnc == 10
    assert count(page, "trials") == f"1–10 of {n_failed_vnc} (filtered)"
    assert page.locator('#progress [data-field="total"]').inner_text() == "300"
    assert page.locator('#progress [data-field="failed"]').inner_text() == "30"
    assert page.locator("#trials tbody tr[data-status=failed]").count() == 10
    # The live refresh fetches the same filtered table.
    fragment = page.evaluate(
        """async () => {
             const url = document.getElementById('progress').dataset.trialsUrl;
             const r = await fetch(url, {credentials: 'same-origin'});
             return [url, await r.text()];
           }"""
    )
    assert "status=failed" in fragment[0] and "protocol=vnc" in fragment[0]
    assert f"1–10 of {n_failed_vnc} (filtered)" in fragment[1]
    # Sorting by a column header keeps the filters.
    with page.expect_navigation():
        page.locator("#trials thead").get_by_role("link", name="Duration").click()
    page.wait_for_load_state("load")
    assert "sort=duration" in page.url and "status=failed" in page.url
    assert count(page, "trials") == f"1–10 of {n_failed_vnc} (filtered)"
    assert not page.qoelab_problems, page.qoelab_problems
