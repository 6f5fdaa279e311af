"""A rating set as parallel arrays (one entry per vote), read from a long CSV or P.910's matrix layout.

- **long**: a CSV with a header and the columns ``rater,stimulus,score``, optionally ``condition``
  (what the stimulus shows, e.g. a protocol at a delay), ``reference`` (the stimulus id of its
  hidden reference, for ACR-HR) and ``repeat`` (0, 1, … when a rater saw a stimulus more than once).
  A missing vote is a missing line.
- **matrix**: the layout of ITU-T P.910 Appendix VI's reference code: one row per stimulus, one
  column per rater, comma-separated, ``nan`` for a missing vote, no header. Stimulus ids are the
  row indexes and rater ids the column indexes, from 0.

A bad file raises :class:`VotesError` with one sentence naming the line and column.
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from qoelab.errors import QoelabError

REQUIRED = ("rater", "stimulus", "score")
OPTIONAL = ("condition", "reference", "repeat", "gold", "played_s", "clip_s")
# Per-vote numbers beside the score (NaN where a row leaves them empty): a gold item's expected
# score, and the seconds the rater played the clip against its length (P.910's crowdsourcing rules).
PER_VOTE = ("gold", "played_s", "clip_s")


class VotesError(QoelabError):
    """A rating file or rating set the analysis cannot use, said in one sentence."""


@dataclass(frozen=True)
class Votes:
    """Opinion scores: vote k is ``score[k]`` by ``raters[rater[k]]`` on ``stimuli[stimulus[k]]``.

    Stimuli and raters keep their input order (first appearance; row and column order for a matrix).
    ``conditions`` and ``references`` are per stimulus (empty string: not given).
    """

    raters: tuple[str, ...]
    stimuli: tuple[str, ...]
    rater: np.ndarray
    stimulus: np.ndarray
    score: np.ndarray
    conditions: tuple[str, ...] = ()
    references: tuple[str, ...] = ()
    extra: dict[str, np.ndarray] = field(default_factory=dict)  # PER_VOTE columns the file has

    def __post_init__(self) -> None:
        if not (len(self.rater) == len(self.stimulus) == len(self.score)):
            raise ValueError("rater, stimulus and score must have one entry per vote")
        if any(len(a) != len(self.score) for a in self.extra.values()):
            raise ValueError("a per-vote column must have one entry per vote")

    def column(self, name: str) -> np.ndarray | None:
        """A per-vote column (``gold``, ``played_s``, ``clip_s``), None when the file has none."""
        return self.extra.get(name)

    @property
    def n(self) -> int:
        return int(self.score.size)

    def votes_per_stimulus(self) -> np.ndarray:
        return np.bincount(self.stimulus, minlength=len(self.stimuli))

    def votes_per_rater(self) -> np.ndarray:
        return np.bincount(self.rater, minlength=len(self.raters))

    def rater_means(self) -> np.ndarray:
        """raters × stimuli: each rater's mean vote on each stimulus (NaN where none; repeats averaged)."""
        shape = (len(self.raters), len(self.stimuli))
        total, count = np.zeros(shape), np.zeros(shape)
        np.add.at(total, (self.rater, self.stimulus), self.score)
        np.add.at(count, (self.rater, self.stimulus), 1)
        with np.errstate(invalid="ignore", divide="ignore"):
            return total / count

    def select(self, keep: np.ndarray) -> Votes:
        """The same raters and stimuli (ids and order unchanged) with only the votes where ``keep``."""
        return Votes(
            self.raters, self.stimuli, self.rater[keep], self.stimulus[keep], self.score[keep],
            self.conditions, self.references, {k: a[keep] for k, a in self.extra.items()},
        )  # fmt: skip


