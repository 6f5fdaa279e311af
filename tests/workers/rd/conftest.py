"""Fixtures for the RD session tests: a real emulated link between two namespaces.

The prefix starts with ``rdt``, not ``ql``: a qoelab worker starting on this host cleans up every
``ql*`` trial it finds, which would tear down a test session running beside it.
"""

from __future__ import annotations

import os
import secrets
import shutil

import pytest


def _why_not() -> str | None:
    if os.geteuid() != 0:
        return "needs root to create network namespaces and start X servers"
    for tool, pkg in (
        ("Xvfb", "xvfb"),
        ("chromium", "chromium"),
        ("dumpcap", "tshark"),
        ("xdotool", "xdotool"),
    ):
        if shutil.which(tool) is None:
            return f"{tool} is not installed (Debian package {pkg})"
    return None


@pytest.fixture
def rd_prefix() -> str:
    return "rdt" + secrets.token_hex(3)


@pytest.fixture
def rd_link(rd_prefix):
    """An emulated 10 Mbit/s, 10 ms link (userspace backend on kernels without netem)."""
    reason = _why_not()
    if reason:
        pytest.skip(reason)
    from qoelab.emulation import LinkProfile, emulated_link

    with emulated_link(LinkProfile.parse(rate="10mbit", delay="10ms"), prefix=rd_prefix) as link:
        yield link
