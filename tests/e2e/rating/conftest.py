"""Fixtures of the rating browser tests: an open live campaign over two conditions of one protocol."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest


@pytest.fixture
def open_live_campaign(
    lab_stack: Any, alice: Any, settings: Any, tmp_path: Path
) -> Callable[[str, str, int], tuple[Any, str]]:
    """``open_live_campaign(protocol, label, screens)`` -> (campaign, the evaluator's token): alice's
    live campaign at 10 Mbit/s 20 ms and 2 Mbit/s 50 ms, run by the real worker of ``lab_stack``."""
    from ratings import demo, services

    settings.MEDIA_ROOT = tmp_path / "media"
    settings.QOELAB_LIVE_SESSION_PROVIDER = "ratings.live_provider"

    def make(protocol: str, label: str, screens: int) -> tuple[Any, str]:
        points = [
            {"protocol": protocol, "rate": "10mbit", "delay": "20ms"},
            {"protocol": protocol, "rate": "2mbit", "delay": "50ms"},
        ]
        sweep = demo.demo_sweep(alice, points, name=f"live {protocol} demo")
        campaign = services.create_campaign(
            alice,
            name=f"e2e live {protocol}",
            mode="live",
            sweep=sweep,
            screens_per_condition=screens,
            seed=3,
        )
        campaign = services.open_campaign(campaign)
        ((_, token),) = services.invite(campaign, labels=[label])
        return campaign, token

    return make
