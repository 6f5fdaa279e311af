"""manage.py create_researcher USERNAME [--password P] [--staff]: a researcher account (idempotent)."""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import transaction

from accounts.permissions import researchers_group
from accounts.services import issue_token, revoke_tokens


class Command(BaseCommand):
    help = (
        "Create (or update) a researcher: member of the 'researchers' group. Prints a new API token "
        "(tokens are stored hashed, so an existing one cannot be shown again; --token keeps a fixed one)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("username")
        parser.add_argument("--password", help="set this password (otherwise unchanged / unusable)")
        parser.add_argument("--email", default="")
        parser.add_argument(
            "--staff", action="store_true", help="also staff: sees every experiment, admin site"
        )
        parser.add_argument(
            "--token", help="use this API token and revoke the user's others (idempotent; for demos)"
        )

    def handle(self, *args: Any, **opts: Any) -> None:
        if opts.get("token") is not None and len(opts["token"]) < 32:
            raise CommandError("--token must be at least 32 characters (a random string)")
        User = get_user_model()  # noqa: N806
        with transaction.atomic():
            user, created = User.objects.get_or_create(username=opts["username"])
            if opts.get("password"):
                user.set_password(opts["password"])
            elif created:
                user.set_unusable_password()
            if opts.get("email"):
                user.email = opts["email"]
            if opts["staff"]:
                user.is_staff = True
            user.save()
            user.groups.add(researchers_group())
            if opts.get("token"):
                revoke_tokens(user, keep=opts["token"])
            token = issue_token(user, opts.get("token"))
        self.stderr.write(f"researcher {user.username} {'created' if created else 'updated'}; API token:")
        self.stdout.write(token)
