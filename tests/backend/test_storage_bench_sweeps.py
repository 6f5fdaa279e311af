"""storage_bench on the backend: bad parameters are a 400 naming the field and the bound, a family's
foreign knobs are dropped (points that become equal run once), trials route by the target's
capabilities, and the thesis' charts draw from the summaries."""

from __future__ import annotations

import pytest

from experiments.models import Sweep, Trial
from results.services import ingest_result

pytestmark = pytest.mark.django_db


def spec(**over):
    body = {
        "experiment": {"name": "thesis 001"},
        "job_type": "storage_bench",
        "name": "realistic",
        "grid": {"target": ["nfs", "iscsi", "swift"]},
        "fixed": {"family": "batch", "threads": 4, "rtt": "50ms", "loss": "0.1%", "jitter": "10ms"},
        "repetitions": 1,
    }
    body.update(over)
    return body


@pytest.mark.parametrize(
    ("fixed", "field", "words"),
    [
        ({"threads": 65}, "fixed.threads", ("64",)),
        ({"family": "iozone"}, "fixed.family", ("metadata", "fileserver")),
        ({"rtt": "30s"}, "fixed.rtt", ("s",)),
        ({"delay": "25ms"}, "fixed.delay", ("rtt", "RTT/2")),
        ({"file_size": "2mb", "set_size": "1mb"}, "fixed.set_size", ("file_size",)),
        ({"meta_n": 0}, "fixed.meta_n", ("1",)),
        ({"scheduler": "cfq"}, "fixed.scheduler", ("bfq", "mq-deadline")),
        ({"time_limit": "0.5s"}, "fixed.time_limit", ("1",)),
        ({"rate": "500kbit"}, "fixed.rate", ("1mbit",)),
        ({"disk_rate": "0/100"}, "fixed.disk_rate", ("read rate", "1..100000 MiB/s")),
    ],
)
def test_a_bad_parameter_is_a_400_naming_it(alice, api_client_for, fixed, field, words) -> None:
    body = spec()
    body["fixed"] = {**body["fixed"], **fixed}
    resp = api_client_for(alice).post("/api/sweeps/", body, format="json")
    assert resp.status_code == 400, resp.content
    errors = {e["field"]: e["message"] for e in resp.json()["errors"]}
    assert field in errors, errors
    for w in words:
        assert w in errors[field], (errors[field], w)
    assert not Sweep.objects.exists() and not Trial.objects.exists()


def test_swift_refuses_a_form_other_than_default(alice, api_client_for) -> None:
    body = spec(grid={"target": ["swift"]})
    body["fixed"]["form"] = "sync"
    resp = api_client_for(alice).post("/api/sweeps/", body, format="json")
    assert resp.status_code == 400
    assert "default" in {e["field"]: e["message"] for e in resp.json()["errors"]}["fixed.form"]


def test_a_familys_foreign_knobs_are_dropped_and_equal_points_run_once(alice, api_client_for) -> None:
    """scheduler applies to iSCSI only: swept beside the target, NFS and Swift run once each."""
    body = spec(grid={"target": ["nfs", "iscsi", "swift"], "scheduler": ["mq-deadline", "bfq"]})
    body["fixed"].update(meta_n=10)  # a metadata knob: dropped from a batch trial
    resp = api_client_for(alice).post("/api/sweeps/", body, format="json")
    assert resp.status_code == 201, resp.content
    trials = list(Sweep.objects.get(pk=resp.json()["id"]).trials.all())
    assert sorted((t.params["target"], t.params.get("scheduler")) for t in trials) == [
        ("iscsi", "bfq"), ("iscsi", "mq-deadline"), ("nfs", None), ("swift", None)]  # fmt: skip
    assert all("meta_n" not in t.params for t in trials)
    swift = next(t for t in trials if t.params["target"] == "swift")
    assert {"storage.guest", "storage.swift", "userspace_link", "tcp_cc.cubic"} <= set(swift.requires)
    assert "storage.nfs" not in swift.requires
    # the thesis' convention and TCP (Fig. 3.2), resolved in SI units
    assert swift.resolved["rtt"] == pytest.approx(0.05) and swift.resolved["tcp_rmem_max"] == 16 << 20


