"""manage.py purgetokens: delete the API tokens that can no longer be used."""
from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from regsite.config import PATHS_NOTE
from tokens import services


class Command(BaseCommand):
    help = (
        "Delete API tokens that are refused anyway: orphaned ones (their owner is no longer in the "
        "htpasswd file; purged, they cannot pass to a later user of the same name) and expired ones "
        "(which the scheduled maintenance also purges when [gc] interval_hours is set). Without "
        "--orphaned or --expired, both." + " " + PATHS_NOTE
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--orphaned", action="store_true", help="Only tokens whose owner is gone.")
        parser.add_argument("--expired", action="store_true", help="Only expired tokens.")
        parser.add_argument("--dry-run", action="store_true", help="Only say what would be deleted.")

    def handle(self, *args: Any, **options: Any) -> None:
        both = not options["orphaned"] and not options["expired"]
        dry = options["dry_run"]
        verb = "would delete" if dry else "deleted"
        if options["orphaned"] or both:
            owners = services.orphaned_owners()
            if dry:
                count = sum(len(services.list_tokens(owner)) for owner in owners)
            else:
                count = services.purge_tokens_of(owners)
            names = f" (of {', '.join(sorted(owners))})" if owners else ""
            self.stdout.write(f"{verb} {count} orphaned tokens{names}")
        if options["expired"] or both:
            if dry:
                count = sum(1 for record in services.list_tokens()
                            if record.expired and not (both and record.orphaned))
            else:
                count = services.purge_expired()
            self.stdout.write(f"{verb} {count} expired tokens")
