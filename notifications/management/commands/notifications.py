"""manage.py notifications: each endpoint's delivery state, its pending events, and retry now."""
from __future__ import annotations

from datetime import datetime
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils import timezone

from notifications import queries
from notifications.outbox import configured
from notifications.status import EndpointStatus, statuses
from regsite.config import PATHS_NOTE


def _ago(moment: datetime | None) -> str:
    if moment is None:
        return "never"
    seconds = max((timezone.now() - moment).total_seconds(), 0)
    return f"{_span(seconds)} ago"


def _span(seconds: float) -> str:
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            return f"{seconds / size:.1f} {unit}"
    return f"{seconds:.0f} s"


class Command(BaseCommand):
    help = ("Event notifications ([[notifications]] webhooks). `list` shows each endpoint's state, pending "
            "events, totals and last error (--events also lists the pending events); `retry` makes the "
            "server try endpoints that are waiting out a backoff at once (--endpoint NAME for one). "
            + PATHS_NOTE)

    def add_arguments(self, parser: CommandParser) -> None:
        actions = parser.add_subparsers(dest="action", required=True)
        listing = actions.add_parser("list", help="Each endpoint's state, pending events and totals.")
        listing.add_argument("--endpoint", help="Only this endpoint.")
        listing.add_argument("--events", action="store_true", help="Also list the pending events, oldest first.")
        listing.add_argument("--limit", type=int, default=50, help="Pending events shown per endpoint (50).")
        retry = actions.add_parser("retry", help="Try endpoints waiting out a backoff now.")
        retry.add_argument("--endpoint", help="Only this endpoint (default: every configured one).")

    def handle(self, *args: Any, **options: Any) -> None:
        if options["action"] == "list":
            self._list(options.get("endpoint"), options.get("events", False), options.get("limit", 50))
        else:
            self._retry(options.get("endpoint"))

    def _list(self, only: str | None, with_events: bool, limit: int) -> None:
        rows = [row for row in statuses() if only is None or row.name == only]
        if only is not None and not rows:
            raise CommandError(f"no endpoint {only!r}: {self._known()}")
        if not rows:
            self.stdout.write("no [[notifications]] endpoints are configured, and the outbox is empty")
            return
        for row in rows:
            self._show(row)
            if with_events:
                for event in queries.oldest(row.name, limit):
                    self.stdout.write(f"    #{event.id} {_ago(event.created_at)}: {_describe(event.event)}")
                if row.pending > limit:
                    self.stdout.write(f"    ... and {row.pending - limit} more")

    def _show(self, row: EndpointStatus) -> None:
        where = f"{row.url}  events={','.join(row.events)}  repositories={row.repositories}" if row.configured \
            else "(not in the configuration: its events expire after 72 h)"
        self.stdout.write(f"{row.name}  {row.state}  {where}")
        oldest = f" (oldest {_ago(row.oldest)})" if row.oldest else ""
        self.stdout.write(f"    pending {row.pending}{oldest}  delivered {row.delivered}  failed {row.failed}  "
                          f"expired {row.expired}" + (f"  dropped {row.dropped}" if row.dropped else ""))
        self.stdout.write(f"    last success {_ago(row.last_success_at)}")
        if row.last_error:
            self.stdout.write(f"    last error {_ago(row.last_error_at)}: {row.last_error}")
        if row.attempts and row.next_attempt_at:
            wait = max((row.next_attempt_at - timezone.now()).total_seconds(), 0)
            self.stdout.write(f"    {row.attempts} failed attempts in a row; next attempt in {_span(wait)}")

    def _retry(self, only: str | None) -> None:
        names = [endpoint.name for endpoint in configured()]
        if only is not None:
            if only not in names:
                raise CommandError(f"no configured endpoint {only!r}: {self._known()}")
            names = [only]
        if not names:
            raise CommandError("no [[notifications]] endpoints are configured")
        waiting = {row.name: row for row in statuses() if row.name in names}
        queries.retry_now(names)
        for name in names:
            row = waiting[name]
            if row.next_attempt_at is not None:
                self.stdout.write(f"{name}: retrying now ({row.pending} pending, {row.attempts} failed attempts "
                                  "in a row); the server sends within a second")
            else:
                self.stdout.write(f"{name}: not waiting ({row.pending} pending): events go as they come")

    @staticmethod
    def _known() -> str:
        names = [endpoint.name for endpoint in configured()]
        return f"configured are {', '.join(names)}" if names else "none is configured"


def _describe(payload: dict[str, Any]) -> str:
    target = payload.get("target", {})
    text = f"{payload.get('action')} {target.get('repository', '')}"
    if target.get("tag"):
        text += f":{target['tag']}"
    if target.get("digest"):
        text += f"@{target['digest']}"
    actor = payload.get("actor", {}).get("name")
    return text + (f" by {actor}" if actor else "")
