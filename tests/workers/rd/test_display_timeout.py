"""An X server that accepts a connection and never answers (one busy drawing, seen with X2Go's agent
at 10 % loss) is a setup error the trial handles, not an unhandled timeout."""

from __future__ import annotations

import shutil
import socket
from pathlib import Path

import pytest

from qoelab.procs import SetupError
from qoelab.rd.display import Display

X11_DIR = Path("/tmp/.X11-unix")


@pytest.mark.skipif(shutil.which("xdotool") is None, reason="needs xdotool")
def test_an_x_server_that_never_answers_is_a_setup_error_naming_the_command():
    X11_DIR.mkdir(mode=0o1777, exist_ok=True)
    number = next(n for n in range(700, 800) if not (X11_DIR / f"X{n}").exists())
    path = X11_DIR / f"X{number}"
    with socket.socket(socket.AF_UNIX) as silent:
        silent.bind(str(path))
        silent.listen(1)
        try:
            with pytest.raises(
                SetupError, match=rf"xdotool getmouselocation --shell on :{number} did not answer"
            ):
                Display(number, 800, 600).xdotool("getmouselocation", "--shell", timeout=1)
        finally:
            path.unlink()
