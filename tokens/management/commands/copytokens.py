"""manage.py copytokens: copy the API tokens of the files backend into the database, re-issuing none."""
from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from regsite.config import PATHS_NOTE
from tokens import services
from tokens.db_repository import DatabaseTokenRepository


class Command(BaseCommand):
    help = (
        "Copy every token record from [auth] token_storage into the database, so that switching "
        '[auth] token_backend to "database" keeps every token working: tokens are stored as hashes, '
        "so the same tokens go on authenticating and none is re-issued. Records already in the "
        "database are left as they are; expired ones are copied too (they still show as expired). "
        "Run it again after any token is created through the files backend meanwhile."
        + " " + PATHS_NOTE
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--dry-run", action="store_true", help="Only say what would be copied.")

    def handle(self, *args: Any, **options: Any) -> None:
        source = services.file_repository()
        if not source.directory.is_dir():
            raise CommandError(f"no token directory at {source.directory} ([auth] token_storage)")
        target = DatabaseTokenRepository()
        copied = present = 0
        for record in source.all():
            if target.get(record.digest) is not None:
                present += 1
                continue
            if not options["dry_run"]:
                target.save(record)
            copied += 1
        verb = "would copy" if options["dry_run"] else "copied"
        self.stdout.write(f"{verb} {copied} tokens into the database; {present} were there already.")
