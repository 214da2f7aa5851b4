"""Named queries of the notifications app: the outbox and the endpoints' delivery state."""
from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache
from typing import Any

from django.db import connection, transaction
from django.db.models import Count, F, Min

from notifications.models import EndpointState, PendingEvent


@dataclass(frozen=True)
class Pending:
    id: int
    created_at: datetime
    payload: str  # the event record as JSON text

    @property
    def event(self) -> dict[str, Any]:
        return json.loads(self.payload)


@dataclass(frozen=True)
class Backlog:
    count: int
    oldest: datetime | None


@lru_cache(maxsize=1)
def _insert_sql() -> str:
    q = connection.ops.quote_name
    return f"INSERT INTO {q(PendingEvent._meta.db_table)} (endpoint, created_at, payload) VALUES (%s, %s, %s)"


def add(endpoints: list[str], events: list[dict[str, Any]], now: datetime) -> None:
    """Queue ``events`` (in order) for each of ``endpoints``, in the caller's transaction.

    One prebuilt INSERT: it runs inside every push's transaction, where bulk_create would build a
    model instance per row and compile its query each time (the commit that made it has the
    figures)."""
    at = connection.ops.adapt_datetimefield_value(now)
    texts = [json.dumps(event, separators=(",", ":")) for event in events]
    with connection.cursor() as cursor:
        cursor.executemany(_insert_sql(), [(name, at, text) for text in texts for name in endpoints])


def oldest(endpoint: str, limit: int) -> list[Pending]:
    rows = PendingEvent.objects.filter(endpoint=endpoint).order_by("id").values_list("id", "created_at", "payload")
    return [Pending(*row) for row in rows[:limit]]


def oldest_time(endpoint: str) -> datetime | None:
    return (PendingEvent.objects.filter(endpoint=endpoint).order_by("id")
            .values_list("created_at", flat=True).first())


def state(endpoint: str) -> EndpointState:
    row, _ = EndpointState.objects.get_or_create(name=endpoint)
    return row


def delivered(endpoint: str, ids: list[int], now: datetime) -> None:
    with transaction.atomic():
        PendingEvent.objects.filter(endpoint=endpoint, id__in=ids).delete()
        EndpointState.objects.filter(name=endpoint).update(
            delivered=F("delivered") + len(ids), attempts=0, next_attempt_at=None, last_success_at=now)


def failed(endpoint: str, error: str, now: datetime, next_attempt_at: datetime) -> None:
    EndpointState.objects.filter(name=endpoint).update(
        failed=F("failed") + 1, attempts=F("attempts") + 1, last_error=error, last_error_at=now,
        next_attempt_at=next_attempt_at)


def expire(endpoint: str, created_before: datetime, limit: int = 1000) -> list[Pending]:
    """Remove (at most ``limit`` of) the endpoint's events written before ``created_before``."""
    with transaction.atomic():
        rows = (PendingEvent.objects.filter(endpoint=endpoint, created_at__lt=created_before)
                .order_by("id").values_list("id", "created_at", "payload"))
        gone = [Pending(*row) for row in rows[:limit]]
        if gone:
            PendingEvent.objects.filter(id__in=[p.id for p in gone]).delete()
            EndpointState.objects.get_or_create(name=endpoint)
            EndpointState.objects.filter(name=endpoint).update(expired=F("expired") + len(gone))
    return gone


def retry_now(endpoints: list[str]) -> int:
    """Endpoints waiting out a backoff are tried at once; how many were waiting."""
    return EndpointState.objects.filter(name__in=endpoints, next_attempt_at__isnull=False).update(
        next_attempt_at=None)


def backlogs() -> dict[str, Backlog]:
    rows = PendingEvent.objects.values("endpoint").annotate(count=Count("id"), oldest=Min("created_at"))
    return {row["endpoint"]: Backlog(row["count"], row["oldest"]) for row in rows}


def states() -> dict[str, EndpointState]:
    return {row.name: row for row in EndpointState.objects.all()}


def endpoints_with_events() -> list[str]:
    return list(PendingEvent.objects.values_list("endpoint", flat=True).distinct())
