"""The trial page in units (issue 15): every value with a readable unit and label, link verification and
provenance as tables, recordings played in the page, and trial numbers that agree with the URL."""

from __future__ import annotations

import html
import json
import re
from typing import Any

import pytest
from django.core.files.base import ContentFile
from pydantic import BaseModel, ConfigDict, Field

from dashboard import trialpage
from dashboard.quantities import exact_quantity, format_quantity
from dashboard.templatetags.qoelab_dashboard import qty
from experiments.models import Sweep
from experiments.services import create_sweep
from qoelab import params
from qoelab.jobs import REGISTRY
from qoelab.jobtype import JobType, Metric, TrialResult
from results.models import Artifact, Sample, SummaryValue

pytestmark = pytest.mark.django_db

WEBM_HEAD = b"\x1a\x45\xdf\xa3" + b"\x00" * 60  # EBML magic: what kinds.file_response calls WebM


class UnitParams(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_default=True)
    rate: params.Rate() = Field(description="bottleneck rate")
    delay: params.Duration(hi=1.0) = Field("0ms", description="one-way delay")


def _never_run(p: BaseModel, ctx: object) -> TrialResult:
    raise AssertionError("the trial page tests do not run trials")


UNITS_JOB = JobType(
    name="t_units",
    title="units demo",
    description="a job type with one metric per unit family",
    params=UnitParams,
    requires=frozenset({"netns"}),
    run=_never_run,
    metrics=(
        Metric("goodput_bps", "Goodput", "bit/s"),
        Metric("size_down", "Transfer size", "B"),
        Metric("setup", "Setup time", "s"),
        Metric("T_ms", "Response time T", "ms"),
        Metric("loss", "Loss", "%"),
        Metric("records", "Records", ""),
    ),
)


@pytest.fixture
def units_job(monkeypatch: pytest.MonkeyPatch) -> JobType:
    monkeypatch.setitem(REGISTRY, UNITS_JOB.name, UNITS_JOB)
    return UNITS_JOB


def _sweep(user: Any, grid: dict[str, list[Any]], repetitions: int = 1, **spec: Any) -> Sweep:
    body = {"experiment": {"name": "units"}, "job_type": UNITS_JOB.name, "grid": grid}
    return create_sweep({**body, "repetitions": repetitions, **spec}, user)


def _cell(page: str, attr: str) -> str:
    """The text inside the element that carries ``attr`` (e.g. data-metric="goodput_bps")."""
    return page.split(attr, 1)[1].split("</tr>", 1)[0]


# ---- the qty filter: each unit family, exact strings ----------------------------------------------


@pytest.mark.parametrize(
    ("value", "unit", "shown"),
    [
        # bit/s: SI prefixes (1000), 4 significant digits, a rounded 999.96 kbit/s moves up a prefix
        (1e6, "bit/s", "1 Mbit/s"),
        (965333.0, "bit/s", "965.3 kbit/s"),
        (999960.0, "bit/s", "1 Mbit/s"),
        (9.5e6, "bit/s", "9.5 Mbit/s"),
        (2.5e9, "bit/s", "2.5 Gbit/s"),
        (12e12, "bit/s", "12,000 Gbit/s"),
        (512.0, "bit/s", "512 bit/s"),
        (0.0, "bit/s", "0 bit/s"),
        (-2.5e6, "bit/s", "-2.5 Mbit/s"),
        # B: kB = 1000 B, as the charts' transfer size
        (999, "B", "999 B"),
        (123456.0, "B", "123.5 kB"),
        (1234567, "B", "1.235 MB"),
        (3.2e9, "B", "3.2 GB"),
        # s: seconds down to ms, µs, ns; ns up to µs
        (12.5, "s", "12.5 s"),
        (600.0, "s", "600 s"),
        (0.0201, "s", "20.1 ms"),
        (0.0005, "s", "500 µs"),
        (5e-8, "s", "50 ns"),
        (1500.0, "ns", "1.5 µs"),
        (120.0, "ns", "120 ns"),
        # ms stays ms, % stays %
        (2345.678, "ms", "2,346 ms"),
        (20.1, "ms", "20.1 ms"),
        (0.25, "ms", "0.25 ms"),
        (0.5, "%", "0.5 %"),
        (12.0, "%", "12 %"),
        # plain numbers: grouping from 1,000, 4 significant digits below, the declared unit kept
        (12.0, "", "12"),
        (1234567.0, "", "1,234,567"),
        (0.8734, "", "0.8734"),
        (1.5e-5, "", "1.5e-05"),
        (3.0, "sessions", "3 sessions"),
        # nothing, yes/no, lists, timestamps
        (None, "ms", "–"),
        (True, "", "yes"),
        ([0.1, 0.52], "%", "0.1 %, 0.52 %"),
        (1714567890.5, "unix time", "2024-05-01 12:51:30 UTC"),
    ],
)
def test_qty_shows_each_unit_family_with_a_readable_prefix(value: Any, unit: str, shown: str) -> None:
    assert format_quantity(value, unit) == shown


