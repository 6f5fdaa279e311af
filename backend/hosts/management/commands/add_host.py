"""manage.py add_host NAME [--token T] [--concurrency N]: register a lab host, print its token."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError, CommandParser

from hosts.services import add_host


class Command(BaseCommand):
    help = (
        "Create a lab host (or set its token) and print the token its worker uses (Authorization: Host ...)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("name", help="host name; its Celery queue is host.<name>")
        parser.add_argument("--token", help="use this token (idempotent; for demos and provisioning)")
        parser.add_argument("--concurrency", type=int, help="trials at once until the worker reports its own")

    def handle(self, *args: Any, **opts: Any) -> None:
        token = opts.get("token")
        if token is not None and len(token) < 16:
            raise CommandError("--token must be at least 16 characters")
        if opts.get("concurrency") is not None and opts["concurrency"] < 1:
            raise CommandError("--concurrency must be at least 1")
        try:
            host, token, created = add_host(opts["name"], token, opts.get("concurrency"))
        except ValidationError as exc:
            raise CommandError(
                "; ".join(f"{k}: {' '.join(v)}" for k, v in exc.message_dict.items())
            ) from None
        what = "created" if created else "updated"
        self.stderr.write(f"host {host.name} {what}; its worker uses queue {host.queue} and this token:")
        self.stdout.write(token)
