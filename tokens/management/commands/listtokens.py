"""manage.py listtokens: the API tokens on this server (never the tokens themselves)."""
from __future__ import annotations

import json
from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from regsite import tables
from regsite.config import PATHS_NOTE
from tokens import services

COLUMNS = ("HASH_PREFIX", "OWNER", "ROLE", "CREATED", "EXPIRES", "STATE", "DESCRIPTION")


def _state(record: services.TokenRecord) -> str:
    if record.orphaned:
        return "orphaned"
    return "expired" if record.expired else "active"


def _described(record: services.TokenRecord) -> str:
    # The last column, so that the table's columns stay where scripts read them.
    limited = f"[repositories {','.join(record.repositories)}]" if record.repositories else ""
    return " ".join(part for part in (record.description, limited) if part)


class Command(BaseCommand):
    help = ("List API tokens by hash prefix, owner, role, creation and expiry time, and state: active, "
            "expired, or orphaned (its owner is no longer the user it was made for: gone from the "
            "htpasswd file, added to it again, or with another password; it is refused, and "
            "`manage.py purgetokens` removes it)." + " " + PATHS_NOTE)

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--username", help="Only this user's tokens.")
        parser.add_argument("--json", action="store_true", help="One JSON document instead of a table.")

    def handle(self, *args: Any, **options: Any) -> None:
        records = services.list_tokens(options["username"])
        if options["json"]:
            self.stdout.write(json.dumps({"tokens": [{**r.as_dict(), "orphaned": r.orphaned} for r in records]},
                                         indent=2))
            return
        if not records:
            self.stderr.write("No tokens.")
            return
        rows = [COLUMNS] + [
            (r.hash_prefix, r.owner, r.role, f"{r.created_at:%Y-%m-%d %H:%M}",
             f"{r.expires_at:%Y-%m-%d %H:%M}", _state(r), _described(r))
            for r in records
        ]
        for line in tables.lines(rows):
            self.stdout.write(line)