@pytest.mark.parametrize(
    ("value", "unit", "title"),
    [
        (1e6, "bit/s", "1,000,000 bit/s"),
        (965333.3333333334, "bit/s", "965,333.3333333334 bit/s"),
        (0.0201, "s", "0.0201 s"),
        (2345.678, "ms", "2,345.678 ms"),
        (5e-8, "s", "5e-08 s"),
        (None, "ms", "not recorded"),
        (False, "", "false"),
    ],
)
def test_qty_keeps_every_digit_of_the_stored_value_in_its_title(value: Any, unit: str, title: str) -> None:
    assert exact_quantity(value, unit) == title


def test_the_qty_filter_is_markup_with_the_exact_value_in_the_title_and_escapes_text() -> None:
    assert str(qty(965333.0, "bit/s")) == '<span class="qty" title="965,333 bit/s">965.3 kbit/s</span>'
    assert str(qty("<b>", "")) == '<span class="qty" title="&lt;b&gt;">&lt;b&gt;</span>'


@pytest.mark.parametrize(
    ("name", "label", "unit"),
    [
        ("configured_delay_ms", "configured delay", "ms"),
        ("wait_s", "wait", "s"),
        ("work_ns", "work", "ns"),
        ("rate_bps", "rate", "bit/s"),
        ("total_bytes", "total", "B"),
        ("X_B", "X", "B"),
        ("bytes_down_unique", "bytes down unique", "B"),
        ("loss_pct", "loss", "%"),
        ("T_ms_median", "T (median)", "ms"),
        ("started_at", "started at", "unix time"),
        ("checks_ok", "checks ok", ""),
        ("ms", "ms", ""),  # a unit alone is a name, not a suffix
    ],
)
def test_an_undeclared_name_gets_its_label_and_unit_from_its_words(name: str, label: str, unit: str) -> None:
    assert trialpage.describe_name(name) == trialpage.NamedValue(label, unit)


# ---- the summary and samples tables --------------------------------------------------------------


def test_the_summary_shows_every_metric_with_label_unit_and_raw_name(client_for, alice, units_job) -> None:
    trial = _sweep(alice, {"rate": ["1mbit"]}).trials.get()
    values = {
        "goodput_bps": 965333.0,
        "size_down": 123456.0,
        "setup": 0.0201,
        "T_ms": 2345.678,
        "loss": 0.5,
        "records": 1234567.0,
        "configured_delay_ms": 20.0,  # not declared by the job type
        "configured_rate_bps": 1e6,
    }
    for name, value in values.items():
        SummaryValue.objects.create(trial=trial, name=name, value=value)
    page = client_for(alice).get(f"/trials/{trial.pk}/").content.decode()
    expected = {
        "goodput_bps": ("Goodput", "965,333 bit/s", "965.3 kbit/s"),
        "size_down": ("Transfer size", "123,456 B", "123.5 kB"),
        "setup": ("Setup time", "0.0201 s", "20.1 ms"),
        "T_ms": ("Response time T", "2,345.678 ms", "2,346 ms"),
        "loss": ("Loss", "0.5 %", "0.5 %"),
        "records": ("Records", "1,234,567", "1,234,567"),
        "configured_delay_ms": ("configured delay", "20 ms", "20 ms"),
        "configured_rate_bps": ("configured rate", "1,000,000 bit/s", "1 Mbit/s"),
    }
    for name, (label, title, shown) in expected.items():
        row = _cell(page, f'data-metric="{name}">')
        assert f"<td>{label}</td>" in row, row
        assert f'<span class="qty" title="{title}">{shown}</span>' in row, row
        assert f'<td class="raw-name"><code>{name}</code></td>' in row, row
    assert "1e+06" not in page


