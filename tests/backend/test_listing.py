"""Lists that scale (issue 15): the experiment, sweep, trial and campaign lists paginate, sort and filter
from the query string (qoelab_web.listing); a bad value is a plain 400 naming the parameter and its bound;
a page costs the same queries whatever the number of rows."""

from __future__ import annotations

import datetime as dt
import json
import re
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.core.serializers.json import DjangoJSONEncoder
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from experiments.choices import TrialStatus
from experiments.models import Experiment, Sweep, Trial
from ratings.choices import CampaignMode, CampaignStatus
from ratings.models import Campaign, Evaluator

pytestmark = pytest.mark.django_db

PROTOCOLS = ["rdp", "vnc", "x2go"]
RATES = ["1mbit", "10mbit", "100mbit", "1gbit", "10gbit"]
# 300 trials: 3 protocols x 5 rates x 20 repetitions; statuses cycle through this list.
STATUSES = [TrialStatus.SUCCEEDED] * 6 + [
    TrialStatus.FAILED,
    TrialStatus.PENDING,
    TrialStatus.RUNNING,
    "cancelled",
]


def count_text(html: str, name: str) -> str:
    m = re.search(rf'data-count="{name}">([^<]*)<', html)
    assert m, f"no count of {name} in the page"
    return m.group(1)


def trial_ids(html: str) -> list[int]:
    return [int(x) for x in re.findall(r'<tr data-trial="(\d+)"', html)]


def experiment(
    owner: Any, name: str, job_type: str = "t_link", created: dt.datetime | None = None
) -> Experiment:
    e = Experiment.objects.create(owner=owner, name=name, job_type=job_type)
    if created is not None:
        Experiment.objects.filter(pk=e.pk).update(created_at=created)
        e.refresh_from_db()
    return e


def sweep_with_trials(exp: Experiment, name: str = "big", n_reps: int = 20, cancelled: bool = False) -> Sweep:
    """A sweep over protocol x rate with ``n_reps`` repetitions, its trials made with bulk_create."""
    grid = {"protocol": PROTOCOLS, "rate": RATES}
    sweep = Sweep.objects.create(
        experiment=exp,
        name=name,
        job_type=exp.job_type,
        grid=grid,
        grid_order=["protocol", "rate"],
        repetitions=n_reps,
        seed=1,
        trial_count=len(PROTOCOLS) * len(RATES) * n_reps,
        created_by=exp.owner,
        cancelled_at=timezone.now() if cancelled else None,
    )
    start = timezone.now() - dt.timedelta(hours=1)
    rows = []
    i = 0
    for rep in range(n_reps):
        for p in PROTOCOLS:
            for r in RATES:
                status = STATUSES[i % len(STATUSES)]
                done = status in (TrialStatus.SUCCEEDED, TrialStatus.FAILED)
                rows.append(
                    Trial(
                        sweep=sweep,
                        index=i,
                        params={"protocol": p, "rate": r},
                        resolved={"protocol": p, "rate": r},
                        repetition=rep,
                        status=status,
                        started_at=start if done else None,
                        # durations 1..300 s, longest last: trial i lasts i+1 seconds
                        finished_at=start + dt.timedelta(seconds=i + 1) if done else None,
                    )
                )
                i += 1
    Trial.objects.bulk_create(rows)
    return sweep


def finished_sweep(exp: Experiment, name: str) -> Sweep:
    s = Sweep.objects.create(
        experiment=exp,
        name=name,
        job_type=exp.job_type,
        grid={"rate": ["1mbit"]},
        seed=1,
        trial_count=1,
        created_by=exp.owner,
    )
    Trial.objects.create(
        sweep=s, index=0, params={"rate": "1mbit"}, resolved={}, status=TrialStatus.SUCCEEDED
    )
    return s


@pytest.fixture
def staff(researchers_group: Any) -> Any:
    u = get_user_model().objects.create_user(username="sam", password="sam-password-1", is_staff=True)
    u.groups.add(researchers_group)
    return u


# ---------------------------------------------------------------------------------------------
# bounds: a plain 400 naming the parameter and its bound


