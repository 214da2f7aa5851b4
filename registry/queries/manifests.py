"""Manifests: the lookup by tag or by digest (shared by the API and the UI), recording a pull,
storing one with what it references, and the reference graph the garbage collector and retention
walk."""
from __future__ import annotations

from datetime import datetime
from typing import Any, Iterable, NamedTuple, Sequence

from django.db import connection, transaction

from registry.models import Manifest, ManifestReference, Repository, Tag
from registry.queries._sql import execute, fetch_all, fetch_one, marks, moment, statement, table
from registry.queries.graph import chunks
from registry.queries.repositories import touch_pushed


class ManifestRow(NamedTuple):
    id: int
    digest: str
    media_type: str
    size: int
    body: bytes | None  # None when asked for without it
    pull_due: bool = False  # with the body: no pull recorded in the last minute (registry.policies.pulls)


class ManifestDetails(NamedTuple):
    artifact_type: str
    subject_digest: str
    created_at: datetime
    last_pulled_at: datetime | None


def pull_due_sql() -> str:
    """Whether a pull of manifest ``m`` should be recorded (none in the last minute), worked out by
    the database: reading the time itself and comparing it in Python was most of what recording
    pulls added to a GET (SQLite's text turned into an aware datetime on every pull)."""
    column = "m.last_pulled_at"
    if connection.vendor == "postgresql":
        # The statement's time, as SQLite's 'now': now() is the transaction's start, which a long
        # transaction (a test's, a migration's) leaves behind.
        return f"({column} IS NULL OR {column} < statement_timestamp() - interval '1 minute')"
    # SQLite keeps Django's times as 'YYYY-MM-DD HH:MM:SS.ffffff' in UTC, which datetime() compares as text.
    return f"({column} IS NULL OR {column} < datetime('now', '-1 minute'))"


def _pull_columns(with_body: bool) -> str:
    # A GET (a pull) reads the body and whether recording the pull is due; a HEAD is no pull.
    return f"m.id, m.digest, m.media_type, m.size{f', m.body, {pull_due_sql()}' if with_body else ''}"


# Hand-written: compiling these with the ORM cost more than running them (every manifest GET and
# HEAD). Only the columns a pull needs: each more, a datetime above all, costs on every pull.
@statement
def _by_digest_sql(with_body: bool) -> str:
    return (f"SELECT {_pull_columns(with_body)} FROM {table(Manifest)} m "
            f"JOIN {table(Repository)} r ON r.id = m.repository_id WHERE r.name = %s AND m.digest = %s")


@statement
def _by_tag_sql(with_body: bool) -> str:
    return (f"SELECT {_pull_columns(with_body)} FROM {table(Tag)} t "
            f"JOIN {table(Repository)} r ON r.id = t.repository_id JOIN {table(Manifest)} m ON m.id = t.manifest_id "
            "WHERE r.name = %s AND t.name = %s")


def _row(row: tuple[Any, ...] | None, with_body: bool) -> ManifestRow | None:
    if row is None:
        return None
    if with_body:
        return ManifestRow(row[0], row[1], row[2], row[3], bytes(row[4]), bool(row[5]))
    return ManifestRow(row[0], row[1], row[2], row[3], None)


def manifest_by_digest(repository: str, digest: str, with_body: bool = True) -> ManifestRow | None:
    return _row(fetch_one(_by_digest_sql(with_body), [repository, digest]), with_body)


def manifest_by_tag(repository: str, tag: str, with_body: bool = True) -> ManifestRow | None:
    return _row(fetch_one(_by_tag_sql(with_body), [repository, tag]), with_body)


@statement
def _touch_sql() -> str:
    return (f"UPDATE {table(Manifest)} SET last_pulled_at = %s WHERE id = %s "
            "AND (last_pulled_at IS NULL OR last_pulled_at < %s)")


def touch_pulled(manifest_id: int, now: datetime, before: datetime) -> None:
    """Record a pull, unless one was recorded since ``before`` (by another worker, say)."""
    execute(_touch_sql(), [moment(now), manifest_id, moment(before)])


