"""manage.py createtoken: make an API token for a user and print it once."""
from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from regsite.config import PATHS_NOTE
from tokens import htpasswd, services
from tokens.access import DEFAULT_ROLE


class Command(BaseCommand):
    help = (
        "Create an API token and print it on stdout (the only time it is shown). "
        "Registry clients log in with the username 'token' and the token as the password."
        + " " + PATHS_NOTE
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--username", required=True, help="Owner of the token.")
        parser.add_argument("--role", default=DEFAULT_ROLE.value,
                            help=f"read (pull), write (push) or admin (delete); default {DEFAULT_ROLE}.")
        parser.add_argument("--ttl-days", type=int, default=services.DEFAULT_TTL_DAYS,
                            help=f"Lifetime in days, 1..{services.MAX_TTL_DAYS}; default {services.DEFAULT_TTL_DAYS}.")
        parser.add_argument("--description", default="", help="A label shown in token lists.")
        parser.add_argument("--repository", action="append", dest="repositories", metavar="GLOB",
                            help="Limit the token to repositories this glob matches (repeatable), e.g. "
                                 "team-a/app or 'team-a/*'; by default it is limited only by its role and "
                                 "its owner's access.")

    def handle(self, *args: Any, **options: Any) -> None:
        if options["username"] not in htpasswd.current_file().snapshot().users:
            raise CommandError(f"no user {options['username']!r} in {settings.AUTH_HTPASSWD_FILE}: a token "
                               "belongs to an htpasswd user (add one with manage.py adduser)")
        try:
            created = services.create_token(options["username"], options["role"], options["ttl_days"],
                                            options["description"], options["repositories"])
        except (services.InvalidTokenRequest, services.TooManyTokens) as exc:
            raise CommandError(exc.message) from None
        self.stdout.write(created.token)
        article = "an" if created.role[0] in "aeiou" else "a"
        limited = f" on {', '.join(created.repositories)}" if created.repositories else ""
        self.stderr.write(
            f"Created {article} {created.role} token{limited} for {options['username']}, "
            f"hash_prefix {created.hash_prefix}, "
            f"expiring {created.expires_at:%Y-%m-%d %H:%M} UTC. Store it now: it is not shown again."
        )
