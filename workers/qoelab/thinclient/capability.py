"""Thin-client TCP's capability: the replay pair (tc-replay); the userspace link is its own flag."""

from __future__ import annotations

import os

from qoelab.jobtype import HostProbe
from qoelab.thinclient.replay import NOT_BUILT, binary


def probe(found: HostProbe) -> None:
    found.set("thinclient", os.access(binary(), os.X_OK), NOT_BUILT)
