"""manage.py audit: the audit log, oldest first, filtered; or pruned of what is past retention."""
from __future__ import annotations

import json
import re
from datetime import datetime, timedelta, timezone
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils import timezone as django_timezone

from audit import log, queries
from regsite import tables, text
from regsite.config import PATHS_NOTE

COLUMNS = ("TIME", "ACTOR", "ADDRESS", "ACTION", "REPOSITORY", "REFERENCE", "OUTCOME", "DETAIL")
_RELATIVE = re.compile(r"^(\d+)([mhd])$")
_UNITS = {"m": "minutes", "h": "hours", "d": "days"}
PAGE = 1000


def moment(text: str) -> datetime:
    """``2026-11-26T10:00:00Z``, ``2026-11-26``, or an age: ``90m``, ``24h``, ``7d`` ago."""
    relative = _RELATIVE.match(text.strip())
    if relative:
        return django_timezone.now() - timedelta(**{_UNITS[relative[2]]: int(relative[1])})
    try:
        parsed = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise CommandError(f"{text!r} is not a time: give 2026-11-26T10:00:00Z, 2026-11-26, or an age such "
                           "as 90m, 24h or 7d") from None
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=timezone.utc)


class Command(BaseCommand):
    help = ("Show the audit log (pushes, deletes, tag moves, token and robot changes, sign-ins and failed "
            "sign-ins, refusals), oldest first, one line per event or --json. Events are kept "
            "[audit] retention_days and pruned as the registry runs; --prune removes the older ones now."
            + " " + PATHS_NOTE)

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--since", help="From this time, or this long ago (90m, 24h, 7d).")
        parser.add_argument("--until", help="Before this time, or this long ago.")
        parser.add_argument("--actor", default="", help="A user's or robot's name, or a token's hash prefix.")
        parser.add_argument("--repository", default="",
                            help="A repository's name, or a namespace ending in / (team-a/).")
        parser.add_argument("--action", default="", help="push, tag.move, delete, sign-in, token.create, ...")
        parser.add_argument("--outcome", default="", choices=["", *[o.value for o in log.Outcome]])
        parser.add_argument("--json", action="store_true", help="One JSON document instead of a table.")
        parser.add_argument("--prune", action="store_true",
                            help="Remove the events older than [audit] retention_days, and show nothing.")

    def handle(self, *args: Any, **options: Any) -> None:
        if options["prune"]:
            removed = total = log.prune()
            while removed >= log.PRUNE_BATCH:
                removed = log.prune()
                total += removed
            self.stdout.write(f"removed {total} events older than {settings.AUDIT_RETENTION_DAYS} days")
            return
        for option in ("actor", "repository", "action"):
            why = text.problem(options[option])
            if why:
                raise CommandError(f"--{option}: {why}")
        filters = queries.Filters(
            since=moment(options["since"]) if options["since"] else None,
            until=moment(options["until"]) if options["until"] else None,
            actor=options["actor"], repository=options["repository"], action=options["action"],
            outcome=options["outcome"])
        events = self._all(filters)
        if options["json"]:
            self.stdout.write(json.dumps({"events": [log.shown(event) for event in events]}, indent=2))
            return
        if not events:
            self.stderr.write("No events.")
            return
        rows = [COLUMNS] + [(f"{e.at:%Y-%m-%d %H:%M:%S}", _who(e), e.address or "-", e.action, e.repository or "-",
                             e.reference or e.digest[:19] or "-", e.outcome, e.detail) for e in events]
        for line in tables.lines(rows):
            self.stdout.write(line)

    def _all(self, filters: queries.Filters) -> list[queries.EventRow]:
        events: list[queries.EventRow] = []
        while True:
            page = queries.events(filters, after_id=events[-1].id if events else 0, limit=PAGE)
            events += page
            if len(page) < PAGE:
                return events


def _who(event: queries.EventRow) -> str:
    name = event.actor or event.actor_kind
    return f"{name} (token {event.token})" if event.token else name
