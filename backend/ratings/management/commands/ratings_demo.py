"""Create a recorded-mode demo campaign with real (generated) videos and print evaluator links.

The recordings are ffmpeg test patterns, not remote-desktop captures: this shows the evaluator
flow end to end before the rd_qoe job type records real sessions. Trials carry no measured
throughput, so the charts use the configured rate and say so.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser

from ratings import campaigns, demo, invitations


class Command(BaseCommand):
    help = "Make a demo rating campaign (recorded mode, generated videos) owned by USER; print the links."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("username", help="owner (a researcher account)")
        parser.add_argument("--evaluators", type=int, default=2)
        parser.add_argument("--base-url", default="http://127.0.0.1:8000")

    def handle(self, *args: Any, **opts: Any) -> None:
        user = get_user_model().objects.filter(username=opts["username"]).first()
        if user is None:
            raise CommandError(f"no user {opts['username']!r} (create one: manage.py create_researcher)")
        points = [
            {"protocol": p, "rate": "1mbit", "delay": d}
            for p in ("vnc", "spice", "x2go")
            for d in ("10ms", "100ms")
        ]
        sweep = demo.demo_sweep(user, points, name="ratings demo (generated videos)")
        with tempfile.TemporaryDirectory(prefix="qoelab-ratings-") as tmp:
            demo.attach_demo_videos(sweep, Path(tmp))
        campaign = campaigns.create_campaign(user, name=f"Demo campaign (sweep {sweep.pk})", sweep=sweep)
        campaigns.open_campaign(campaign)
        self.stdout.write(f"campaign {campaign.pk}: {opts['base_url']}/campaigns/{campaign.pk}/")
        for ev, raw in invitations.invite(campaign, count=opts["evaluators"]):
            self.stdout.write(f"  {ev.label}: {opts['base_url']}/rate/{raw}/")