def test_the_samples_table_names_each_column_and_its_unit(client_for, alice, units_job) -> None:
    trial = _sweep(alice, {"rate": ["1mbit"]}).trials.get()
    for i, (rate, t) in enumerate([(9.5e6, 20.1), (950e3, 2345.0)]):
        Sample.objects.create(
            trial=trial, kind="update", index=i, values={"rate_bps": rate, "T_ms": t, "timed_out": i == 1}
        )
    page = client_for(alice).get(f"/trials/{trial.pk}/").content.decode()
    head = page.split('aria-label="Samples"', 1)[1].split("</thead>", 1)[0]
    # Declared (T_ms) or from the name (rate_bps); one prefix per column, from its largest value.
    assert '<th scope="col" class="num" data-key="T_ms">Response time T (ms)<br>' in head
    assert '<th scope="col" class="num" data-key="rate_bps">rate (Mbit/s)<br>' in head
    assert '<th scope="col" class="num" data-key="timed_out">timed out<br>' in head
    body = page.split('aria-label="Samples"', 1)[1].split("</tbody>", 1)[0]
    assert '<span class="qty" title="9,500,000 bit/s">9.5</span>' in body
    assert '<span class="qty" title="950,000 bit/s">0.95</span>' in body
    assert '<span class="qty" title="2,345 ms">2,345</span>' in body
    assert '<span class="qty" title="true">yes</span>' in body


# ---- link verification and provenance as tables --------------------------------------------------


def test_flatten_gives_dotted_keys_with_units_from_their_names() -> None:
    doc = {
        "ok": True,
        "measured": {"tcp_down_bps": 9.5e6, "rtt_ms": 20.1, "loss_ci95_pct": [0.1, 0.5], "rtt_idle": {}},
        "checks": [{"name": "rtt_ms", "ok": False}],
        "tools": {"iperf3": "iperf 3.12"},
    }
    rows, left_off = trialpage.flatten(doc)
    assert left_off == 0
    assert [(r["key"], r["value"], r["unit"]) for r in rows] == [
        ("checks[0].name", "rtt_ms", ""),
        ("checks[0].ok", False, ""),
        ("measured.loss_ci95_pct", [0.1, 0.5], "%"),
        ("measured.rtt_idle", {}, ""),
        ("measured.rtt_ms", 20.1, "ms"),
        ("measured.tcp_down_bps", 9.5e6, "bit/s"),
        ("ok", True, ""),
        ("tools.iperf3", "iperf 3.12", ""),
    ]
    rows, left_off = trialpage.flatten({"a": list(range(5)), "b": [{"x_s": i} for i in range(5)]}, limit=3)
    assert [r["key"] for r in rows] == ["a", "b[0].x_s", "b[1].x_s"] and left_off == 3


def test_flatten_gives_a_checks_numbers_and_a_statistics_dict_their_unit() -> None:
    """Issue 33: the link check's ``checks[0].configured 9,653,333`` and ``measured.rtt_idle.mean
    20.21`` had no unit."""
    doc = {
        "checks": [{"name": "tcp_down_bps", "configured": 9653333, "measured": 9.1e6, "tolerance": "-10 %"}],
        "measured": {"rtt_idle": {"mean": 20.21, "max": 22.0, "count": 20}, "loss_down": {"mean": 0.5}},
    }
    units = {r["key"]: r["unit"] for r in trialpage.flatten(doc)[0]}
    assert units == {
        "checks[0].configured": "bit/s",
        "checks[0].measured": "bit/s",
        "checks[0].name": "",
        "checks[0].tolerance": "",
        "measured.rtt_idle.count": "",  # a count, not milliseconds
        "measured.rtt_idle.max": "ms",
        "measured.rtt_idle.mean": "ms",
        "measured.loss_down.mean": "",  # nothing says its unit: none is made up
    }


