"""manage.py purgeuploads: remove upload sessions idle for longer than the upload expiry."""
from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandParser

from registry.management.commands._hours import hours
from registry.services import uploads


class Command(BaseCommand):
    help = (
        "Remove upload sessions idle for longer than [registry] upload_expiry_hours, with their "
        "partial data, and upload data left without a session. garbagecollect does this too."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--older-than-hours", type=hours, default=None,
                            help="Idle time after which a session goes; default [registry] "
                                 f"upload_expiry_hours ({settings.REGISTRY_UPLOAD_EXPIRY_HOURS}).")
        parser.add_argument("--dry-run", action="store_true",
                            help="Print how many sessions would be removed and change nothing.")

    def handle(self, *args: Any, **options: Any) -> None:
        older = options["older_than_hours"]
        expiry = timedelta(hours=older if older is not None else settings.REGISTRY_UPLOAD_EXPIRY_HOURS)
        removed = uploads.purge_expired(expiry, dry_run=options["dry_run"])
        verb = "would remove" if options["dry_run"] else "removed"
        idle = f"{expiry.total_seconds() / 3600:g} h"
        self.stdout.write(f"{verb} {removed} upload sessions idle for more than {idle}")
