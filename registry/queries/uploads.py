"""Upload sessions. Taking a session's lease and reading its state is one conditional
UPDATE ... RETURNING (SQLite >= 3.35 and PostgreSQL), which is what makes two requests of one
session, on two replicas, take turns."""
from __future__ import annotations

import json
from datetime import datetime
from typing import Any, Iterable, NamedTuple

from registry.models import Repository, Upload
from registry.queries._sql import execute, fetch_one, json_value, moment, name, statement, table


class Session(NamedTuple):
    id: str
    repository_id: int
    algorithm: str
    offset: int
    hash_state: bytes | None
    storage_state: dict[str, Any]
    live: bool  # not idle for longer than the upload expiry
    lease_owner: str = ""


@statement
def _acquire_sql() -> str:
    return (f"UPDATE {table(Upload)} SET lease_owner = %s, lease_until = %s WHERE id = %s "
            f"AND repository_id = (SELECT id FROM {table(Repository)} WHERE name = %s) "
            "AND (lease_until IS NULL OR lease_until < %s) "
            f"RETURNING repository_id, algorithm, {name('offset')}, hash_state, storage_state, updated_at >= %s")


def acquire_session(upload_id: str, repository: str, owner: str, now: datetime, until: datetime,
                    live_after: datetime) -> Session | None:
    """Take the session's lease and read its state; None when it is unknown or leased by another."""
    row = fetch_one(_acquire_sql(), [owner, moment(until), upload_id, repository, moment(now), moment(live_after)])
    if row is None:
        return None
    repository_id, algorithm, offset, hash_state, storage_state, live = row
    return Session(upload_id, repository_id, algorithm, offset, bytes(hash_state) if hash_state is not None
                   else None, json_value(storage_state), bool(live))


def take_over_session(upload_id: str, repository: str, previous: str, owner: str, until: datetime,
                      live_after: datetime) -> Session | None:
    """Take the lease from ``previous`` (known to be gone), unless someone took it first."""
    updated = Upload.objects.filter(id=upload_id, repository__name=repository, lease_owner=previous).update(
        lease_owner=owner, lease_until=until)
    if not updated:
        return None
    return read_session(upload_id, repository, live_after)


def read_session(upload_id: str, repository: str, live_after: datetime) -> Session | None:
    """The session's state without its lease (for a status request or a refusal)."""
    row = (Upload.objects.filter(id=upload_id, repository__name=repository)
           .values_list("repository_id", "algorithm", "offset", "hash_state", "storage_state", "updated_at",
                        "lease_owner")
           .first())
    if row is None:
        return None
    repository_id, algorithm, offset, hash_state, storage_state, updated_at, owner = row
    return Session(upload_id, repository_id, algorithm, offset, bytes(hash_state) if hash_state is not None
                   else None, json_value(storage_state), updated_at >= live_after, owner)


@statement
def _insert_sql() -> str:
    return (f"INSERT INTO {table(Upload)} (id, repository_id, algorithm, created_at, updated_at, "
            f"{name('offset')}, storage_state, lease_owner, owner) VALUES (%s, %s, %s, %s, %s, 0, %s, '', %s)")


def insert_session(upload_id: str, repository_id: int, algorithm: str, now: datetime, owner: str = "") -> None:
    execute(_insert_sql(), [upload_id, repository_id, algorithm, moment(now), moment(now), "{}", owner])


@statement
def _count_live_sql() -> str:
    return f"SELECT COUNT(*) FROM {table(Upload)} WHERE owner = %s AND updated_at >= %s"


def count_live_sessions(owner: str, live_after: datetime) -> int:
    """Upload sessions of ``owner`` not idle since before ``live_after`` (index upload_owner_idx).
    Hand-written: every POST of a push counts, and compiling the ORM's COUNT cost more than the
    rest of the POST's statements together."""
    row = fetch_one(_count_live_sql(), [owner, moment(live_after)])
    return int(row[0]) if row is not None else 0


@statement
def _save_sql() -> str:
    return (f"UPDATE {table(Upload)} SET {name('offset')} = %s, hash_state = %s, storage_state = %s, "
            "updated_at = %s, lease_owner = '', lease_until = NULL WHERE id = %s AND lease_owner = %s")


def save_session(upload_id: str, owner: str, offset: int, hash_state: bytes | None,
                 storage_state: dict[str, Any], now: datetime) -> bool:
    """Record the session's progress and let go of its lease; False if the lease was lost."""
    return execute(_save_sql(), [offset, hash_state, json.dumps(storage_state), moment(now), upload_id,
                                 owner]) == 1


@statement
def _release_sql() -> str:
    return f"UPDATE {table(Upload)} SET lease_owner = '', lease_until = NULL WHERE id = %s AND lease_owner = %s"


def release_session(upload_id: str, owner: str) -> None:
    execute(_release_sql(), [upload_id, owner])


@statement
def _renew_sql() -> str:
    return f"UPDATE {table(Upload)} SET lease_until = %s WHERE id = %s AND lease_owner = %s"


def renew_session(upload_id: str, owner: str, until: datetime) -> bool:
    return execute(_renew_sql(), [moment(until), upload_id, owner]) == 1


@statement
def _delete_sql() -> str:
    return f"DELETE FROM {table(Upload)} WHERE id = %s"


def delete_session(upload_id: str) -> int:
    # Hand-written: every completed push deletes its session, and the ORM's delete (a collector,
    # even for a row nothing refers to) cost as much as the blob link's three statements.
    return execute(_delete_sql(), [upload_id])


def session_storage_state(upload_id: str) -> dict[str, Any]:
    """The storage driver's resume state of a session ({} when it is gone)."""
    state = Upload.objects.filter(id=upload_id).values_list("storage_state", flat=True).first()
    return dict(state or {})


# -- expiry ----------------------------------------------------------------------------------------


def idle_sessions(idle_since: datetime) -> list[tuple[str, dict[str, Any]]]:
    """(id, storage state) of the sessions not written to since ``idle_since``."""
    rows = Upload.objects.filter(updated_at__lt=idle_since).values_list("id", "storage_state")
    return [(upload_id, dict(state or {})) for upload_id, state in rows]


def delete_idle_session(upload_id: str, idle_since: datetime) -> bool:
    """Delete the session only if it is still idle (a chunk may have arrived since it was listed)."""
    deleted, _ = Upload.objects.filter(id=upload_id, updated_at__lt=idle_since).delete()
    return deleted > 0


def known_sessions(upload_ids: Iterable[str]) -> set[str]:
    return set(Upload.objects.filter(id__in=list(upload_ids)).values_list("id", flat=True))


def multipart_upload_ids() -> set[str]:
    """The object store's multipart upload of every session that has one."""
    states = Upload.objects.values_list("storage_state", flat=True)
    return {state["upload_id"] for state in states if state and state.get("upload_id")}
