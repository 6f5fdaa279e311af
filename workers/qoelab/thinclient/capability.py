"""Thin-client TCP's capability: the replay pair (tc-replay); the userspace link is its own flag."""

from __future__ import annotations

from qoelab import helpers
from qoelab.jobtype import HostProbe


def probe(found: HostProbe) -> None:
    found.set("thinclient", helpers.TC_REPLAY.available(), helpers.TC_REPLAY.not_built)