def test_the_thesis_charts_draw_from_the_summaries(alice, api_client_for, client_for) -> None:
    body = spec(grid={"target": ["nfs", "swift"], "threads": [1, 16]})
    del body["fixed"]["threads"]
    resp = api_client_for(alice).post("/api/sweeps/", body, format="json")
    assert resp.status_code == 201, resp.content
    sweep = Sweep.objects.get(pk=resp.json()["id"])
    for t in sweep.trials.all():
        mib_s = (10.0 if t.params["target"] == "swift" else 1.0) * (2 if t.params["threads"] == 16 else 1)
        ingest_result(t, {"summary": {"mib_s": mib_s, "amplification": 1.1}})
        Trial.objects.filter(pk=t.pk).update(status="succeeded")
    data = client_for(alice).get(f"/sweeps/{sweep.pk}/chart.json?preset=fig46").json()
    panels = data.get("panels", [data])
    got = {(s["label"], p["x"]): p["mean"] for panel in panels for s in panel["series"] for p in s["points"]}
    assert len(got) == 4, data
    swift = [v for (label, _), v in got.items() if "swift" in label]
    assert sorted(swift) == [10.0, 20.0], got


def test_the_macro_tables_sit_in_the_thesis_layout_beside_its_numbers(alice, api_client_for, client_for):
    """Table 6.2's layout: a row per network, a column per system, mean ± CI (n) and the thesis'."""
    grid = {"target": ["nfs", "iscsi"], "rtt": ["0ms", "50ms"], "scheduler": ["bfq", "mq-deadline"]}
    body = spec(grid=grid, repetitions=2)
    body["fixed"] = {"family": "varmail", "seconds": "60s"}
    resp = api_client_for(alice).post("/api/sweeps/", body, format="json")
    assert resp.status_code == 201, resp.content
    sweep = Sweep.objects.get(pk=resp.json()["id"])
    seen: set[tuple] = set()
    for t in sweep.trials.order_by("pk"):
        iops = {"nfs": 400.0, "iscsi": 3000.0}[t.params["target"]] / (10 if t.params["rtt"] == "50ms" else 1)
        point = (t.params["target"], t.params["rtt"], t.params.get("scheduler"))
        ingest_result(t, {"summary": {"iops": iops + (10 if point in seen else 0)}})  # repetitions: +0, +10
        seen.add(point)
        Trial.objects.filter(pk=t.pk).update(status="succeeded")
    page = client_for(alice).get(f"/sweeps/{sweep.pk}/")
    tables = {t["key"]: t for t in page.context["tables"]}
    assert list(tables) == ["table62"], tables  # no PostMark or fileserver trials: no such tables
    t = tables["table62"]
    assert t["columns"] == ["NFS", "iSCSI bfq (CFQ)", "iSCSI mq-deadline (deadline)"]
    assert [r["label"] for r in t["rows"]] == ["100 Mbit/s ideal", "100 Mbit/s +50 ms"]
    nfs_ideal = t["rows"][0]["cells"][0]
    assert nfs_ideal["n"] == 2 and nfs_ideal["mean"] == "405" and nfs_ideal["reference"] == "463"
    assert t["rows"][1]["cells"][2]["reference"] == "629" and t["rows"][1]["cells"][2]["n"] == 2
    api = api_client_for(alice).get(f"/api/sweeps/{sweep.pk}/tables/").json()
    assert api["tables"] == page.context["tables"], api
    assert api_client_for(alice).get("/api/sweeps/999999/tables/").status_code == 404
    html = page.content.decode()
    assert (
        'data-table-key="table62"' in html
        and "Table 6.2: FileBench varmail (IOPS)" in html
        and "[3817]" in html
    )


def test_a_sweep_no_worker_can_boot_a_guest_for_waits_and_says_why(alice, api_client_for, make_host):
    from experiments import services

    resp = api_client_for(alice).post("/api/sweeps/", spec(grid={"target": ["nfs"]}), format="json")
    assert resp.status_code == 201, resp.content
    no_guest = {"netns": True, "userspace_link": True, "storage.nfs": True, "tcp_cc.cubic": True,
                "storage.guest": False}  # fmt: skip
    make_host("noguest", no_guest)
    blocked = services.progress(Sweep.objects.get(pk=resp.json()["id"]))["blocked"]
    assert blocked.startswith("no live worker has capability storage.guest"), blocked