@pytest.mark.parametrize(
    ("query", "says"),
    [
        ("per_page=5", "per_page: must be an integer from 10 to 200, got 5"),
        ("per_page=201", "per_page: must be an integer from 10 to 200, got 201"),
        ("per_page=ten", "per_page: must be an integer from 10 to 200"),
        ("page=0", "page: must be an integer from 1"),
        ("page=99", "page: must be an integer from 1 to 1, got 99"),
        ("sort=owner_password", "sort: must be one of name, created, trials"),
        ("from=2025-13-01", "from: must be a date YYYY-MM-DD"),
        ("from=2025-02-01&to=2025-01-01", "to: must not be before from"),
        ("job_type=nope", "job_type: must be one of t_link"),
    ],
)
def test_experiment_list_bad_values_are_400_naming_the_bound(
    alice: Any, client_for: Any, query: str, says: str
) -> None:
    experiment(alice, "one")
    r = client_for(alice).get(f"/?{query}")
    assert r.status_code == 400
    assert r["Content-Type"].startswith("text/plain")
    assert says in r.content.decode()


def test_every_list_refuses_bad_values(alice: Any, client_for: Any) -> None:
    exp = experiment(alice, "one")
    sweep = sweep_with_trials(exp, n_reps=1)
    c = client_for(alice)
    for url, query, param in [
        (f"/experiments/{exp.pk}/", "status=paused", "status"),
        (f"/experiments/{exp.pk}/", "sort=-grid", "sort"),
        (f"/sweeps/{sweep.pk}/", "per_page=1000", "per_page"),
        (f"/sweeps/{sweep.pk}/", "protocol=ssh", "protocol"),
        (f"/sweeps/{sweep.pk}/trials/", "status=done", "status"),
        (f"/sweeps/{sweep.pk}/trials/", "sort=error", "sort"),
        ("/campaigns/", "mode=both", "mode"),
        ("/campaigns/", "page=-1", "page"),
    ]:
        r = c.get(f"{url}?{query}")
        assert r.status_code == 400, (url, query, r.status_code)
        assert r.content.decode().startswith(f"{param}: "), (url, query, r.content)


# ---------------------------------------------------------------------------------------------
# experiments


def test_experiment_list_filters_sorts_and_pages(alice: Any, bob: Any, client_for: Any) -> None:
    now = timezone.now()
    for i in range(60):
        experiment(alice, f"exp-{i:02d}", "t_link", now - dt.timedelta(days=i))
    experiment(alice, "video-a", "t_video", dt.datetime(2024, 5, 2, 12, tzinfo=dt.UTC))
    experiment(bob, "bobs", "t_link")
    c = client_for(alice)

    html = c.get("/").content.decode()
    assert count_text(html, "experiments") == "1–50 of 61"
    assert "bobs" not in html
    assert 'name="owner"' not in html  # only staff filter by owner
    html = c.get("/?page=2").content.decode()
    assert count_text(html, "experiments") == "51–61 of 61"
    assert "exp-59" in html and "exp-00" not in html  # newest first by default

    html = c.get("/?job_type=t_video").content.decode()
    assert count_text(html, "experiments") == "1–1 of 1 (filtered)"
    assert "video-a" in html and "exp-00" not in html
    html = c.get("/?from=2024-05-01&to=2024-05-31").content.decode()
    assert count_text(html, "experiments") == "1–1 of 1 (filtered)"
    html = c.get("/?q=exp-1").content.decode()
    assert count_text(html, "experiments") == "1–10 of 10 (filtered)"

    html = c.get("/?sort=name&per_page=10&q=exp").content.decode()
    names = re.findall(r">(exp-\d\d)</a>", html)
    assert names == [f"exp-{i:02d}" for i in range(10)]
    # the page links keep the filters and the sort
    assert 'href="?q=exp&amp;sort=name&amp;per_page=10&amp;page=2"' in html
    html = c.get("/?sort=-name&per_page=10&q=exp").content.decode()
    assert re.findall(r">(exp-\d\d)</a>", html)[0] == "exp-59"


