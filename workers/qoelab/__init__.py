"""qoelab worker library: runs trials without Django and reports results to the backend."""

import contextlib

__version__ = "0.1.0"

# pyroute2 forks helper children (to open sockets inside a network namespace) that inherit our
# signal handlers. Where SIGTERM raises SystemExit (the CLIs, Celery's pool), pyroute2 stopping its
# child unwound *our* stack in that child: its finally blocks tore the trial down under the parent
# (seen with `qoelab rd bench`). With this flag pyroute2 resets SIGINT/SIGTERM in its children.
with contextlib.suppress(ImportError):
    import pyroute2.config

    pyroute2.config.disable_mp_signal = True