def test_the_findings_judge_each_host_cpus_trials_apart(alice, api_client_for) -> None:
    """Under TCG the guest client is as fast as the host: two CPUs' trials are two scopes, not one."""
    body = spec(grid={"target": ["nfs"], "rtt": ["0ms", "20ms", "50ms"]}, repetitions=4)
    body["fixed"] = {"family": "metadata", "meta_n": 1000}
    resp = api_client_for(alice).post("/api/sweeps/", body, format="json")
    assert resp.status_code == 201, resp.content
    sweep = Sweep.objects.get(pk=resp.json()["id"])
    for t in sweep.trials.all():
        rtt_ms = {"0ms": 0, "20ms": 20, "50ms": 50}[t.params["rtt"]]
        fast = t.repetition <= 2  # the Xeon answers in 2 RTT per operation, the EPYC in 1 RTT + 30 ms
        ms = 2 * rtt_ms + 1 + 0.1 * t.repetition if fast else rtt_ms + 30 + 0.1 * t.repetition
        ingest_result(t, {"summary": {f"{k}_ms_per_op": ms for k in ("mkdir", "touch", "unlink", "rmdir")}})
        # The Xeon's row names its clock too (BogoMIPS), the EPYC's only its model.
        cpu = {"model": "Intel Xeon", "bogomips": "5199.99"} if fast else {"model": "AMD EPYC"}
        Trial.objects.filter(pk=t.pk).update(status="succeeded", provenance={"host_cpu": cpu})
    body = api_client_for(alice).get(f"/api/sweeps/{sweep.pk}/findings/?trials=1").json()
    nfs = [(f["scope"], f["verdict"]) for f in body["findings"] if f["name"] == "nfs_metadata_two_rtt"]
    xeon = "Intel Xeon @ 2.60 GHz"
    assert nfs == [({"host": "AMD EPYC"}, "does not hold"), ({"host": xeon}, "holds")], body
    assert {t["host"]["cpu"] for t in body["trials"]} == {"AMD EPYC", "Intel Xeon"}
    Trial.objects.filter(sweep=sweep).update(provenance={})  # trials from before jobs recorded a CPU
    body = api_client_for(alice).get(f"/api/sweeps/{sweep.pk}/findings/?trials=1").json()
    assert [f["scope"] for f in body["findings"] if f["name"] == "nfs_metadata_two_rtt"] == [{}]
    assert body["trials"][0]["host"] == {"cpu": None, "bogomips": None}


def test_the_metric_selectors_offer_what_the_sweep_reported_under_its_familys_heading(
    alice, api_client_for, client_for
) -> None:
    body = spec(grid={"target": ["nfs", "swift"]})
    body["fixed"] = {"family": "metadata", "meta_n": 10}
    sweep = Sweep.objects.get(pk=api_client_for(alice).post("/api/sweeps/", body, format="json").json()["id"])
    page = client_for(alice).get(f"/sweeps/{sweep.pk}/").content.decode()
    chart_y = page[page.index('<select id="chart-y"') : page.index("</select>", page.index('id="chart-y"'))]
    assert '<optgroup label="macrobenchmarks: PostMark, FileBench">' in chart_y  # nothing reported yet: all
    for t in sweep.trials.all():
        ingest_result(t, {"summary": {"mkdir_ms_per_op": 2.0, "mkdir_packets": 40.0, "cpu_client": 0.3}})
    page = client_for(alice).get(f"/sweeps/{sweep.pk}/").content.decode()
    chart_y = page[page.index('<select id="chart-y"') : page.index("</select>", page.index('id="chart-y"'))]
    assert chart_y.count("<option") == 3 and 'value="mib_s"' not in chart_y, chart_y
    assert chart_y.index('<optgroup label="metadata (per kind)">') < chart_y.index('value="mkdir_packets"')
    assert chart_y.index('<optgroup label="CPU">') < chart_y.index('value="cpu_client"')
    other = Sweep.objects.get(pk=api_client_for(alice).post("/api/sweeps/", body, format="json").json()["id"])
    query = f"job_type=storage_bench&sweeps={sweep.pk}&sweeps={other.pk}&y=iops&x=target"
    page = client_for(alice).get(f"/compare/?{query}").content.decode()
    cmp_y = page[page.index('<select id="cmp-y"') : page.index("</select>", page.index('id="cmp-y"'))]
    assert '<option value="iops" selected>FileBench personality IOPS (1/s)</option></optgroup>' in cmp_y
