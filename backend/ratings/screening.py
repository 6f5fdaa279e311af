"""A campaign's screening and cleansing settings: which rules run, with which bounds (docs/ratings.md).

Stored on the campaign (``Campaign.screening``) and read by ``analysis.analyze``. Each rule names
the clause it comes from. The first three are the lab's original rules and stay on by default; the
others are off by default, so a campaign's exclusions do not change unless its researcher asks.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError


class _Rule(BaseModel):
    model_config = ConfigDict(extra="forbid")
    on: bool


class Correlation(_Rule):
    on: bool = True
    min_r: float = Field(0.75, ge=-1.0, le=1.0, description="exclude below this Pearson r with the others")


class Gold(_Rule):
    on: bool = True
    fail_at_or_below: int = Field(3, ge=1, le=4, description="a trap rated at or below this fails")


class Repeat(_Rule):
    on: bool = True
    max_difference: int = Field(1, ge=0, le=3, description="a repeat differing by more than this fails")


class VoteVariance(_Rule):
    on: bool = False
    min: float = Field(0.15, ge=0.0, le=4.0, description="exclude an evaluator whose votes vary less")


class Bt500(_Rule):
    on: bool = False


class OutlierVotes(_Rule):
    on: bool = False
    z: float = Field(3.29, ge=1.0, le=6.0, description="leave out single votes at |z| >= this")


class Playback(_Rule):
    on: bool = False
    max_share: float = Field(
        1.15, ge=1.0, le=5.0, description="exclude an evaluator who played more than this share of the clips"
    )


class Screening(BaseModel):
    model_config = ConfigDict(extra="forbid")
    correlation: Correlation = Correlation()
    gold: Gold = Gold()
    repeat: Repeat = Repeat()
    vote_variance: VoteVariance = VoteVariance()
    bt500: Bt500 = Bt500()
    outlier_votes: OutlierVotes = OutlierVotes()
    playback: Playback = Playback()


CLAUSES = {
    "correlation": "ITU-T P.913 subject screening (VQEG r1)",
    "gold": "gold items (ITU-T P.910 crowdsourcing; the thesis' reference-vs-reference trap)",
    "repeat": "consistency repeat (ITU-T P.910 crowdsourcing)",
    "vote_variance": "ITU-T P.910 crowdsourcing: vote variance",
    "bt500": "ITU-R BT.500 A1-2.3.1 kurtosis-based rejection",
    "outlier_votes": "ITU-T P.910: optional removal of single outlier votes",
    "playback": "ITU-T P.910 crowdsourcing: total playback (recorded campaigns)",
}


def default() -> dict[str, Any]:
    """The settings a campaign gets when none are given (a JSONField default: a fresh dict)."""
    return Screening().model_dump()


class ScreeningError(ValueError):
    """Settings that break a bound; ``errors`` are ``{"field", "message"}`` with the field's path."""

    def __init__(self, errors: list[dict[str, str]]) -> None:
        super().__init__("; ".join(f"{e['field']}: {e['message']}" for e in errors))
        self.errors = errors


def parse(raw: Any) -> Screening:
    """Validated settings from a campaign's stored or submitted dict (missing parts: the defaults)."""
    try:
        return Screening.model_validate(raw or {})
    except ValidationError as err:
        errors = []
        for e in err.errors():
            field = ".".join(["screening", *(str(x) for x in e["loc"])])
            errors.append({"field": field, "message": e["msg"]})
        raise ScreeningError(errors) from None


def describe(settings: Screening) -> list[dict[str, str]]:
    """The rules that run, each with its bound and clause, in the order of the settings."""
    s = settings
    out = []
    if s.correlation.on:
        out.append(f"correlation with the other evaluators r >= {s.correlation.min_r:g}")
    if s.gold.on:
        out.append(f"a reference-vs-reference trap rated above {s.gold.fail_at_or_below}")
    if s.repeat.on:
        out.append(f"a repeated condition answered within {s.repeat.max_difference}")
    if s.vote_variance.on:
        out.append(f"vote variance >= {s.vote_variance.min:g}")
    if s.bt500.on:
        out.append("BT.500 kurtosis-based rejection")
    if s.outlier_votes.on:
        out.append(f"single votes at |z| >= {s.outlier_votes.z:g} left out (cleansing, not exclusion)")
    if s.playback.on:
        out.append(f"videos played in all at most {s.playback.max_share:.0%} of their length")
    names = [k for k in CLAUSES if getattr(s, k).on]
    return [{"key": k, "rule": text, "clause": CLAUSES[k]} for k, text in zip(names, out, strict=True)]
