"""manage.py backup DEST: a consistent copy of a filesystem registry, made while it serves."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from registry.services.backup import BackupError, backup


class Command(BaseCommand):
    help = (
        "Copy the database (SQLite's online backup, or pg_dump), then the blob data (hard links when "
        "DEST is on the same filesystem), token files, the htpasswd file and the session key into DEST, "
        "an empty directory, while holding the garbage collector's lock. Restore: see docs/storage.md."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("dest", help="An empty or new directory.")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            result = backup(Path(options["dest"]).resolve(), report=self.stdout.write)
        except BackupError as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(f"backed up {result.blobs} blobs ({result.bytes} bytes) and the database to "
                          f"{options['dest']}")
