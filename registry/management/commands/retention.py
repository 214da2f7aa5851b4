"""manage.py retention: apply the [[retention]] rules now (they remove tags; garbagecollect then
removes the manifests and blobs they leave)."""
from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from registry import scheduler
from registry.locks import LockLost
from registry.policies.rules import current
from registry.retention import executor


class Command(BaseCommand):
    help = (
        "Apply the [[retention]] rules of the configuration: remove the tags no clause keeps, and list "
        "each tag removed and each manifest the next garbage collection removes, with the rule and clause "
        "that decided. Immutable tags, tags matching keep_tags, the keep_last newest and those pushed or "
        "pulled within pulled_within_days stay. Runs beside the service; not beside a garbage collection."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--dry-run", action="store_true", help="List what would be removed and change nothing.")

    def handle(self, *args: Any, **options: Any) -> None:
        rules = current().retention
        dry_run = options["dry_run"]
        if not rules:
            self.stdout.write("retention: no [[retention]] rules in the configuration; nothing to do")
            return
        names = ", ".join(rule.title for rule in rules)
        self.stdout.write(f"retention: {len(rules)} rule{'s' if len(rules) != 1 else ''} ({names})"
                          f"{', dry run' if dry_run else ''}")
        if dry_run:
            outcome = executor.run(dry_run=True, report=self.stdout.write)
        else:
            try:
                with scheduler.exclusive() as held:
                    outcome = executor.run(report=scheduler.guarded(held, self.stdout.write))
            except (scheduler.CollectionRunning, LockLost) as exc:
                raise CommandError(str(exc)) from None
        self.stdout.write(outcome.summary(dry_run))
