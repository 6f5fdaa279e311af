"""Mahimahi-format link traces (qoelab.emulation.traces): the shipped library, bad files, synthetic
traces and ``qoelab link trace`` (issue 37, first part: the traces; the trace link comes next)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from qoelab.emulation import traces

QOELAB = Path(sys.executable).with_name("qoelab")


def test_the_library_is_what_its_readme_says() -> None:
    table = {}
    for line in (traces.LIBRARY / "README.md").read_text().splitlines():
        m = re.match(r"\| (\S+\.(?:down|up)) \| ([\d,]+) \| ([\d.]+) s \| ([\d.]+) Mbit/s \|", line)
        if m:
            table[m[1]] = (int(m[2].replace(",", "")), float(m[3]), float(m[4]))
    found = {t.name: t for t in traces.library()}
    assert set(found) == set(table) and len(table) == 4
    for name, (lines, period_s, mbps) in table.items():
        t = found[name]
        assert (t.lines, t.period_ms / 1000, round(t.mean_bps / 1e6, 2)) == (lines, period_s, mbps), name
    lte = found["Verizon-LTE-short.down"]
    series = lte.series_bps(100)
    assert series.size == 1400 and series.mean() == pytest.approx(lte.mean_bps, rel=1e-9)
    assert series.max() > 4 * series.mean()  # a cellular link: bursts far above its mean
    assert traces.load("Verizon-LTE-short.down").sha256 == lte.sha256  # by library name


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "t: empty"),
        ("\n\n", "t: empty"),
        ("1\n3\n2\n", "t: line 3: 2 comes after 3"),
        ("1\n2.5\n", "t: line 2: '2.5' is not a whole number"),
        ("1\n-4\n", "t: line 2: '-4' is negative"),
        ("0\n0\n", "t: its last line is 0 ms"),
        ("1\n" + "x" * 10, "is not a whole number"),
        ("5\n999999999999\n", "t: line 2: 999999999999 ms is beyond the limit of one day"),
    ],
)
def test_a_bad_trace_is_one_sentence_naming_its_line(text: str, message: str) -> None:
    with pytest.raises(traces.TraceError, match=re.escape(message)):
        traces.parse(text, "t")


def test_a_trace_over_the_size_bound_is_refused_before_it_is_read(tmp_path: Path) -> None:
    big = tmp_path / "big.trace"
    with open(big, "wb") as f:
        f.truncate(traces.MAX_TRACE_BYTES + 1)
    with pytest.raises(traces.TraceError, match=f"big.trace: {traces.MAX_TRACE_BYTES + 1} bytes is over"):
        traces.load(big)
    with pytest.raises(traces.TraceError, match="cannot read it"):
        traces.load(tmp_path / "missing.trace")


def test_synthetic_traces_offer_their_rates_to_one_packet() -> None:
    constant = traces.make_constant(10e6, 1000)
    assert constant.period_ms == 1000 and constant.lines == 833  # 10 Mbit in 1500-byte packets
    steps = traces.make_steps([1e6, 5e6, 2e6], 1000)
    per_second = steps.series_bps(1000)
    # Within two packets a window: credit carries over a step, and an opportunity at a step's last
    # millisecond is stamped with the next one.
    assert np.allclose(per_second, [1e6, 5e6, 2e6], atol=2 * 1500 * 8)
    outage = traces.make_onoff(5e6, 4000, 1000)
    windows = outage.series_bps(100)
    assert windows[:40].min() > 0 and windows[40:49].max() == 0  # the outage (its marker is the last line)
    assert outage.mean_bps == pytest.approx(4e6, rel=0.002)
    saw = traces.make_sawtooth(1e6, 10e6, 2000, steps=10)
    assert saw.series_bps(200)[0] < saw.series_bps(200)[-2]
    csv = traces.make_from_csv("time_s,rate_bps\n0,1e6\n1,4e6\n2,0\n", step_ms=100)
    assert csv.period_ms == 2000 and csv.mean_bps == pytest.approx(2.5e6, rel=0.001)
    with pytest.raises(traces.TraceError, match="line 3: time 0.5 s does not come after 1 s"):
        traces.make_from_csv("0,1e6\n1,2e6\n0.5,3e6\n")
    with pytest.raises(traces.TraceError, match="no opportunity at all"):
        traces.make_constant(0, 1000)


def test_the_cli_describes_the_library_and_writes_a_trace_it_can_read_back(tmp_path: Path) -> None:
    info = subprocess.run([str(QOELAB), "link", "trace", "info", "--json"], capture_output=True, text=True,
                          timeout=60, check=True)  # fmt: skip
    assert {r["name"] for r in json.loads(info.stdout)} == {t.name for t in traces.library()}
    out = tmp_path / "onoff.trace"
    argv = [
        "link",
        "trace",
        "make",
        "onoff",
        "--rate",
        "5mbit",
        "--on",
        "4s",
        "--off",
        "1s",
        "--out",
        str(out),
    ]
    made = subprocess.run([str(QOELAB), *argv], capture_output=True, text=True, timeout=60)
    assert made.returncode == 0 and "period 5.000 s" in made.stdout, made.stderr
    assert traces.load(out).describe() == traces.make_onoff(5e6, 4000, 1000).describe() | {
        "name": "onoff.trace"
    }
    bad = tmp_path / "bad.trace"
    bad.write_text("1\n3\n2\n")
    res = subprocess.run([str(QOELAB), "link", "trace", "info", str(bad)], capture_output=True, text=True,
                         timeout=60)  # fmt: skip
    assert res.returncode == 2 and "bad.trace: line 3: 2 comes after 3" in res.stderr
    missing = subprocess.run([str(QOELAB), "link", "trace", "make", "constant", "--out", str(out)],
                             capture_output=True, text=True, timeout=60)  # fmt: skip
    assert missing.returncode == 2 and "--rate: needed for a constant trace" in missing.stderr


@pytest.mark.parametrize("example", ["rd_qoe_lte.yaml", "thinclient_lte.yaml"])
def test_the_trace_link_examples_are_valid_sweeps_over_library_traces(example):
    import itertools

    from qoelab import jobs, sweeps
    from qoelab.params import validate_params

    body = sweeps.load_spec(Path(__file__).resolve().parents[2] / "examples" / example).body()
    job = jobs.get(body["job_type"])
    for combo in itertools.product(*body["grid"].values()):
        params = validate_params(job.params, {**body["fixed"], **dict(zip(body["grid"], combo, strict=True))})
        profile = params.to_profile()
        assert profile.down.trace is not None and profile.down.rate_bps is None


def test_an_uploaded_trace_is_found_by_its_ref_once_fetched(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from qoelab.emulation.linkparams import LinkParams

    monkeypatch.setenv(traces.UPLOADS_ENV, str(tmp_path))
    with pytest.raises(traces.TraceError, match="has not fetched that uploaded trace"):
        traces.resolve("upload:7")
    # Accepted at submit without the file (the backend checks the ref is the researcher's) ...
    params = LinkParams(link_trace="upload:7", delay="10ms")
    with pytest.raises(Exception, match="has not fetched"):
        params.to_profile()
    # ... and replayed once the worker has fetched it, under its own name.
    text = "".join(f"{ms}\n" for ms in range(1, 11))
    path = traces.store_upload("upload:7", "train.down", text)
    assert path == tmp_path / "upload-7" / "train.down"
    assert traces.resolve("upload:7") == str(path)
    profile = params.to_profile()
    assert profile.trace_provenance()["down"] == {"name": "train.down", "sha256": traces.parse(text).sha256}
    # A new fetch of the same id replaces what was kept (ids belong to one backend's database).
    traces.store_upload("upload:7", "other.trace", text + "12\n")
    assert [p.name for p in (tmp_path / "upload-7").iterdir()] == ["other.trace"]
    with pytest.raises(traces.TraceError, match="line 2: 1 comes after 5"):
        traces.store_upload("upload:8", "bad.trace", "5\n1\n")
    for ref, name in (("upload:x", "a.trace"), ("upload:9", "../a.trace"), ("upload:9", ".hidden")):
        with pytest.raises(traces.TraceError, match="not an uploaded trace's reference and file name"):
            traces.store_upload(ref, name, text)
    with pytest.raises(ValueError, match="no such trace in the lab's library .*or upload:N"):
        LinkParams(link_trace="/etc/passwd")
