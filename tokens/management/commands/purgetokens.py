"""manage.py purgetokens: delete the API tokens that can no longer be used."""
from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from regsite.config import PATHS_NOTE
from tokens import services


class Command(BaseCommand):
    help = (
        "Delete API tokens that are refused anyway: orphaned ones (their owner is no longer the user "
        "they were made for: gone from the htpasswd file, added to it again, or with another password) "
        "and expired ones (which the scheduled maintenance also purges when [gc] interval_hours is "
        "set). Without --orphaned or --expired, both." + " " + PATHS_NOTE
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--orphaned", action="store_true",
                            help="Only tokens whose owner is gone, added again or has another password.")
        parser.add_argument("--expired", action="store_true", help="Only expired tokens.")
        parser.add_argument("--dry-run", action="store_true", help="Only say what would be deleted.")

    def handle(self, *args: Any, **options: Any) -> None:
        both = not options["orphaned"] and not options["expired"]
        dry = options["dry_run"]
        verb = "would delete" if dry else "deleted"
        if options["orphaned"] or both:
            if dry:
                orphans = services.orphaned_tokens()
                count, owners = len(orphans), {stored.owner for stored in orphans}
            else:
                count, owners = services.purge_orphaned()
            names = f" (of {', '.join(sorted(owners))})" if owners else ""
            self.stdout.write(f"{verb} {count} orphaned tokens{names}")
        if options["expired"] or both:
            if dry:
                count = sum(1 for record in services.list_tokens()
                            if record.expired and not (both and record.orphaned))
            else:
                count = services.purge_expired()
            self.stdout.write(f"{verb} {count} expired tokens")
