"""Every database statement of the audit app, as named functions returning small typed rows."""
from __future__ import annotations

from dataclasses import dataclass, fields
from datetime import datetime

from django.db.models import Q, QuerySet

from audit.models import AuditEvent


@dataclass(frozen=True)
class EventRow:
    at: datetime
    actor: str
    actor_kind: str
    token: str
    address: str
    action: str
    repository: str
    reference: str
    digest: str
    outcome: str
    detail: str
    request_id: str
    id: int = 0  # set once written


_FIELDS = tuple(field.name for field in fields(EventRow))


def add(row: EventRow) -> int:
    """Write the event; its id (the order of the log)."""
    values = {name: getattr(row, name) for name in _FIELDS if name != "id"}
    return int(AuditEvent.objects.create(**values).pk)


@dataclass(frozen=True)
class Filters:
    since: datetime | None = None
    until: datetime | None = None
    actor: str = ""  # a user's or robot's name, or a token's hash prefix
    repository: str = ""  # the name, or a prefix ending in "/" for a namespace
    action: str = ""
    outcome: str = ""


def _filtered(filters: Filters) -> QuerySet[AuditEvent]:
    query = AuditEvent.objects.all()
    if filters.since is not None:
        query = query.filter(at__gte=filters.since)
    if filters.until is not None:
        query = query.filter(at__lt=filters.until)
    if filters.actor:
        query = query.filter(Q(actor=filters.actor) | Q(token=filters.actor.lower()))
    if filters.repository.endswith("/"):
        query = query.filter(repository__startswith=filters.repository)
    elif filters.repository:
        query = query.filter(repository=filters.repository)
    if filters.action:
        query = query.filter(action=filters.action)
    if filters.outcome:
        query = query.filter(outcome=filters.outcome)
    return query


def _rows(query: QuerySet[AuditEvent], order: str, limit: int) -> list[EventRow]:
    return [EventRow(**dict(zip(_FIELDS, row, strict=True)))
            for row in query.order_by(order).values_list(*_FIELDS)[:limit]]


def events(filters: Filters, after_id: int = 0, limit: int = 1000) -> list[EventRow]:
    """The matching events in the order they were written, after ``after_id``, at most ``limit``."""
    return _rows(_filtered(filters).filter(id__gt=after_id), "id", limit)


def newest(filters: Filters, before_id: int = 0, limit: int = 50) -> list[EventRow]:
    """The latest matching events, newest first, before ``before_id`` (a page of the UI)."""
    query = _filtered(filters)
    return _rows(query.filter(id__lt=before_id) if before_id else query, "-id", limit)


def delete_before(moment: datetime, at_most: int) -> int:
    """Delete up to ``at_most`` of the oldest events written before ``moment``; how many."""
    ids = list(AuditEvent.objects.filter(at__lt=moment).order_by("id").values_list("id", flat=True)[:at_most])
    if not ids:
        return 0
    deleted, _ = AuditEvent.objects.filter(id__in=ids).delete()
    return deleted


def count() -> int:
    return AuditEvent.objects.count()
