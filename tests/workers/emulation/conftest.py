"""Fixtures for emulation tests: skip (with the reason) where namespaces cannot be made."""

import pytest


@pytest.fixture(scope="session")
def netns_ok():
    from qoelab.emulation.system import has_net_admin

    if not has_net_admin():
        pytest.skip("needs root or CAP_NET_ADMIN to create network namespaces")
    return True
