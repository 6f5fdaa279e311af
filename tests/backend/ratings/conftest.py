"""Fixtures of the rating-campaign tests: a demo sweep of four conditions, its recordings, an open
campaign over them, and evaluator invitations."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from rating_helpers import LINKS, POINTS


@pytest.fixture
def sweep(alice: Any) -> Any:
    from ratings.demo import demo_sweep

    return demo_sweep(alice, POINTS, links=LINKS)


@pytest.fixture
def recorded_sweep(sweep: Any, videos: dict[str, Path]) -> Any:
    from ratings.demo import add_video_artifact

    for trial in sweep.trials.all():
        add_video_artifact(trial, videos["reference"], reference=True)
        add_video_artifact(trial, videos["degraded"])
    return sweep


@pytest.fixture
def campaign(alice: Any, recorded_sweep: Any) -> Any:
    from ratings import campaigns

    c = campaigns.create_campaign(alice, name="c1", sweep=recorded_sweep, seed=7)
    return campaigns.open_campaign(c)


@pytest.fixture
def invited(campaign: Any) -> Callable[[int], list[tuple[Any, str]]]:
    from ratings import invitations

    def make(n: int = 2) -> list[tuple[Any, str]]:
        return invitations.invite(campaign, count=n)

    return make
