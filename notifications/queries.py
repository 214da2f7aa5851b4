"""Named queries of the notifications app: the outbox and the endpoints' delivery state."""
from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache
from typing import Any, Mapping

from django.db import connection, transaction
from django.db.models import Count, F, Min

from notifications.models import EndpointState, PendingEvent, PullMark


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


@dataclass(frozen=True)
class Dropped:
    """The oldest events of an endpoint dropped to keep it within its max_pending."""

    endpoint: str
    count: int
    first: datetime  # when the oldest dropped one was written
    last: datetime
    total: int  # dropped from this endpoint so far


@lru_cache(maxsize=8)
def _count_sql(endpoints: int) -> str:
    q = connection.ops.quote_name
    table = q(EndpointState._meta.db_table)
    names = ", ".join(["%s"] * endpoints)
    if connection.vendor == "postgresql":
        # The rows locked in name order, so that two writers to the same endpoints never wait on
        # each other (SQLite has one writer at a time).
        names = f"SELECT name FROM {table} WHERE name IN ({names}) ORDER BY name FOR UPDATE"
    return f"UPDATE {table} SET pending = pending + %s WHERE name IN ({names}) RETURNING name, pending"


def add(endpoints: list[str], events: list[dict[str, Any]], now: datetime,
        limits: Mapping[str, int] | None = None) -> list[Dropped]:
    """Queue ``events`` (in order) for each of ``endpoints``, in the caller's transaction (or one of
    their own), and keep each endpoint within its ``limits`` (max_pending) by dropping its oldest;
    what was dropped.

    Prebuilt statements: they run inside every push's transaction, where bulk_create would build a
    model instance per row and compile its query each time (the commit that made it has the
    figures). The count is an UPDATE of the endpoint's row, which holds its lock until the commit:
    concurrent writers to one endpoint count in turn, so the cap is exact; in name order, so two
    of them never wait on each other."""
    at = connection.ops.adapt_datetimefield_value(now)
    texts = [json.dumps(event, separators=(",", ":")) for event in events]
    dropped = []
    with transaction.atomic(savepoint=False), connection.cursor() as cursor:
        cursor.executemany(_insert_sql(), [(name, at, text) for text in texts for name in endpoints])
        cursor.execute(_count_sql(len(endpoints)), [len(texts), *endpoints])
        counts = dict(cursor.fetchall())
        for name in sorted(set(endpoints) - set(counts)):  # an endpoint's first events
            EndpointState.objects.get_or_create(name=name)
            cursor.execute(_count_sql(1), [len(texts), name])
            counts.update(cursor.fetchall())
        for name, count in sorted(counts.items()):
            limit = (limits or {}).get(name)
            if limit is not None and count > limit:
                # Down to 1% below the limit, so that an endpoint at its limit drops (and logs) a
                # batch now and then rather than one event with every event written.
                trimmed = _drop_oldest(name, count - limit + max(1, limit // 100))
                dropped += [trimmed] if trimmed else []
    return dropped


def _drop_oldest(endpoint: str, count: int) -> Dropped | None:
    rows = list(PendingEvent.objects.filter(endpoint=endpoint).order_by("id").values_list("id", "created_at")[:count])
    if not rows:  # the count was off (rows removed by hand): it is right again from here
        EndpointState.objects.filter(name=endpoint).update(pending=PendingEvent.objects.filter(endpoint=endpoint).count())
        return None
    gone, _ = PendingEvent.objects.filter(id__in=[row[0] for row in rows]).delete()
    EndpointState.objects.filter(name=endpoint).update(pending=F("pending") - gone, dropped=F("dropped") + gone)
    total = EndpointState.objects.filter(name=endpoint).values_list("dropped", flat=True).get()
    return Dropped(endpoint, gone, rows[0][1], rows[-1][1], total)


@lru_cache(maxsize=1)
def _pull_mark_sql() -> str:
    q = connection.ops.quote_name
    table = q(PullMark._meta.db_table)
    return (f"INSERT INTO {table} ({q('key')}, at) VALUES (%s, %s) ON CONFLICT ({q('key')}) "
            f"DO UPDATE SET at = excluded.at WHERE {table}.at < %s RETURNING {q('key')}")


def pull_due(key: str, now: datetime, since: datetime) -> bool:
    """Whether a pull of ``key`` is an event: none became one since ``since``. One statement,
    exact across workers and replicas: of two pulls at once, one writes the mark."""
    with connection.cursor() as cursor:
        cursor.execute(_pull_mark_sql(), [key, connection.ops.adapt_datetimefield_value(now),
                                          connection.ops.adapt_datetimefield_value(since)])
        return cursor.fetchone() is not None


def prune_pull_marks(before: datetime) -> int:
    return PullMark.objects.filter(at__lt=before).delete()[0]


def recount(endpoints: list[str]) -> None:
    """Count the endpoints' pending rows again (rows an earlier release wrote without counting)."""
    for name in sorted(endpoints):
        with transaction.atomic():
            locked = list(EndpointState.objects.select_for_update().filter(name=name).values_list("pending", flat=True))
            actual = PendingEvent.objects.filter(endpoint=name).count()
            if locked and locked[0] != actual:
                EndpointState.objects.filter(name=name).update(pending=actual)


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
        # Some may have been dropped meanwhile (max_pending): the count goes down by those that went.
        gone, _ = PendingEvent.objects.filter(endpoint=endpoint, id__in=ids).delete()
        EndpointState.objects.filter(name=endpoint).update(
            delivered=F("delivered") + len(ids), attempts=0, next_attempt_at=None, last_success_at=now,
            pending=F("pending") - gone)


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
            deleted, _ = PendingEvent.objects.filter(id__in=[p.id for p in gone]).delete()
            EndpointState.objects.get_or_create(name=endpoint)
            EndpointState.objects.filter(name=endpoint).update(expired=F("expired") + len(gone),
                                                               pending=F("pending") - deleted)
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
