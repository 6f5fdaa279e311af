"""Release live-mode slots whose page stopped renewing them (for cron or the scheduler loop)."""

from __future__ import annotations

import time
from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from ratings.live import release_expired_slots


class Command(BaseCommand):
    help = "Release expired live-mode rating slots and move the queue; --loop SECONDS to keep running."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--loop", type=float, default=0.0, help="repeat every N seconds (0: once)")

    def handle(self, *args: Any, **opts: Any) -> None:
        while True:
            n = release_expired_slots()
            self.stdout.write(f"released {n} expired slot(s)")
            if opts["loop"] <= 0:
                return
            time.sleep(opts["loop"])