def test_experiment_list_sorts_by_trials_and_staff_filters_owner(
    alice: Any, bob: Any, staff: Any, client_for: Any
) -> None:
    small = experiment(alice, "small")
    big = experiment(bob, "big")
    sweep_with_trials(small, n_reps=1)  # 15 trials
    sweep_with_trials(big, n_reps=4)  # 60 trials
    experiment(alice, "empty")
    c = client_for(staff)
    html = c.get("/?sort=-trials").content.decode()
    assert re.findall(r'/experiments/\d+/">(\w+)</a>', html) == ["big", "small", "empty"]
    assert 'name="owner"' in html
    html = c.get("/?owner=bob").content.decode()
    assert count_text(html, "experiments") == "1–1 of 1 (filtered)"
    assert re.findall(r'/experiments/\d+/">(\w+)</a>', html) == ["big"]
    assert client_for(staff).get("/?owner=nobody").status_code == 400


# ---------------------------------------------------------------------------------------------
# sweeps of an experiment


def test_sweeps_of_an_experiment_filter_by_state(alice: Any, client_for: Any) -> None:
    exp = experiment(alice, "e")
    sweep_with_trials(exp, "running-one", n_reps=1)
    sweep_with_trials(exp, "cancelled-one", n_reps=1, cancelled=True)
    for i in range(12):
        finished_sweep(exp, f"done-{i:02d}")
    c = client_for(alice)
    url = f"/experiments/{exp.pk}/"
    html = c.get(url).content.decode()
    assert count_text(html, "sweeps") == "1–14 of 14"
    for state, n, name in [
        ("running", 1, "running-one"),
        ("cancelled", 1, "cancelled-one"),
        ("finished", 12, "done-00"),
    ]:
        html = c.get(f"{url}?status={state}").content.decode()
        assert count_text(html, "sweeps") == f"1–{n} of {n} (filtered)", state
        assert name in html
    html = c.get(f"{url}?status=finished&per_page=10&page=2&sort=name").content.decode()
    assert count_text(html, "sweeps") == "11–12 of 12 (filtered)"
    assert re.findall(r'/sweeps/\d+/">([\w-]+)</a>', html) == ["done-10", "done-11"]


# ---------------------------------------------------------------------------------------------
# a sweep's trials


def test_trial_table_filters_pages_and_keeps_summary_over_all(alice: Any, client_for: Any) -> None:
    sweep = sweep_with_trials(experiment(alice, "e"))
    c = client_for(alice)
    page = c.get(f"/sweeps/{sweep.pk}/?status=failed").content.decode()
    assert count_text(page, "trials") == "1–30 of 30 (filtered)"
    # the progress counts still cover all 300 trials
    assert re.search(r'data-field="total">300<', page)
    assert re.search(r'data-field="failed">30<', page)
    # the live refresh fetches the fragment with the page's filters
    assert f'data-trials-url="/sweeps/{sweep.pk}/trials/?status=failed"' in page

    html = c.get(f"/sweeps/{sweep.pk}/trials/?per_page=100&page=2").content.decode()
    assert count_text(html, "trials") == "101–200 of 300"
    assert len(trial_ids(html)) == 100
    html = c.get(f"/sweeps/{sweep.pk}/trials/?protocol=vnc").content.decode()
    assert count_text(html, "trials") == "1–50 of 100 (filtered)"
    assert "data-status" in html
    html = c.get(f"/sweeps/{sweep.pk}/trials/?protocol=vnc&status=succeeded&per_page=200").content.decode()
    n = Trial.objects.filter(sweep=sweep, params__protocol="vnc", status="succeeded").count()
    assert count_text(html, "trials") == f"1–{n} of {n} (filtered)"
    assert len(trial_ids(html)) == n