def test_link_verification_and_provenance_are_tables_with_the_raw_json_behind_a_toggle(
    client_for, alice, units_job
) -> None:
    trial = _sweep(alice, {"rate": ["10mbit"]}).trials.get()
    link = {
        "mode": "full",
        "ok": True,
        "measured": {"tcp_down_bps": 9.5e6, "rtt_ms": 20.1, "loss_pct": 0.12},
        "method": {"duration_s": 5.0, "udp_payload_bytes": 1200},
    }
    provenance = {"server": "vm", "vm": {"accel": "kvm", "boot_to_ready_s": 9.23}, "started_at": 1714567890.5}
    type(trial).objects.filter(pk=trial.pk).update(link=link, provenance=provenance)
    page = client_for(alice).get(f"/trials/{trial.pk}/").content.decode()
    assert "in full on this trial (TCP each way, pings, UDP loss probes): within tolerance" in page

    def rows(label: str) -> dict[str, str]:
        table = page.split(f'aria-label="{label}" class="json-table"', 1)[1].split("</table>", 1)[0]
        found = re.findall(
            r'<th scope="row"><code>([^<]+)</code></th><td><span class="qty" title="[^"]*">([^<]*)<', table
        )
        return {k: html.unescape(v) for k, v in found}

    assert rows("Link verification") == {
        "measured.loss_pct": "0.12 %",
        "measured.rtt_ms": "20.1 ms",
        "measured.tcp_down_bps": "9.5 Mbit/s",
        "method.duration_s": "5 s",
        "method.udp_payload_bytes": "1.2 kB",
        "mode": "full",
        "ok": "yes",
    }
    assert rows("Provenance") == {
        "server": "vm",
        "started_at": "2024-05-01 12:51:30 UTC",
        "vm.accel": "kvm",
        "vm.boot_to_ready_s": "9.23 s",
    }
    raw = re.findall(
        r'<details class="raw-json"><summary>Raw JSON</summary><pre class="json" tabindex="0">(.*?)</pre>',
        page,
        re.S,
    )
    assert len(raw) == 2
    assert "&quot;tcp_down_bps&quot;: 9500000.0" in raw[0] and "&quot;boot_to_ready_s&quot;: 9.23" in raw[1]


# ---- recordings played in the page ---------------------------------------------------------------


def _artifact(trial: Any, kind: str, name: str, data: bytes) -> Artifact:
    art = Artifact(trial=trial, kind=kind, name=name, size=len(data), sha256="0" * 64)
    art.file.save(name, ContentFile(data), save=True)
    return art


def test_a_video_plays_inline_for_its_owner_only(client_for, alice, bob, units_job) -> None:
    trial = _sweep(alice, {"rate": ["1mbit"]}).trials.get()
    data = WEBM_HEAD + bytes(range(256)) * 8
    video = _artifact(trial, "video", "screen.webm", data)
    log = _artifact(trial, "log", "run.log", b"hello")
    c = client_for(alice)

    r = c.get(f"/artifacts/{video.pk}/play/")
    assert r.status_code == 200
    assert r["Content-Type"] == "video/webm"
    assert r["Content-Disposition"].startswith("inline")
    assert r["Accept-Ranges"] == "bytes" and r["X-Content-Type-Options"] == "nosniff"
    assert b"".join(r.streaming_content) == data
    # Seeking: a byte range is a 206 with just those bytes.
    r = c.get(f"/artifacts/{video.pk}/play/", HTTP_RANGE="bytes=64-99")
    assert r.status_code == 206 and r["Content-Range"] == f"bytes 64-99/{len(data)}"
    assert b"".join(r.streaming_content) == data[64:100]
    assert c.get(f"/artifacts/{video.pk}/play/", HTTP_RANGE=f"bytes={len(data)}-").status_code == 416

    # Another researcher: as if it did not exist.
    assert client_for(bob).get(f"/artifacts/{video.pk}/play/").status_code == 404
    # Not a video: 404 with the reason (the download still works).
    r = c.get(f"/artifacts/{log.pk}/play/")
    assert r.status_code == 404 and "not media a page can play" in r.content.decode()
    assert c.get(f"/artifacts/{log.pk}/download/").status_code == 200

    page = c.get(f"/trials/{trial.pk}/").content.decode()
    assert f'<video controls preload="metadata" src="/artifacts/{video.pk}/play/"' in page
    assert f'src="/artifacts/{log.pk}/play/"' not in page
    assert f'href="/artifacts/{log.pk}/download/" download>run.log</a>' in page


