"""Named queries of the registry app. Upload sessions and leases are written with hand-made SQL: taking a
session's lease and reading its state is one conditional UPDATE ... RETURNING (SQLite >= 3.35 and
PostgreSQL), which is what makes two requests of one session, on two replicas, take turns."""
from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache
from typing import Any

from django.db import connection

from registry.models import Lease, Repository, Upload


def _q(name: str) -> str:
    return connection.ops.quote_name(name)


def _time(moment: datetime) -> Any:
    return connection.ops.adapt_datetimefield_value(moment)


def _json(value: Any) -> Any:
    if isinstance(value, (str, bytes, bytearray)):
        return json.loads(value)
    return value or {}


@dataclass(frozen=True)
class Session:
    id: str
    repository_id: int
    algorithm: str
    offset: int
    hash_state: bytes | None
    storage_state: dict[str, Any]
    live: bool  # not idle for longer than the upload expiry
    lease_owner: str = ""


@lru_cache(maxsize=2)
def _acquire_sql(vendor: str) -> str:
    upload, repo = _q(Upload._meta.db_table), _q(Repository._meta.db_table)
    return (f"UPDATE {upload} SET lease_owner = %s, lease_until = %s WHERE id = %s "
            f"AND repository_id = (SELECT id FROM {repo} WHERE name = %s) "
            "AND (lease_until IS NULL OR lease_until < %s) "
            f"RETURNING repository_id, algorithm, {_q('offset')}, hash_state, storage_state, updated_at >= %s")


def acquire_session(upload_id: str, name: str, owner: str, now: datetime, until: datetime,
                    live_after: datetime) -> Session | None:
    """Take the session's lease and read its state; None when it is unknown or leased by another."""
    with connection.cursor() as cursor:
        cursor.execute(_acquire_sql(connection.vendor),
                       [owner, _time(until), upload_id, name, _time(now), _time(live_after)])
        row = cursor.fetchone()
    if row is None:
        return None
    repository_id, algorithm, offset, hash_state, storage_state, live = row
    return Session(upload_id, repository_id, algorithm, offset, bytes(hash_state) if hash_state is not None
                   else None, _json(storage_state), bool(live))


def take_over_session(upload_id: str, name: str, previous: str, owner: str, until: datetime,
                      live_after: datetime) -> Session | None:
    """Take the lease from ``previous`` (known to be gone), unless someone took it first."""
    updated = Upload.objects.filter(id=upload_id, repository__name=name, lease_owner=previous).update(
        lease_owner=owner, lease_until=until)
    if not updated:
        return None
    return read_session(upload_id, name, live_after)


def read_session(upload_id: str, name: str, live_after: datetime) -> Session | None:
    """The session's state without its lease (for a status request or a refusal)."""
    row = (Upload.objects.filter(id=upload_id, repository__name=name)
           .values_list("repository_id", "algorithm", "offset", "hash_state", "storage_state", "updated_at",
                        "lease_owner")
           .first())
    if row is None:
        return None
    repository_id, algorithm, offset, hash_state, storage_state, updated_at, owner = row
    return Session(upload_id, repository_id, algorithm, offset, bytes(hash_state) if hash_state is not None
                   else None, _json(storage_state), updated_at >= live_after, owner)


def insert_session(upload_id: str, repository_id: int, algorithm: str, now: datetime, owner: str = "") -> None:
    upload = _q(Upload._meta.db_table)
    with connection.cursor() as cursor:
        cursor.execute(f"INSERT INTO {upload} (id, repository_id, algorithm, created_at, updated_at, "
                       f"{_q('offset')}, storage_state, lease_owner, owner) VALUES (%s, %s, %s, %s, %s, 0, %s, '', %s)",
                       [upload_id, repository_id, algorithm, _time(now), _time(now), "{}", owner])


def save_session(upload_id: str, owner: str, offset: int, hash_state: bytes | None,
                 storage_state: dict[str, Any], now: datetime) -> bool:
    """Record the session's progress and let go of its lease; False if the lease was lost."""
    upload = _q(Upload._meta.db_table)
    with connection.cursor() as cursor:
        cursor.execute(f"UPDATE {upload} SET {_q('offset')} = %s, hash_state = %s, storage_state = %s, "
                       "updated_at = %s, lease_owner = '', lease_until = NULL WHERE id = %s AND lease_owner = %s",
                       [offset, hash_state, json.dumps(storage_state), _time(now), upload_id, owner])
        return cursor.rowcount == 1


def release_session(upload_id: str, owner: str) -> None:
    upload = _q(Upload._meta.db_table)
    with connection.cursor() as cursor:
        cursor.execute(f"UPDATE {upload} SET lease_owner = '', lease_until = NULL WHERE id = %s AND lease_owner = %s",
                       [upload_id, owner])


def renew_session(upload_id: str, owner: str, until: datetime) -> bool:
    upload = _q(Upload._meta.db_table)
    with connection.cursor() as cursor:
        cursor.execute(f"UPDATE {upload} SET lease_until = %s WHERE id = %s AND lease_owner = %s",
                       [_time(until), upload_id, owner])
        return cursor.rowcount == 1


def delete_session(upload_id: str) -> int:
    deleted, _ = Upload.objects.filter(id=upload_id).delete()
    return deleted


# -- named leases --------------------------------------------------------------------------------


def acquire_lease(name: str, owner: str, now: datetime, until: datetime) -> dict[str, Any] | None:
    """Hold the lease ``name`` until ``until`` if nobody else holds it; its data, or None."""
    Lease.objects.get_or_create(name=name)
    lease = _q(Lease._meta.db_table)
    with connection.cursor() as cursor:
        cursor.execute(f"UPDATE {lease} SET owner = %s, until = %s WHERE name = %s "
                       "AND (until IS NULL OR until < %s) RETURNING data",
                       [owner, _time(until), name, _time(now)])
        row = cursor.fetchone()
    return None if row is None else _json(row[0])


def release_lease(name: str, owner: str) -> None:
    Lease.objects.filter(name=name, owner=owner).update(owner="", until=None)


def renew_lease(name: str, owner: str, until: datetime) -> bool:
    return Lease.objects.filter(name=name, owner=owner).update(until=until) == 1


# -- upload sessions per owner -----------------------------------------------------------------


def count_live_sessions(owner: str, live_after: datetime) -> int:
    """Upload sessions of ``owner`` not idle since before ``live_after`` (index upload_owner_idx)."""
    return Upload.objects.filter(owner=owner, updated_at__gte=live_after).count()
