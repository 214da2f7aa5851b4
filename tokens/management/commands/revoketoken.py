"""manage.py revoketoken: revoke any user's API token by its hash prefix."""
from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from regsite.config import PATHS_NOTE
from tokens import services


class Command(BaseCommand):
    help = "Revoke an API token, given the 16-character hash prefix that listtokens shows." + " " + PATHS_NOTE

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("hash_prefix", help="The token's hash prefix (16 hexadecimal characters).")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            services.revoke_token(None, options["hash_prefix"])
        except (services.InvalidPrefix, services.TokenNotFound) as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(f"Revoked token {options['hash_prefix'].lower()}.")