def test_a_video_whose_bytes_are_not_webm_or_mp4_is_refused_with_the_reason(
    client_for, alice, units_job
) -> None:
    trial = _sweep(alice, {"rate": ["1mbit"]}).trials.get()
    fake = _artifact(trial, "video", "evil.webm", b"<html><script>alert(1)</script>")  # stored before checks
    c = client_for(alice)
    r = c.get(f"/artifacts/{fake.pk}/play/")
    assert r.status_code == 404 and r["Content-Type"].startswith("text/plain")
    assert "not media a page can play" in r.content.decode()
    page = c.get(f"/trials/{trial.pk}/").content.decode()
    assert "<video" not in page  # no broken player: the page says why instead
    assert "evil.webm cannot play here: its bytes are not WebM" in page


# ---- numbering that agrees with the URL ----------------------------------------------------------


def test_a_trial_is_called_by_its_pk_and_its_place_in_the_sweep_is_shown_apart(
    client_for, alice, units_job
) -> None:
    _sweep(alice, {"rate": ["1mbit"]})  # an earlier sweep: pks and indexes differ
    sweep = _sweep(alice, {"rate": ["1mbit", "2mbit", "5mbit"], "delay": ["0ms", "10ms"]}, repetitions=2)
    trial = sweep.trials.get(params={"rate": "2mbit", "delay": "10ms"}, repetition=1)
    assert trial.pk != trial.index
    c = client_for(alice)
    page = c.get(f"/trials/{trial.pk}/").content.decode()
    assert f"<h1>Trial {trial.pk} <span" in page
    assert f"<title>Trial {trial.pk} · {sweep.name}" in page
    # Grid order: rate changes slowest, so (2mbit, 10ms) is the 4th of 6 points; repetitions count from 1.
    place = page.split('data-field="place">', 1)[1].split("</p>", 1)[0]
    assert place.startswith("Point 4 of 6, repetition 2 of 2 of sweep"), place
    assert f"(run {trial.index + 1} of 12 in the sweep's order)" in place

    for url in (f"/sweeps/{sweep.pk}/", f"/sweeps/{sweep.pk}/trials/"):
        table = c.get(url).content.decode()
        row = table.split(f'data-trial="{trial.pk}"', 1)[1].split("</tr>", 1)[0]
        assert f'aria-label="Trial {trial.pk}">{trial.pk}</a>' in row, row
        assert '<td class="num" title="point 4 of 6, repetition 2 of 2">4</td>' in row, row
        assert '<td class="num" title="repetition 2 of 2">2</td>' in row, row
        # Every row's link is named by the trial it opens.
        row_link = r'data-trial="(\d+)"[^>]*>\s*<td class="num">'
        row_link += r'<a href="/trials/(\d+)/" aria-label="Trial (\d+)">(\d+)<'
        links = re.findall(row_link, table)
        assert len(links) == 12 and all(len(set(ids)) == 1 for ids in links), links


def test_points_follow_the_grid_even_when_the_sweep_runs_in_random_order(alice, units_job) -> None:
    grid = {"rate": ["1mbit", "2mbit"], "delay": ["0ms", "10ms", "20ms"]}
    sweep = _sweep(alice, grid, repetitions=3, order="random", seed=7)
    trials = list(sweep.trials.order_by("index"))
    places = trialpage.trial_places(sweep, trials)
    for t in trials:
        expected = grid["rate"].index(t.params["rate"]) * 3 + grid["delay"].index(t.params["delay"]) + 1
        p = places[t.pk]
        assert (p.point, p.points, p.repetition, p.repetitions) == (expected, 6, t.repetition + 1, 3)
        assert trialpage.trial_place(t) == p


