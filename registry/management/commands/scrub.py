"""manage.py scrub: re-hash stored blobs and report (or remove) what no longer matches."""
from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from registry.management.commands._hours import hours
from registry.services import scrub


class Command(BaseCommand):
    help = (
        "Re-hash every stored blob and report blobs whose data no longer matches their digest, blob "
        "rows without a data file, and data files without a row. --repair removes them, so that "
        "clients push those blobs again. Exits with status 1 when problems are left unrepaired."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--repair", action="store_true", help="Remove every broken blob found.")
        parser.add_argument("--grace-hours", type=hours, default=settings.REGISTRY_GC_GRACE_HOURS,
                            help="Ignore data files without a row younger than this (an upload in "
                                 f"progress); default [gc] grace_hours ({settings.REGISTRY_GC_GRACE_HOURS}).")

    def handle(self, *args: Any, **options: Any) -> None:
        grace = options["grace_hours"]
        result = scrub.scrub(repair=options["repair"], grace=timedelta(hours=grace), report=self.stdout.write)
        repaired = sum(1 for problem in result.problems if problem.repaired)
        self.stdout.write(
            f"checked {result.blobs_checked} blobs ({result.bytes_checked} bytes): "
            f"{len(result.problems)} problems, {repaired} removed"
        )
        if len(result.problems) > repaired:
            left = len(result.problems) - repaired
            raise CommandError(f"{left} problems left; run with --repair to remove them")
