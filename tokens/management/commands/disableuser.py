"""manage.py disableuser: stop an LDAP or OpenID Connect user from signing in, and cut their tokens."""
from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from audit import log as audit
from regsite.config import PATHS_NOTE
from tokens import external, services


class Command(BaseCommand):
    help = ("Disable a user who signs in through LDAP or OpenID Connect: their sign-ins are refused and "
            "every API token of theirs stops working at once (--enable lets them sign in again; their "
            "tokens stay revoked). htpasswd users are removed from the htpasswd file instead. " + PATHS_NOTE)

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("username")
        parser.add_argument("--enable", action="store_true", help="Let a disabled user sign in again.")

    def handle(self, *args: Any, **options: Any) -> None:
        username, enable = options["username"], options["enable"]
        if not external.set_disabled(username, not enable):
            raise CommandError(f"no LDAP or OpenID Connect user {username!r} has signed in here")
        if enable:
            audit.record("user.enable", detail=f"external user {username} enabled")
            self.stdout.write(f"Enabled {username}.")
            return
        revoked = services.purge_tokens_of({username})
        audit.record("user.disable", detail=f"external user {username} disabled, {revoked} tokens revoked")
        self.stdout.write(f"Disabled {username}; revoked {revoked} API token(s).")