def test_trial_table_sorts(alice: Any, client_for: Any) -> None:
    sweep = sweep_with_trials(experiment(alice, "e"))
    c = client_for(alice)
    base = f"/sweeps/{sweep.pk}/trials/"
    ids = list(Trial.objects.filter(sweep=sweep).order_by("index").values_list("pk", flat=True))
    assert trial_ids(c.get(base).content.decode()) == ids[:50]
    assert trial_ids(c.get(f"{base}?sort=-id").content.decode()) == sorted(ids, reverse=True)[:50]
    # longest first: trial index i lasts i+1 s; trials not run (no duration) come last either way
    longest = trial_ids(c.get(f"{base}?sort=-duration&per_page=10").content.decode())
    done = list(
        Trial.objects.filter(sweep=sweep, status__in=["succeeded", "failed"])
        .order_by("-index")
        .values_list("pk", flat=True)
    )
    assert longest == done[:10]
    last = c.get(f"{base}?sort=duration&page=6").content.decode()
    assert "pending" in last and "succeeded" not in last.split("<tbody>")[1]
    # by point: the grid point (protocol slowest, then rate), then the repetition
    html = c.get(f"{base}?sort=point&per_page=25").content.decode()
    rows = Trial.objects.in_bulk(trial_ids(html))
    points = [
        (rows[i].params["protocol"], rows[i].params["rate"], rows[i].repetition) for i in trial_ids(html)
    ]
    assert points[:20] == [("rdp", "1mbit", rep) for rep in range(20)]
    assert points[20:] == [("rdp", "10mbit", rep) for rep in range(5)]
    assert re.search(r'title="point 2 of 15, repetition 1 of 20"', html)  # places count over the sweep
    html = c.get(f"{base}?sort=status&per_page=200").content.decode()
    statuses = re.findall(r'data-status="(\w+)"', html)
    assert statuses == sorted(statuses)


def test_trial_page_costs_the_same_queries_for_10_or_200_rows(alice: Any, client_for: Any) -> None:
    sweep = sweep_with_trials(experiment(alice, "e"))
    c = client_for(alice)
    counts = []
    for per_page in (10, 200):
        with CaptureQueriesContext(connection) as ctx:
            r = c.get(f"/sweeps/{sweep.pk}/trials/?per_page={per_page}")
        assert r.status_code == 200
        counts.append(len(ctx.captured_queries))
    assert counts[0] == counts[1], counts
    assert counts[1] < 15


def test_experiment_list_costs_the_same_queries_for_10_or_60_rows(alice: Any, client_for: Any) -> None:
    for i in range(60):
        sweep_with_trials(experiment(alice, f"e{i}"), n_reps=1) if i < 3 else experiment(alice, f"e{i}")
    c = client_for(alice)
    counts = []
    for per_page in (10, 100):
        with CaptureQueriesContext(connection) as ctx:
            assert c.get(f"/?per_page={per_page}").status_code == 200
        counts.append(len(ctx.captured_queries))
    assert counts[0] == counts[1], counts


def test_the_sweep_api_list_costs_the_same_queries_for_3_or_30_sweeps(
    alice: Any, api_client_for: Any, make_host: Any
) -> None:
    """Issue 33: each listed sweep's progress was its own aggregate (plus its pending trials and the
    hosts): ``/api/sweeps/`` saturated at 129 requests/s. Pending, running and finished trials and
    a live host make every branch of the progress run."""
    make_host("lab-1", {"netns": True, "link": True})
    api = api_client_for(alice)
    counts, bodies = [], []
    for n in (3, 30):
        while Sweep.objects.count() < n:
            i = Sweep.objects.count()
            sweep_with_trials(experiment(alice, f"s{i}"), name=f"s{i}", n_reps=1, cancelled=i % 7 == 3)
        with CaptureQueriesContext(connection) as ctx:
            r = api.get("/api/sweeps/?limit=100")
        assert r.status_code == 200 and r.json()["count"] == n
        counts.append(len(ctx.captured_queries))
        bodies.append(r.json()["results"])
    assert counts[0] == counts[1], counts
    # The bulk progress is the one-sweep progress, field for field.
    from experiments.api.serializers import SweepSerializer
    from experiments.services import progress

    Sweep.objects.filter(pk=bodies[1][0]["id"]).update(cancelled_at=timezone.now())
    for row in api.get("/api/sweeps/?limit=100").json()["results"]:
        sweep = Sweep.objects.get(pk=row["id"])
        assert row["progress"] == progress(sweep), row["id"]
        # The list's direct representation is DRF's generic one, field for field (time zones too).
        generic = super(SweepSerializer, SweepSerializer(sweep)).to_representation(sweep)
        assert row == json.loads(json.dumps(generic, cls=DjangoJSONEncoder)), row["id"]