def test_a_failed_trials_page_shows_why_it_failed(client_for, alice, units_job) -> None:
    """Issue 33: the attempt log's entries carry ``reason`` and no ``error`` key, and the page's
    ``a.reason|default:a.error`` made every failed trial a "Server Error (500)"."""
    trial = _sweep(alice, {"rate": ["1mbit"]}).trials.get()
    type(trial).objects.filter(pk=trial.pk).update(status="running", attempts=1, host_name="lab1")
    trial.refresh_from_db()
    trial.mark_failed("iperf3 exited 1: the server never listened")
    resp = client_for(alice).get(f"/trials/{trial.pk}/")
    assert resp.status_code == 200, resp.status_code
    page = resp.content.decode()
    assert "iperf3 exited 1: the server never listened" in page
    log = page.split("Attempt log", 1)[1].split("</details>", 1)[0]
    assert "attempt 1 on lab1, ended while running: iperf3 exited 1: the server never listened" in log, log


def test_a_trials_log_is_readable_in_its_page(client_for, alice, units_job) -> None:
    """Issue 33: logs could only be downloaded. A failed trial's log opens in the page; terminal
    escapes do not reach it and a long log says where the rest is."""
    trial = _sweep(alice, {"rate": ["1mbit"]}).trials.get()
    type(trial).objects.filter(pk=trial.pk).update(status="running", attempts=1, host_name="lab1")
    trial.refresh_from_db()
    trial.mark_failed("x2go session did not start")
    _artifact(trial, "log", "x2go.log", b"pyhoca: connecting\r\n\x1b[31mError: auth failed <script>\x1b[0m\n")
    _artifact(trial, "log", "long.log", b"line\n" * 20000)
    page = client_for(alice).get(f"/trials/{trial.pk}/").content.decode()
    first = page.split('data-log="', 1)[1].split("</details>", 1)[0]
    assert first.split(">", 1)[0].endswith(" open") or " open>" in first.split("<summary>", 1)[0]
    assert "pyhoca: connecting\n\ufffd[31mError: auth failed &lt;script&gt;\ufffd[0m" in first
    assert "\x1b" not in page and "<script>" not in first
    second = page.split('data-log="', 2)[2].split("</details>", 1)[0]
    assert "the first 64 KiB" in second and second.count("line\n") == 64 * 1024 // 5


# ---- a trace link's log ---------------------------------------------------------------------------


def test_a_trace_links_log_is_drawn_in_100_ms_bins_and_a_broken_one_says_why(
    client_for, alice, units_job
) -> None:
    from qoelab.emulation.linklog import ARTIFACT

    trial = _sweep(alice, {"rate": ["1mbit"]}).trials.get()
    # 250 ms of a direction: one 1500-byte opportunity per ms, two of three used; no queue at first.
    n = 250
    log = {"version": 1, "bin_ms": 1, "directions": {"down": {
        "trace": "Verizon-LTE-short.down", "start_ms": 1000, "ms": n, "truncated": False,
        "offered_bytes": [1500] * n, "delivered_bytes": [1500 if i % 3 else 0 for i in range(n)],
        "queue_bytes": [-1] * n, "queue_delay_ms": [-1.0] * 100 + [2.5] * 150,
        "drops": [0] * n}}}  # fmt: skip
    _artifact(trial, "json", ARTIFACT, json.dumps(log).encode())
    page = client_for(alice).get(f"/trials/{trial.pk}/").content.decode()
    assert "<h2>Link log</h2>" in page and 'data-link-log="down-rate"' in page and "qoelab/linklog.js" in page
    data = json.loads(
        re.search(r'<script id="link-log-data" type="application/json">(.*?)</script>', page).group(1)
    )
    down = data["directions"]["down"]
    assert down["t_s"] == [1.0, 1.1, 1.2] and down["capacity_bps"] == [12e6, 12e6, 6e6]
    assert down["throughput_bps"][0] == pytest.approx(66 * 1500 * 8 / 0.1)
    assert down["queue_delay_ms"] == [None, 2.5, 2.5]
    # A log that is not one says so, and draws nothing.
    other = _sweep(alice, {"rate": ["2mbit"]}).trials.get()
    _artifact(other, "json", ARTIFACT, b'{"directions": {"down": {"ms": 3}}}')
    page = client_for(alice).get(f"/trials/{other.pk}/").content.decode()
    assert 'data-field="link-log-error"' in page and "qoelab/linklog.js" not in page
    # A trial without a trace link has no such section.
    plain = _sweep(alice, {"rate": ["3mbit"]}).trials.get()
    assert "<h2>Link log</h2>" not in client_for(alice).get(f"/trials/{plain.pk}/").content.decode()
