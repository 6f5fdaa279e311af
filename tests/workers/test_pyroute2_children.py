"""pyroute2's forked helpers must not run our signal handlers (they would unwind our stack)."""

from __future__ import annotations

import subprocess
import sys


def test_importing_qoelab_makes_pyroute2_children_reset_signal_handlers() -> None:
    # In a fresh interpreter: the flag comes from `import qoelab`, not from an earlier test.
    code = "import qoelab, pyroute2.config as c; print(c.disable_mp_signal)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "True"
