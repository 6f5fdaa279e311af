"""Imported studies: a rating set from anywhere becomes a read-only study with a campaign-like
results page, chart, CSV and API (issue 36 item 2). Files are the public sets of tests/data/ratings."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from ratings.models import ImportedStudy

DATA = Path(__file__).resolve().parents[1] / "data" / "ratings"


def upload(client: Any, file_name: str, text: str, **fields: Any) -> Any:
    body = {"name": "study", "file_format": "long", "method": "acr", "scale_low": 1, "scale_high": 5,
            "source": "", **fields}  # fmt: skip
    body["file"] = SimpleUploadedFile(file_name, text.encode(), "text/csv")
    return client.post("/campaigns/studies/new/", body)


@pytest.mark.django_db
def test_the_p910_sample_imported_through_the_page_shows_the_recommendations_scores(
    alice: Any, client_for: Any
) -> None:
    """P.910 Appendix VI's sample matrix, uploaded as a researcher would: the study's model scores
    and rater biases are the Recommendation's reference output (to 1e-4), on the page and in the API."""
    client = client_for(alice)
    text = (DATA / "p910_appvi_sample.csv").read_text()
    r = upload(
        client, "sample_data.csv", text, name="P.910 sample", file_format="matrix", source="ITU-T P.910"
    )
    assert r.status_code == 302, r.content.decode()[:2000]
    study = ImportedStudy.objects.get(name="P.910 sample")
    assert (study.owner, study.n_stimuli, study.n_raters, study.file_name) == (
        alice,
        79,
        26,
        "sample_data.csv",
    )
    assert study.n_votes == sum(x != "nan" for line in text.splitlines() for x in line.split(","))
    page = client.get(r["Location"])
    assert page.status_code == 200
    html = page.content.decode()
    assert "ACR MOS" in html and "Imported study (read-only)" in html and "Source: ITU-T P.910" in html
    expected = json.loads((DATA / "p910_appvi_expected.json").read_text())
    assert '<tr data-stimulus="0">' in html and f"{expected['mos_j'][0]:.3f}" in html
    api = client.get(f"/api/studies/{study.pk}/").json()
    assert api["quantity"] == "ACR MOS" and api["n_stimuli"] == 79
    model = api["analysis"]["p910"]
    np.testing.assert_allclose([s["mos"] for s in model["stimuli"]], expected["mos_j"], atol=1e-4, rtol=0)
    np.testing.assert_allclose([x["bias"] for x in model["raters"]], expected["bias_i"], atol=1e-4, rtol=0)
    # The chart's payload: the plain mean and the model, one point per stimulus, on the 1-5 scale.
    chart = json.loads(
        html.split('<script id="study-chart" type="application/json">')[1].split("</script>")[0]
    )
    assert [s["label"] for s in chart["series"]] == ["plain mean", "P.910 subject model"]
    assert len(chart["series"][1]["points"]) == 79 and (chart["y_min"], chart["y_max"]) == (1.0, 5.0)
    # Listed, and linked from the campaigns page.
    assert "P.910 sample" in client.get("/campaigns/studies/").content.decode()
    assert "/campaigns/studies/" in client.get("/campaigns/").content.decode()


@pytest.mark.django_db
def test_the_scores_csv_says_the_quantity_and_the_votes_csv_is_the_file_as_imported(
    alice: Any, client_for: Any
) -> None:
    client = client_for(alice)
    text = (DATA / "nflx_public.csv").read_text()
    assert upload(client, "nflx.csv", text, name="NFLX").status_code == 302
    study = ImportedStudy.objects.get(name="NFLX")
    votes = client.get(f"/campaigns/studies/{study.pk}/export/votes.csv")
    assert b"".join(votes.streaming_content).decode() == text
    scores = client.get(f"/campaigns/studies/{study.pk}/export/scores.csv")
    rows = list(csv.DictReader(io.StringIO(b"".join(scores.streaming_content).decode())))
    assert len(rows) == study.n_stimuli and {r["quantity"] for r in rows} == {"ACR MOS"}
    first = rows[0]
    assert first["stimulus"] == "BigBuckBunny_25fps" and first["condition"] == "BigBuckBunny"
    assert float(first["mean_ci_low"]) < float(first["mean"]) < float(first["mean_ci_high"])
    assert float(first["model_ci_low"]) < float(first["model_score"]) < float(first["model_ci_high"])


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("text", "fields", "field", "message"),
    [
        ("rater,stimulus,score\na,s1,4\na,s1,5\n", {}, "file", "line 3"),
        (
            "rater,stimulus,score\na,s1,9\n",
            {},
            "file",
            "line 2, column &#x27;score&#x27;: score 9 is outside the scale 1..5",
        ),
        ("rater,stimulus,score\na,s1,4\nb,s1,3\n", {"method": "acr-hr"}, "method", "reference"),
        ("rater,stimulus,score\na,s1,4\n", {"scale_low": 5, "scale_high": 1}, "scale_high", "must be above"),
        ("rater,stimulus\n", {}, "file", "score"),
    ],
)
def test_a_bad_file_is_refused_with_one_sentence_on_its_field_and_nothing_is_stored(
    alice: Any, client_for: Any, text: str, fields: dict, field: str, message: str
) -> None:
    r = upload(client_for(alice), "bad.csv", text, **fields)
    assert r.status_code == 400
    html = r.content.decode()
    errors = html.split(f'data-field="{field}"')[1].split("</ul>")[0]
    assert message in errors, errors
    assert not ImportedStudy.objects.exists()


@pytest.mark.django_db
def test_the_api_imports_from_text_refuses_bad_files_by_field_and_keeps_studies_private(
    alice: Any, bob: Any, api_client_for: Any
) -> None:
    api = api_client_for(alice)
    text = (DATA / "vqeg_hd3.csv").read_text()
    r = api.post(
        "/api/studies/", {"name": "HD3", "votes_csv": text, "file_name": "vqeg_hd3.csv"}, format="json"
    )
    assert r.status_code == 201, r.json()
    made = r.json()
    assert made["quantity"] == "ACR MOS" and made["analysis"]["p910"]["quantity"].startswith("ACR MOS by")
    assert made["n_raters"] == len(made["analysis"]["p910"]["raters"])
    bad = api.post(
        "/api/studies/", {"name": "x", "votes_csv": "rater,stimulus,score\na,s,x\n"}, format="json"
    )
    assert bad.status_code == 400
    assert bad.json()["errors"][0]["field"] == "votes_csv" and "line 2" in bad.json()["errors"][0]["message"]
    assert [s["name"] for s in api.get("/api/studies/").json()["results"]] == ["HD3"]
    other = api_client_for(bob)
    assert other.get(f"/api/studies/{made['id']}/").status_code == 404
    assert other.get("/api/studies/").json()["results"] == []
    assert api.delete(f"/api/studies/{made['id']}/").status_code == 204
    assert not ImportedStudy.objects.exists()