def only_rated(v: Votes) -> Votes:
    """The same votes without the stimuli none of them is on (gold items once their votes are set
    apart); the remaining stimuli keep their order."""
    rated = np.bincount(v.stimulus, minlength=len(v.stimuli)) > 0
    if rated.all():
        return v
    keep = np.flatnonzero(rated)
    new = np.full(len(v.stimuli), -1, dtype=np.intp)
    new[keep] = np.arange(keep.size)
    return Votes(
        v.raters, tuple(v.stimuli[j] for j in keep), v.rater, new[v.stimulus], v.score,
        tuple(v.conditions[j] for j in keep) if v.conditions else (),
        tuple(v.references[j] for j in keep) if v.references else (), dict(v.extra),
    )  # fmt: skip


def from_mapping(matrix: Mapping[Hashable, Mapping[Hashable, float]]) -> tuple[Votes, list[Hashable]]:
    """Votes from ``{rater: {stimulus: score}}`` (a campaign's matrix) and the raters' keys by index.

    Raters keep the mapping's order and stimuli their first appearance; ids are ``str(key)``.
    """
    raters = list(matrix)
    stimuli: dict[Hashable, int] = {}
    r_idx, s_idx, scores = [], [], []
    for i, rater in enumerate(raters):
        for stimulus, score in matrix[rater].items():
            r_idx.append(i)
            s_idx.append(stimuli.setdefault(stimulus, len(stimuli)))
            scores.append(float(score))
    votes = Votes(
        tuple(str(r) for r in raters), tuple(str(s) for s in stimuli),
        np.array(r_idx, dtype=np.intp), np.array(s_idx, dtype=np.intp), np.array(scores, dtype=float),
    )  # fmt: skip
    return votes, raters


def from_matrix(matrix: np.ndarray) -> Votes:
    """Votes from a stimuli × raters array with NaN for a missing vote (ids are the indexes)."""
    m = np.asarray(matrix, dtype=float)
    if m.ndim != 2:
        raise VotesError(f"a rating matrix has two dimensions (stimuli × raters), not {m.ndim}")
    stim, rater = np.nonzero(~np.isnan(m))
    return Votes(
        tuple(str(i) for i in range(m.shape[1])), tuple(str(j) for j in range(m.shape[0])),
        rater.astype(np.intp), stim.astype(np.intp), m[stim, rater],
    )  # fmt: skip


