"""Repositories: the lookup by name that nearly every request makes, the repositories with content
(what the catalog and the UI list), and deleting one with everything recorded in it."""
from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any, NamedTuple

from django.db import transaction
from django.db.models import Exists, OuterRef, QuerySet

from registry.models import BlobLink, Manifest, ManifestReference, Repository, Tag, Upload
from registry.queries._sql import byte_order, execute, fetch_one, moment, reader, statement, table, visible_names
from registry.visibility import EVERYTHING, Visible


class RepositoryRow(NamedTuple):
    id: int
    name: str
    created_at: datetime


@statement
def _by_name_sql() -> str:
    # Hand-written: compiling the ORM query cost more than running it.
    return f"SELECT id, created_at FROM {table(Repository)} WHERE name = %s"


def find_repository(name: str) -> RepositoryRow | None:
    row = fetch_one(_by_name_sql(), [name])
    if row is None:
        return None
    return RepositoryRow(row[0], name, reader(Repository, "created_at")(row[1]))


PUSHED_EVERY = timedelta(minutes=1)  # a push is recorded at most once per minute and repository


@statement
def _touch_pushed_sql() -> str:
    return f"UPDATE {table(Repository)} SET pushed_at = %s WHERE id = %s AND (pushed_at IS NULL OR pushed_at < %s)"


def touch_pushed(repository_id: int, now: datetime) -> None:
    """Record a push (a manifest stored, a tag moved), unless one was recorded in the last minute:
    the repository's row is written once a minute at most, however many pushes it gets."""
    execute(_touch_pushed_sql(), [moment(now), repository_id, moment(now - PUSHED_EVERY)])


def create_repository(name: str) -> RepositoryRow:
    """The repository ``name``, created unless it exists (by this request or a concurrent one)."""
    repository, _ = Repository.objects.get_or_create(name=name)
    return RepositoryRow(repository.pk, repository.name, repository.created_at)


def probe_registry_table() -> None:
    """One cheap read of a registry table, for readiness: raises when the database cannot serve
    registry queries (a dropped or unreadable table), which a live connection does not show."""
    Repository.objects.exists()


def takes_writes(conn: Any) -> bool:
    """Whether the PostgreSQL server behind ``conn`` (a psycopg connection, for readiness) is a
    primary taking writes: not in recovery, and not read-only by default."""
    row = conn.execute("SELECT pg_is_in_recovery(), current_setting('transaction_read_only')").fetchone()
    return row is not None and not row[0] and row[1] != "on"


def with_content() -> QuerySet[Repository]:
    """Repositories holding at least one manifest: the ones the catalog and the UI show (one that
    holds only blobs, or whose manifests were all deleted, is not listed)."""
    return Repository.objects.filter(Exists(Manifest.objects.filter(repository=OuterRef("pk"))))


def catalog_names(after: str | None, limit: int, visible: Visible = EVERYTHING) -> list[str]:
    """Names of the repositories with content that are ``visible``, in byte order, after ``after``."""
    query = with_content().alias(key=byte_order("name"))
    condition = visible_names(visible)
    if condition is not None:
        query = query.filter(condition)
    if after:
        query = query.filter(key__gt=after)
    return list(query.order_by("key").values_list("name", flat=True)[:limit])


class RemovedRows(NamedTuple):
    tags: int
    manifests: int
    blob_links: int
    sessions: list[tuple[str, dict[str, Any]]]  # (id, storage state): their data is still stored


def delete_repository(repository_id: int) -> RemovedRows:
    """Delete a repository's row and every row recorded in it, in one transaction."""
    with transaction.atomic():
        # Children first and only ids loaded: manifest bodies can be megabytes each.
        ManifestReference.objects.filter(manifest__repository_id=repository_id).delete()
        tags, _ = Tag.objects.filter(repository_id=repository_id).delete()
        manifests, _ = Manifest.objects.filter(repository_id=repository_id).only("id").delete()
        blob_links, _ = BlobLink.objects.filter(repository_id=repository_id).delete()
        sessions = [(upload_id, dict(state or {})) for upload_id, state in
                    Upload.objects.filter(repository_id=repository_id).values_list("id", "storage_state")]
        Upload.objects.filter(repository_id=repository_id).delete()
        Repository.objects.filter(pk=repository_id).delete()
    return RemovedRows(tags, manifests, blob_links, sessions)