def test_experiment_list_counts_each_experiments_trials_and_the_newest_sweeps(
    alice: Any, client_for: Any
) -> None:
    """Issue 33: the counts are taken for the page's experiments (and the ten newest sweeps) after
    the cut, not for the whole lab before it; they must still be each one's own."""
    exps = [experiment(alice, f"e{i}") for i in range(3)]
    sweeps = [sweep_with_trials(exps[0], "a", n_reps=1), sweep_with_trials(exps[0], "b", n_reps=2)]
    sweeps.append(sweep_with_trials(exps[1], "c", n_reps=1, cancelled=True))
    html = client_for(alice).get("/").content.decode()
    terminal = [TrialStatus.SUCCEEDED, TrialStatus.FAILED, TrialStatus.CANCELLED]
    for exp in exps:
        trials = Trial.objects.filter(sweep__experiment=exp)
        n, done = trials.count(), trials.filter(status__in=terminal).count()
        failed = trials.filter(status=TrialStatus.FAILED).count()
        row = re.search(rf'/experiments/{exp.pk}/">.*?</tr>', html, re.S)
        assert row, exp.name
        text = re.sub(r"<[^>]+>", "", row.group(0))
        assert f'<td class="num">{exp.sweeps.count()}</td>' in row.group(0)
        if n:
            assert f"{done} / {n} trials done" in text and (f"{failed} failed" in text) == bool(failed)
        else:
            assert "trials done" not in text
    for sweep in sweeps:
        trials = sweep.trials.all()
        ended = trials.filter(status__in=terminal).count()
        assert f"{ended} / {trials.count()} ended" in html, sweep.name


# ---------------------------------------------------------------------------------------------
# campaigns


def test_campaign_list_filters_sorts_pages_and_counts(
    alice: Any, bob: Any, staff: Any, client_for: Any
) -> None:
    rows = [
        Campaign(
            owner=alice if i % 4 else bob,
            name=f"camp-{i:02d}",
            mode=CampaignMode.LIVE if i % 2 else CampaignMode.RECORDED,
            status=[CampaignStatus.DRAFT, CampaignStatus.OPEN, CampaignStatus.CLOSED][i % 3],
        )
        for i in range(60)
    ]
    Campaign.objects.bulk_create(rows)
    first = Campaign.objects.get(name="camp-01")
    Evaluator.objects.bulk_create(
        [
            Evaluator(
                campaign=first,
                label=f"ev{i}",
                token_hash=f"{i:064d}",
                seed=i,
                consent_at=timezone.now() if i < 2 else None,
            )
            for i in range(3)
        ]
    )
    c = client_for(alice)
    html = c.get("/campaigns/").content.decode()
    assert count_text(html, "campaigns") == "1–45 of 45"  # alice's only
    html = c.get("/campaigns/?mode=live&status=open").content.decode()
    mine_live_open = [i for i in range(60) if i % 4 and i % 2 and i % 3 == 1]
    n = len(mine_live_open)
    assert count_text(html, "campaigns") == f"1–{n} of {n} (filtered)"
    html = c.get("/campaigns/?sort=name&q=camp-01").content.decode()
    cells = re.findall(r'<td class="num">(\d+)</td>', html)
    assert cells[:4] == ["0", "3", "2", "0"]  # conditions, invited, started, finished
    html = client_for(staff).get("/campaigns/?owner=bob&sort=-name&per_page=10").content.decode()
    assert count_text(html, "campaigns") == "1–10 of 15 (filtered)"
    assert re.findall(r">(camp-\d\d)</a>", html)[0] == "camp-56"