def _number(text: str, where: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise VotesError(f"{where}: {text.strip()[:40]!r} is not a number") from None
    if math.isinf(value):
        raise VotesError(f"{where}: {text.strip()!r} is not a finite score")
    return value


def _check_scale(value: float, where: str, scale: tuple[float, float] | None) -> None:
    if scale is not None and not scale[0] <= value <= scale[1]:
        raise VotesError(f"{where}: score {value:g} is outside the scale {scale[0]:g}..{scale[1]:g}")


def parse_matrix(text: str, *, name: str = "matrix", scale: tuple[float, float] | None = None) -> Votes:
    rows: list[list[float]] = []
    width = None
    for lineno, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        cells = line.split(",")
        if width is None:
            width = len(cells)
        elif len(cells) != width:
            raise VotesError(f"{name}: line {lineno} has {len(cells)} columns, line 1 has {width}")
        row = []
        for col, cell in enumerate(cells, start=1):
            where = f"{name}: line {lineno}, column {col}"
            if cell.strip().lower() == "nan":
                row.append(math.nan)
                continue
            value = _number(cell, where)
            _check_scale(value, where, scale)
            row.append(value)
        rows.append(row)
    if not rows:
        raise VotesError(f"{name}: no rows (one row per stimulus, one column per rater)")
    return from_matrix(np.array(rows, dtype=float))


def parse_long(text: str, *, name: str = "ratings", scale: tuple[float, float] | None = None) -> Votes:
    reader = csv.reader(io.StringIO(text))
    header = next(reader, None)
    if header is None:
        raise VotesError(
            f"{name}: empty file (a long rating file starts with the header rater,stimulus,score)"
        )
    cols = [h.strip().lower() for h in header]
    missing = [c for c in REQUIRED if c not in cols]
    if missing:
        raise VotesError(
            f"{name}: line 1 has no column {', '.join(repr(c) for c in missing)} "
            f"(a long rating file has the columns rater,stimulus,score and optionally {','.join(OPTIONAL)})"
        )
    unknown = [h for h in cols if h not in REQUIRED + OPTIONAL]
    if unknown:
        raise VotesError(
            f"{name}: line 1: unknown column {unknown[0]!r} (known: {','.join(REQUIRED + OPTIONAL)})"
        )
    at = {c: cols.index(c) for c in cols}
    raters: dict[str, int] = {}
    stimuli: dict[str, int] = {}
    conditions: dict[str, tuple[str, int]] = {}
    references: dict[str, tuple[str, int]] = {}
    seen: dict[tuple[str, str, str], int] = {}
    r_idx: list[int] = []
    s_idx: list[int] = []
    scores: list[float] = []
    extra: dict[str, list[float]] = {c: [] for c in PER_VOTE if c in at}
    for lineno, row in enumerate(reader, start=2):
        if not any(cell.strip() for cell in row):
            continue
        if len(row) != len(cols):
            raise VotesError(f"{name}: line {lineno} has {len(row)} columns, the header has {len(cols)}")
        cell = {c: row[i].strip() for c, i in at.items()}
        for c in ("rater", "stimulus", "score"):
            if not cell[c]:
                raise VotesError(f"{name}: line {lineno}, column {c!r} is empty")
        where = f"{name}: line {lineno}, column 'score'"
        if cell["score"].lower() == "nan":
            raise VotesError(f"{where}: a missing vote is a missing line, not 'nan'")
        value = _number(cell["score"], where)
        _check_scale(value, where, scale)
        rater, stim, repeat = cell["rater"], cell["stimulus"], cell.get("repeat", "")
        key = (rater, stim, repeat)
        if key in seen:
            again = f" (repeat {repeat!r})" if repeat else ""
            raise VotesError(
                f"{name}: line {lineno} is a second vote of rater {rater!r} on stimulus {stim!r}{again}, "
                f"the first is on line {seen[key]}; mark repeated presentations in a 'repeat' column"
            )
        seen[key] = lineno
        for column, store in (("condition", conditions), ("reference", references)):
            given = cell.get(column, "")
            if stim in store and store[stim][0] != given:
                raise VotesError(
                    f"{name}: line {lineno}, column {column!r}: stimulus {stim!r} has {column} {given!r} "
                    f"here and {store[stim][0]!r} on line {store[stim][1]}"
                )
            store.setdefault(stim, (given, lineno))
        for column, values in extra.items():
            given = cell[column]
            number = math.nan if not given else _number(given, f"{name}: line {lineno}, column {column!r}")
            if column == "gold" and given:
                _check_scale(number, f"{name}: line {lineno}, column 'gold'", scale)
            elif given and number < 0:
                raise VotesError(f"{name}: line {lineno}, column {column!r}: {given} seconds is below 0")
            values.append(number)
        r_idx.append(raters.setdefault(rater, len(raters)))
        s_idx.append(stimuli.setdefault(stim, len(stimuli)))
        scores.append(value)
    if not scores:
        raise VotesError(f"{name}: no votes after the header")
    for ref, lineno in references.values():
        if ref and ref not in stimuli:
            raise VotesError(
                f"{name}: line {lineno}, column 'reference': {ref!r} is not a stimulus of this file"
            )
    return Votes(
        tuple(raters), tuple(stimuli), np.array(r_idx, dtype=np.intp), np.array(s_idx, dtype=np.intp),
        np.array(scores, dtype=float),
        tuple(conditions[s][0] for s in stimuli) if "condition" in at else (),
        tuple(references[s][0] for s in stimuli) if "reference" in at else (),
        {c: np.array(values, dtype=float) for c, values in extra.items()},
    )  # fmt: skip


def read(path: str | Path, fmt: str = "long", *, scale: Sequence[float] | None = None) -> Votes:
    """Read ``path`` in ``fmt`` ("long" or "matrix"); ``scale`` (low, high) bounds every score."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8-sig")
    except OSError as err:
        raise VotesError(f"{p}: cannot read it ({err.strerror or err})") from None
    except UnicodeDecodeError:
        raise VotesError(f"{p}: not UTF-8 text (a rating file is a CSV)") from None
    bounds = (float(scale[0]), float(scale[1])) if scale is not None else None
    if fmt == "long":
        return parse_long(text, name=p.name, scale=bounds)
    if fmt == "matrix":
        return parse_matrix(text, name=p.name, scale=bounds)
    raise VotesError(f"format {fmt!r} is not one of: long, matrix")


def hidden_reference(v: Votes, top: float = 5.0) -> tuple[Votes, list[str]]:
    """ACR with hidden reference (ITU-T P.910): each vote on a test stimulus becomes its differential
    score ``vote - the same rater's vote on its reference + top`` (``top``: the scale's best grade).

    The result holds the test stimuli only (those with a ``reference``; a reference itself is not
    scored), in input order. A rater's repeated reference votes count as their mean; a test vote whose
    rater never rated its reference is left out, and the returned notes say how many were.
    """
    if not v.references or not any(v.references):
        raise VotesError("ACR-HR needs a 'reference' column naming each test stimulus' hidden reference")
    index = {s: j for j, s in enumerate(v.stimuli)}
    ref_of = np.array([index.get(ref, -1) if ref else -1 for ref in v.references], dtype=np.intp)
    tests = [j for j in range(len(v.stimuli)) if ref_of[j] >= 0 and ref_of[j] != j]
    mean = v.rater_means()
    new_index = {j: k for k, j in enumerate(tests)}
    keep = np.array([new_index.get(int(j), -1) >= 0 for j in v.stimulus], dtype=bool)
    ref_votes = mean[v.rater, ref_of[v.stimulus]] if v.n else np.array([])
    usable = keep & ~np.isnan(ref_votes)
    missing = int((keep & np.isnan(ref_votes)).sum())
    notes = (
        [f"{missing} test vote(s) left out: the rater did not rate the hidden reference"] if missing else []
    )
    if not usable.any():
        raise VotesError("ACR-HR: no test vote has its rater's vote on the hidden reference")
    stim = np.array([new_index[int(j)] for j in v.stimulus[usable]], dtype=np.intp)
    return (
        Votes(
            v.raters, tuple(v.stimuli[j] for j in tests), v.rater[usable], stim,
            v.score[usable] - ref_votes[usable] + top,
            tuple(v.conditions[j] for j in tests) if v.conditions else (),
            tuple(v.references[j] for j in tests),
            {k: a[usable] for k, a in v.extra.items()},
        ),
        notes,
    )  # fmt: skip


def differential(
    matrix: Mapping[Hashable, Mapping[Hashable, float]],
    reference_of: Mapping[Hashable, Hashable],
    top: float = 5.0,
) -> tuple[dict[Hashable, dict[Hashable, float]], list[str]]:
    """``hidden_reference`` on a campaign's ``{rater: {unit: vote}}``: each test unit's vote becomes
    its differential score against the same rater's vote on ``reference_of[unit]`` (which the
    mapping holds too). Returns ``{rater: {test unit: score}}`` (raters left without a score are
    absent) and the notes; no test vote with its reference gives an empty mapping and a note.
    """
    votes, raters = from_mapping(matrix)
    units = {str(u): u for row in matrix.values() for u in row}
    refs = tuple(str(reference_of[units[s]]) if units[s] in reference_of else "" for s in votes.stimuli)
    try:
        scored, notes = hidden_reference(replace(votes, references=refs), top)
    except VotesError as err:
        return {}, [str(err)]
    out: dict[Hashable, dict[Hashable, float]] = {}
    for r, s, x in zip(scored.rater, scored.stimulus, scored.score, strict=True):
        out.setdefault(raters[int(r)], {})[units[scored.stimuli[int(s)]]] = float(x)
    return out, notes