def manifest_details(manifest_id: int) -> ManifestDetails:
    """What a page about a manifest shows beyond what a pull needs."""
    return ManifestDetails(*Manifest.objects.filter(id=manifest_id).values_list(
        "artifact_type", "subject_digest", "created_at", "last_pulled_at").get())


@statement
def _id_sql() -> str:
    return f"SELECT id FROM {table(Manifest)} WHERE repository_id = %s AND digest = %s"


def manifest_id(repository_id: int, digest: str) -> int | None:
    row = fetch_one(_id_sql(), [repository_id, digest])
    return None if row is None else int(row[0])


@statement
def _stored_sql(count: int) -> str:
    return f"SELECT digest FROM {table(Manifest)} WHERE repository_id = %s AND digest IN ({marks(count)})"


def stored_manifests(repository_id: int, digests: Iterable[str]) -> set[str]:
    """Which of ``digests`` are manifests of the repository."""
    wanted = sorted(set(digests))
    if not wanted:
        return set()
    return {row[0] for row in fetch_all(_stored_sql(len(wanted)), [repository_id, *wanted])}


def insert_manifest(repository_id: int, digest: str, body: bytes, media_type: str, artifact_type: str,
                    subject_digest: str, annotations: dict[str, Any], blobs: Iterable[str],
                    children: Iterable[str], pulled_at: datetime | None = None) -> int:
    """Store a manifest and the blobs and child manifests it references; its id. ``pulled_at``: it
    is stored by a pull (a pull-through cache's miss), which counts as its last."""
    manifest = Manifest.objects.create(
        repository_id=repository_id, digest=digest, media_type=media_type, size=len(body), body=body,
        artifact_type=artifact_type, subject_digest=subject_digest, annotations=annotations,
        last_pulled_at=pulled_at,
    )
    ManifestReference.objects.bulk_create(
        [ManifestReference(manifest=manifest, digest=d, kind=ManifestReference.BLOB) for d in blobs]
        + [ManifestReference(manifest=manifest, digest=d, kind=ManifestReference.MANIFEST) for d in children]
    )
    touch_pushed(repository_id, manifest.created_at)
    return int(manifest.pk)


def delete_manifest(repository_id: int, digest: str) -> int:
    """Delete a manifest with its tags and references; how many rows went (0: none was stored)."""
    deleted, _ = Manifest.objects.filter(repository_id=repository_id, digest=digest).only("id").delete()
    return deleted


# -- the reference graph (garbage collection) ------------------------------------------------------


class ManifestNode(NamedTuple):
    id: int
    digest: str
    subject_digest: str
    created_at: datetime
    last_pulled_at: datetime | None  # retention keeps what is pulled


def manifest_nodes(repository_id: int) -> list[ManifestNode]:
    """Every manifest of the repository, bodies left out (the collector and retention)."""
    rows = Manifest.objects.filter(repository_id=repository_id).values_list(
        "id", "digest", "subject_digest", "created_at", "last_pulled_at")
    return [ManifestNode(*row) for row in rows]


def index_children(repository_id: int) -> list[tuple[int, str]]:
    """(index id, child digest) for every manifest an index of the repository lists."""
    return list(ManifestReference.objects.filter(
        manifest__repository_id=repository_id, kind=ManifestReference.MANIFEST
    ).values_list("manifest_id", "digest"))


def delete_manifests(manifest_ids: Sequence[int]) -> None:
    """Delete manifests with their references and tags. Statements of its own: Django's cascade
    read the manifests back and deleted through its collector, 43 ms a collector's page of about
    200 at 100,000 images, twice the time of the three statements (issue 25)."""
    with transaction.atomic(savepoint=False):
        for chunk in chunks(manifest_ids):
            within = f"IN ({marks(len(chunk))})"
            execute(f"DELETE FROM {table(ManifestReference)} WHERE manifest_id {within}", chunk)
            execute(f"DELETE FROM {table(Tag)} WHERE manifest_id {within}", chunk)
            execute(f"DELETE FROM {table(Manifest)} WHERE id {within}", chunk)
