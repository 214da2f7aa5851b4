"""Quota usage rows ([[quota]] rules, registry.policies.quotas): locking, creating and changing one,
and counting a rule's usage again from the blob links."""
from __future__ import annotations

from typing import Iterable, NamedTuple, Sequence

from django.db.models import QuerySet, Sum
from django.utils import timezone

from registry.models import Blob, BlobLink, QuotaUsage, Repository
from registry.queries._sql import execute, moment, statement, table


class QuotaRow(NamedTuple):
    used: int  # bytes
    scope: str  # the rules the figure was counted under


def lock_quota(name: str) -> QuotaRow | None:
    """The quota's row, locked until the transaction ends (PostgreSQL; on SQLite every write
    transaction holds the database's one write lock already)."""
    row = QuotaUsage.objects.select_for_update().filter(name=name).values_list("used_bytes", "scope").first()
    return None if row is None else QuotaRow(*row)


@statement
def _create_sql() -> str:
    return (f"INSERT INTO {table(QuotaUsage)} (name, scope, used_bytes, updated_at) "
            "VALUES (%s, '', 0, %s) ON CONFLICT (name) DO NOTHING")


def create_quota(name: str) -> None:
    """The quota's row, empty, unless it exists (created by a concurrent transaction, say)."""
    execute(_create_sql(), [name, moment(timezone.now())])


def set_quota(name: str, used: int, scope: str) -> None:
    QuotaUsage.objects.filter(name=name).update(used_bytes=used, scope=scope, updated_at=timezone.now())


@statement
def _add_sql() -> str:
    return f"UPDATE {table(QuotaUsage)} SET used_bytes = used_bytes + %s, updated_at = %s WHERE name = %s"


def add_quota(name: str, delta: int) -> None:
    execute(_add_sql(), [delta, moment(timezone.now()), name])


def quota_rows() -> dict[str, QuotaRow]:
    return {name: QuotaRow(used, scope) for name, used, scope in
            QuotaUsage.objects.values_list("name", "used_bytes", "scope")}


def delete_quota_rows_except(names: Iterable[str]) -> int:
    return QuotaUsage.objects.exclude(name__in=list(names)).delete()[0]


def _matching(regex: str, excluded: Sequence[str]) -> QuerySet[Repository]:
    """Repositories whose name matches ``regex`` and none of ``excluded`` (the rules before it)."""
    query = Repository.objects.filter(name__regex=regex)
    for earlier in excluded:
        query = query.exclude(name__regex=earlier)
    return query


def usage_of(regex: str, excluded: Sequence[str]) -> int:
    """Bytes of the distinct blobs linked in the repositories of a rule, counted from the links."""
    linked = BlobLink.objects.filter(repository__in=_matching(regex, excluded)).values("blob_id")
    return Blob.objects.filter(id__in=linked).aggregate(total=Sum("size"))["total"] or 0
