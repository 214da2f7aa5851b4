"""Locks held in the database: named leases (the collector's schedule, locks on object storage) and
per-digest transaction locks (registry.services.digest_locks says who takes them and why)."""
from __future__ import annotations

from datetime import datetime
from typing import Any

from django.db import connection

from registry.models import Lease
from registry.queries._sql import fetch_one, json_value, moment, statement, table

# -- named leases ----------------------------------------------------------------------------------


@statement
def _acquire_lease_sql() -> str:
    return (f"UPDATE {table(Lease)} SET owner = %s, until = %s WHERE name = %s "
            "AND (until IS NULL OR until < %s) RETURNING data")


def acquire_lease(name: str, owner: str, now: datetime, until: datetime) -> dict[str, Any] | None:
    """Hold the lease ``name`` until ``until`` if nobody else holds it; its data, or None."""
    # Made when first wanted; only a lease per fetched blob of a pull-through cache is deleted once
    # free (delete_free_lease), and acquiring it again makes it again.
    Lease.objects.bulk_create([Lease(name=name)], ignore_conflicts=True)
    row = fetch_one(_acquire_lease_sql(), [owner, moment(until), name, moment(now)])
    return None if row is None else json_value(row[0])


def release_lease(name: str, owner: str) -> None:
    Lease.objects.filter(name=name, owner=owner).update(owner="", until=None)


def renew_lease(name: str, owner: str, until: datetime) -> bool:
    return Lease.objects.filter(name=name, owner=owner).update(until=until) == 1


def lease_held(name: str, now: datetime) -> bool:
    """Whether somebody holds the lease ``name`` now."""
    return Lease.objects.filter(name=name, until__gt=now).exclude(owner="").exists()


def delete_free_lease(name: str) -> None:
    """Remove the lease ``name`` if nobody holds it (a pull-through cache makes one per blob fetched)."""
    Lease.objects.filter(name=name, owner="").delete()


def set_lease_data(name: str, owner: str, data: dict[str, Any]) -> bool:
    """Replace the data of a lease ``owner`` holds; False when it no longer does."""
    return Lease.objects.filter(name=name, owner=owner).update(data=data) == 1


# -- digest locks ----------------------------------------------------------------------------------


def lock_keys(keys: list[str]) -> None:
    """Hold a lock on each of ``keys``, in the order given, until the current transaction ends.

    On SQLite every transaction already holds the database's single write lock (it starts with
    BEGIN IMMEDIATE, see regsite.config), so nothing more is needed. PostgreSQL runs READ
    COMMITTED transactions side by side: there each key gets a transaction-scoped advisory lock,
    released at commit or rollback.
    """
    if connection.vendor != "postgresql" or not keys:
        return
    # One statement for the lot (a collector locks thousands of digests: a round trip each was
    # most of its time), taken in the order given: the ordered subquery feeds the aggregate.
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(pg_advisory_xact_lock(hashtextextended(k, 0))) FROM (SELECT k FROM "
                       "unnest(%s::text[]) WITH ORDINALITY AS u(k, n) ORDER BY n) AS ordered", [list(keys)])


def lock_repository(repository_id: int, exclusive: bool) -> None:
    """Hold the repository's lock until the current transaction ends: shared by the pushes that
    may make a manifest reachable (a manifest PUT), exclusive for the collector deleting the
    manifests nothing reaches, so that it decides and deletes with no push in between. SQLite's
    one writer at a time does that already."""
    if connection.vendor != "postgresql":
        return
    function = "pg_advisory_xact_lock" if exclusive else "pg_advisory_xact_lock_shared"
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT {function}(hashtextextended(%s, 0))", [f"repository:{repository_id}"])
