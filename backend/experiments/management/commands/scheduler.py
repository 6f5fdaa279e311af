"""manage.py scheduler [--once] [--interval 2]: dispatch trials, reap lost ones, prune old artifacts."""

from __future__ import annotations

import logging
import os
import signal
import time
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandParser
from django.db import close_old_connections

from experiments import services
from experiments.wakeup import Listener
from qoelab_web.chores import every_chore, run_due

log = logging.getLogger("qoelab.scheduler")


class Command(BaseCommand):
    help = "Run the qoelab scheduler: send pending trials to live hosts, requeue or fail lost ones."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--once", action="store_true", help="run one tick and exit")
        parser.add_argument("--interval", type=float, default=2.0, help="seconds between ticks (default 2)")
        parser.add_argument(
            "--alive-file",
            default=os.environ.get("QOELAB_SCHEDULER_ALIVE_FILE", "/tmp/qoelab-scheduler.alive"),
            help="touched after every tick; --check reads it (container healthcheck)",
        )
        parser.add_argument(
            "--check", action="store_true", help="exit 0 if a running scheduler ticked in the last 60 s"
        )

    def handle(self, *args: Any, **opts: Any) -> None:
        interval = opts["interval"]
        if interval <= 0:
            from django.core.management.base import CommandError

            raise CommandError("--interval must be positive")
        alive = Path(opts["alive_file"])
        if opts["check"]:
            age = time.time() - alive.stat().st_mtime if alive.exists() else None
            if age is None or age > 60:
                from django.core.management.base import CommandError

                raise CommandError(f"the scheduler has not ticked in the last 60 s ({alive})")
            self.stdout.write(f"scheduler ticked {age:.0f} s ago")
            return
        if opts["once"]:
            report = services.tick()
            self.stdout.write(str(report))
            return
        stop = False

        def on_signal(signum: int, frame: Any) -> None:
            nonlocal stop
            stop = True

        signal.signal(signal.SIGTERM, on_signal)
        signal.signal(signal.SIGINT, on_signal)
        log.info("scheduler started, one tick every %s s", interval)
        chores = every_chore()  # the apps' own periodic work (qoelab_web.chores): slots, retention
        listener = Listener()
        while not stop:
            started = time.monotonic()
            close_old_connections()
            try:
                report = services.tick()
                if report.changed:
                    log.info("tick: %s", report)
                run_due(chores)
            except Exception:  # keep looping through database or broker outages; say so loudly
                log.exception("scheduler tick failed; retrying in %s s", interval)
            else:
                alive.touch()
            # A finished trial or a new sweep wakes the loop at once (experiments.wakeup).
            listener.wait(max(0.0, interval - (time.monotonic() - started)))
        listener.close()
        log.info("scheduler stopped")
