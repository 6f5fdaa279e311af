"""Fixtures for emulation tests: skip (with the reason) where namespaces cannot be made."""

import pytest


@pytest.fixture(scope="session")
def netns_ok():
    from qoelab.emulation.system import has_net_admin

    if not has_net_admin():
        pytest.skip("needs root or CAP_NET_ADMIN to create network namespaces")
    return True


@pytest.fixture
def prefix(request):
    """A fixed name prefix per test, cleaned before and after, never the bare "ql" other users share."""
    from qoelab.emulation.cleanup import cleanup_leftovers

    name = "qlt" + format(abs(hash(request.node.name)) % 36**5, "05x")[:5]
    cleanup_leftovers(name)
    yield name
    cleanup_leftovers(name)


@pytest.fixture(scope="module")
def userspace_ok(netns_ok):
    from qoelab.emulation.topology import userspace_available

    ok, reason = userspace_available()
    if not ok:
        print(f"userspace link tests skipped: {reason}")
        pytest.skip(reason)


@pytest.fixture(scope="module")
def linkemu_ok() -> None:
    """linkemu built (``make`` if it is missing) and able to open TUN devices as root, else skip why."""
    import os
    import subprocess
    from pathlib import Path

    from qoelab.emulation import userspace

    if os.geteuid() != 0:
        pytest.skip("needs root for network namespaces and TUN devices")
    if not userspace.binary_path().exists():
        subprocess.run(["make", "-s", "-C", str(Path(__file__).resolve().parents[3] / "workers" / "csrc")],
                       check=False)  # fmt: skip
    ok, why = userspace.available()
    if not ok:
        pytest.skip(why)
