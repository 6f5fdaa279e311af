"""Imported studies: a rating set from anywhere, read with the lab's parser and analysed like a campaign.

The file is parsed by ``qoelab.subjective.votes`` (the parser of ``qoelab ratings analyze``), so a bad
file gets the same one-sentence error naming its line and column, and nothing is stored. A stored
study is read-only: its analysis is computed from the kept file each time it is shown (a few ms for
the public sets in tests/data/ratings), by the plain mean and by the P.910 subject model side by
side, with the screening and Krippendorff's alpha of ``qoelab.subjective.report``.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterator
from typing import Any

from django.db import transaction

from qoelab.subjective import report, votes
from ratings.models import ImportedStudy

MAX_FILE_BYTES = 5 << 20  # 5 MiB: ~300 000 votes in the long format
MODELS = ("mean", "p910")  # shown side by side: the campaign's plain mean and the subject model


class StudyError(ValueError):
    """A rating set that cannot be imported; ``field`` names the form/API field at fault."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field, self.message = field, message


def decode(data: bytes, name: str) -> str:
    if len(data) > MAX_FILE_BYTES:
        raise StudyError("file", f"{name}: {len(data)} bytes is over the limit of {MAX_FILE_BYTES} bytes")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise StudyError("file", f"{name}: not UTF-8 text (a rating file is a CSV)") from None


def parse(text: str, file_format: str, scale: tuple[float, float], name: str = "ratings") -> votes.Votes:
    """The votes of ``text``, or StudyError with the parser's sentence (line and column)."""
    low, high = scale
    if "\x00" in text:  # PostgreSQL keeps no NUL in text, and no CSV has one
        raise StudyError("file", f"{name}: contains a NUL character (a rating file is a text CSV)")
    if not low < high:
        raise StudyError("scale_high", f"the scale's top ({high:g}) must be above its bottom ({low:g})")
    try:
        if file_format == "matrix":
            parsed = votes.parse_matrix(text, name=name, scale=scale)
        elif file_format == "long":
            parsed = votes.parse_long(text, name=name, scale=scale)
        else:
            raise StudyError("file_format", f"must be one of long, matrix, got {file_format!r}")
    except votes.VotesError as err:
        raise StudyError("file", str(err)) from None
    if parsed.n == 0:
        raise StudyError("file", f"{name}: no votes in the file")
    return parsed


@transaction.atomic
def import_study(
    owner: Any, *, name: str, text: str, file_format: str = "long", method: str = "acr",
    scale: tuple[float, float] = (1.0, 5.0), source: str = "", file_name: str = "",
) -> ImportedStudy:  # fmt: skip
    """Parse, check that the analysis runs (ACR-HR needs each stimulus' reference), then store."""
    parsed = parse(text, file_format, scale, file_name or "ratings")
    try:
        report.analyze(parsed, "mean", method=method, top=scale[1])
    except votes.VotesError as err:
        raise StudyError("method" if method == "acr-hr" else "file", str(err)) from None
    return ImportedStudy.objects.create(
        owner=owner, name=name, source=source, method=method, file_format=file_format,
        scale_low=scale[0], scale_high=scale[1], file_name=file_name, votes_csv=text,
        n_votes=parsed.n, n_raters=len(parsed.raters), n_stimuli=len(parsed.stimuli),
    )  # fmt: skip


def study_votes(study: ImportedStudy) -> votes.Votes:
    return parse(study.votes_csv, study.file_format, (study.scale_low, study.scale_high), study.file_name)


def analyze(study: ImportedStudy) -> dict[str, Any]:
    """Both analyses of the study's votes: ``{"mean": ..., "p910": ...}`` in ``qoelab ratings
    analyze --json``'s shape, or ``{"p910": {"error": ...}}`` where the model cannot fit these votes."""
    parsed = study_votes(study)
    out: dict[str, Any] = {}
    for model in MODELS:
        try:
            out[model] = report.analyze(parsed, model, method=study.method, top=study.scale_high)
        except votes.VotesError as err:
            out[model] = {"error": str(err)}
    return out


def rows(result: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per stimulus: the plain mean and the model's score beside it, each with its CI."""
    mean = result.get("mean", {}).get("stimuli", [])
    model = {s["id"]: s for s in result.get("p910", {}).get("stimuli", [])}
    return [{**s, "model": model.get(s["id"], {})} for s in mean]


def rater_rows(result: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per rater: screening (from the plain analysis) and the model's bias and inconsistency."""
    model = {r["id"]: r for r in result.get("p910", {}).get("raters", [])}
    return [{**r, "model": model.get(r["id"], {})} for r in result.get("mean", {}).get("raters", [])]


def chart_payload(study: ImportedStudy, result: dict[str, Any]) -> dict[str, Any]:
    """Per stimulus (input order, categorical x): the plain mean and the model's score with 95 % CIs,
    in the dashboard's chart format (window.qoelabCharts)."""
    quantity = report.METHODS[study.method]

    def series(label: str, stimuli: list[dict[str, Any]]) -> dict[str, Any]:
        points = [
            {"x": s["id"], "mean": s["mos"], "ci_low": s["ci_low"], "ci_high": s["ci_high"], "n": s["n"]}
            for s in stimuli
            if s["mos"] is not None
        ]
        return {"label": label, "points": points}

    sets = [series("plain mean", result["mean"].get("stimuli", []))]
    if "stimuli" in result.get("p910", {}):
        sets.append(series("P.910 subject model", result["p910"]["stimuli"]))
    # MOS and DCR scores live on the scale; an ACR-HR DMOS can leave it (a test rated above its
    # reference scores over the top), so its axis follows the data.
    fixed = {} if study.method == "acr-hr" else {"y_min": study.scale_low, "y_max": study.scale_high}
    return {
        "title": f"{study.name}: {quantity} per stimulus",
        "x_label": "stimulus",
        "y_label": quantity,
        "x_scale": 1,
        "y_scale": 1,
        **fixed,
        "x_ticks": "points",
        "series": sets,
    }


def scores_csv(study: ImportedStudy) -> Iterator[str]:
    """Per stimulus: both models' scores and intervals, and the quantity they are (a header row)."""
    result = analyze(study)
    quantity = report.METHODS[study.method]
    buf = io.StringIO()
    writer = csv.writer(buf)

    def flush() -> str:
        text = buf.getvalue()
        buf.seek(0)
        buf.truncate()
        return text

    writer.writerow(["stimulus", "condition", "n", "quantity", "mean", "mean_ci_low", "mean_ci_high",
                     "model_score", "model_ci_low", "model_ci_high"])  # fmt: skip
    yield flush()
    for r in rows(result):
        m = r["model"]
        writer.writerow([r["id"], r.get("condition", ""), r["n"], quantity, r["mos"], r["ci_low"],
                         r["ci_high"], m.get("mos"), m.get("ci_low"), m.get("ci_high")])  # fmt: skip
        yield flush()
