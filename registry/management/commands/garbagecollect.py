"""manage.py garbagecollect: remove unreferenced blobs (and untagged manifests) while serving."""
from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from registry import scheduler
from registry.locks import LockLost
from registry.management.commands._hours import hours
from registry.services import gc


class Command(BaseCommand):
    help = (
        "Remove blob data that no manifest in any repository references, blob links that no manifest "
        "of their repository references, expired upload sessions, and with --delete-untagged the "
        "manifests no tag reaches. Safe while the registry serves: nothing younger than the grace "
        "period is touched. Prints each thing removed and the bytes freed."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--dry-run", action="store_true",
                            help="Print what would be removed and change nothing.")
        parser.add_argument("--delete-untagged", action="store_true",
                            help="Also remove manifests that no tag reaches, directly, through an index "
                                 "or as a referrer of a kept manifest.")
        parser.add_argument("--grace-hours", type=hours, default=settings.REGISTRY_GC_GRACE_HOURS,
                            help="Keep anything younger than this; default [gc] grace_hours "
                                 f"({settings.REGISTRY_GC_GRACE_HOURS}).")

    def handle(self, *args: Any, **options: Any) -> None:
        grace = options["grace_hours"]
        gc_options = gc.Options(
            grace=timedelta(hours=grace),
            delete_untagged=options["delete_untagged"],
            dry_run=options["dry_run"],
        )
        untagged = "removed" if gc_options.delete_untagged else "kept"
        dry_run = ", dry run" if gc_options.dry_run else ""
        self.stdout.write(f"garbage collection: grace {grace:g} h, untagged manifests {untagged}{dry_run}")
        try:
            with scheduler.exclusive() as held:
                result = gc.collect(gc_options, report=scheduler.guarded(held, self.stdout.write))
        except (scheduler.CollectionRunning, LockLost) as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(result.summary(gc_options.dry_run))
