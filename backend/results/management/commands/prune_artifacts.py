"""manage.py prune_artifacts --older-than DAYS [--kind K ...] [--dry-run]: free disk from old trials."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from results.services import prune_artifacts


class Command(BaseCommand):
    help = (
        "Delete trial artifacts (captures, logs, videos) older than some days. Measurements stay; "
        "videos used by rating campaigns are kept."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--older-than",
            type=float,
            default=None,
            metavar="DAYS",
            help="age in days (default: QOELAB_ARTIFACT_RETENTION_DAYS)",
        )
        parser.add_argument(
            "--kind", action="append", default=None, help="only this kind (pcap, log, video, ...); repeatable"
        )
        parser.add_argument("--dry-run", action="store_true", help="say what would go, delete nothing")

    def handle(self, *args: Any, **opts: Any) -> None:
        days = opts["older_than"]
        if days is None:
            days = settings.QOELAB_ARTIFACT_RETENTION_DAYS
            if days <= 0:
                raise CommandError(
                    "--older-than: give the age in days (QOELAB_ARTIFACT_RETENTION_DAYS is 0: keep forever)"
                )
        if days <= 0:
            raise CommandError(f"--older-than: must be more than 0 days, got {days:g}")
        report = prune_artifacts(timedelta(days=days), opts["kind"], dry_run=opts["dry_run"])
        verb = "would delete" if opts["dry_run"] else "deleted"
        self.stdout.write(f"{verb} {report}")
