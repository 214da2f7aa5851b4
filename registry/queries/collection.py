"""What the garbage collector and retention ask of the whole registry, as set-based statements over
bounded ranges, so that a collection's work grows with what it examines and never with how often a
blob is shared (registry.services.gc, registry.services.reachability).

- Blob links are examined a range of repositories at a time: the blobs the range's manifests
  reference are gathered once (a materialised set), and each link of the range is looked up in
  it. Looking each link up from its digest instead reads every reference to a shared base layer
  (a million, in a million repositories) once per page.
- Blob rows are examined a range of ids at a time, each checked for any reference by an index
  probe that stops at the first.
- Manifests are examined a repository at a time (registry.queries.graph), and only in the
  repositories one statement per page of repositories found untagged manifests in.
- A dry run deletes nothing, yet must not count a reference held by a manifest it would delete:
  those manifests' ids are kept in a temporary table for the run (``hold_doomed``), which the
  statements leave out.
"""
from __future__ import annotations

from contextlib import contextmanager
from datetime import datetime
from typing import Iterator, NamedTuple, Sequence

from django.db import connection

from registry.models import Blob, BlobLink, Manifest, ManifestReference, Repository, Tag
from registry.queries._sql import execute, execute_many, fetch_all, fetch_one, marks, moment, statement, table
from registry.queries.graph import chunks

DOOMED = "registry_gc_doomed"  # a temporary table, one per connection


def _ranges(boundary_sql: str, first_sql: str, batch: int) -> Iterator[tuple[int, int]]:
    """(low, high) ranges of a column, each holding about ``batch`` rows (one value holding more
    is a range of its own), in order, read from an index on that column."""
    low = 0
    while (row := fetch_one(first_sql, [low])) and row[0] is not None:
        low = int(row[0])
        found = fetch_one(boundary_sql, [low, batch])
        if found is None:
            yield low, 2 ** 62
            return
        high = int(found[0]) - 1 if int(found[0]) > low else int(found[0])
        yield low, high
        low = high + 1


# -- the repositories, a page at a time -------------------------------------------------------------


class NamedRepository(NamedTuple):
    id: int
    name: str


@statement
def _repository_page_sql() -> str:
    return f"SELECT id, name FROM {table(Repository)} WHERE id > %s ORDER BY id LIMIT %s"


def repository_page(after_id: int, limit: int) -> list[NamedRepository]:
    return [NamedRepository(*row) for row in fetch_all(_repository_page_sql(), [after_id, limit])]


# -- a dry run's doomed manifests -------------------------------------------------------------------


@contextmanager
def serial_plans() -> Iterator[None]:
    """PostgreSQL plans without parallel workers meanwhile: a collection's statements each read a
    bounded range, where starting workers costs more than it saves, and the cores are the
    requests' that are served meanwhile."""
    if connection.vendor != "postgresql":
        yield
        return
    execute("SET max_parallel_workers_per_gather = 0", [])
    try:
        yield
    finally:
        execute("RESET max_parallel_workers_per_gather", [])


def hold_doomed(manifest_ids: Sequence[int]) -> None:
    """Remember manifests a dry run would delete, for the rest of the run (``forget_doomed``)."""
    execute(f"CREATE TEMPORARY TABLE IF NOT EXISTS {DOOMED} (id bigint PRIMARY KEY)", [])
    execute_many(f"INSERT INTO {DOOMED} (id) VALUES (%s) ON CONFLICT DO NOTHING", [(mid,) for mid in manifest_ids])


def forget_doomed() -> None:
    execute(f"DROP TABLE IF EXISTS {DOOMED}", [])


def _not_doomed(column: str, discount: bool) -> str:
    # NOT EXISTS on the table's key, not NOT IN: PostgreSQL rescans a NOT IN list too big to hash.
    return f" AND NOT EXISTS (SELECT 1 FROM {DOOMED} d WHERE d.id = {column})" if discount else ""


# -- blob links -------------------------------------------------------------------------------------


class LinkRow(NamedTuple):
    id: int
    repository_id: int
    repository: str
    digest: str


def link_ranges(batch: int) -> Iterator[tuple[int, int]]:
    """Ranges of repository ids holding about ``batch`` blob links each."""
    links = table(BlobLink)
    return _ranges(f"SELECT repository_id FROM {links} WHERE repository_id >= %s ORDER BY repository_id "
                   "LIMIT 1 OFFSET %s", f"SELECT MIN(repository_id) FROM {links} WHERE repository_id >= %s", batch)


@statement
def _unreferenced_links_sql(count: int, discount: bool) -> str:
    # The referenced (repository, digest) pairs of the range, gathered once and MATERIALIZED so
    # that no planner turns the lookup into a probe by digest (PostgreSQL >= 12, SQLite >= 3.35).
    # Checking a few links again (``count``), only their digests' references are gathered.
    some = f"l.id IN ({marks(count)})"
    theirs = (f" AND mr.digest IN (SELECT b.digest FROM {table(BlobLink)} l JOIN {table(Blob)} b "
              f"ON b.id = l.blob_id WHERE {some})") if count else ""
    return (
        f"WITH referenced AS MATERIALIZED (SELECT m.repository_id, mr.digest FROM {table(Manifest)} m "
        f"JOIN {table(ManifestReference)} mr ON mr.manifest_id = m.id WHERE m.repository_id BETWEEN %s AND %s "
        f"AND mr.kind = %s{_not_doomed('m.id', discount)}{theirs}) "
        f"SELECT l.id, l.repository_id, r.name, b.digest FROM {table(BlobLink)} l "
        f"JOIN {table(Blob)} b ON b.id = l.blob_id JOIN {table(Repository)} r ON r.id = l.repository_id "
        "WHERE l.repository_id BETWEEN %s AND %s AND l.created_at < %s" + (f" AND {some}" if count else "")
        + " AND NOT EXISTS (SELECT 1 FROM referenced x WHERE x.repository_id = l.repository_id "
        "AND x.digest = b.digest) ORDER BY l.id"
    )


def unreferenced_links(low: int, high: int, cutoff: datetime, link_ids: Sequence[int] = (),
                       discount: bool = False) -> list[LinkRow]:
    """Links of repositories ``low`` to ``high`` made before ``cutoff`` that no manifest of their
    repository references (only among ``link_ids`` when given; leaving out the manifests a dry run
    would delete with ``discount``)."""
    ids = list(link_ids)
    params = [low, high, ManifestReference.BLOB, *ids, low, high, moment(cutoff), *ids]
    return [LinkRow(*row) for row in fetch_all(_unreferenced_links_sql(len(ids), discount), params)]


def delete_links(link_ids: Sequence[int]) -> None:
    for chunk in chunks(link_ids):
        execute(f"DELETE FROM {table(BlobLink)} WHERE id IN ({marks(len(chunk))})", chunk)


# -- blob rows --------------------------------------------------------------------------------------


class UnusedBlob(NamedTuple):
    id: int
    digest: str
    size: int


def blob_ranges(batch: int) -> Iterator[tuple[int, int]]:
    """Ranges of blob ids holding ``batch`` blobs each."""
    blobs = table(Blob)
    return _ranges(f"SELECT id FROM {blobs} WHERE id >= %s ORDER BY id LIMIT 1 OFFSET %s",
                   f"SELECT MIN(id) FROM {blobs} WHERE id >= %s", batch)


@statement
def _unused_blobs_sql(count: int, discount: bool) -> str:
    return (
        f"SELECT b.id, b.digest, b.size FROM {table(Blob)} b WHERE b.id BETWEEN %s AND %s AND b.created_at < %s"
        + (f" AND b.id IN ({marks(count)})" if count else "")
        + f" AND NOT EXISTS (SELECT 1 FROM {table(ManifestReference)} mr WHERE mr.digest = b.digest "
        f"AND mr.kind = %s{_not_doomed('mr.manifest_id', discount)}) "
        # Probed blob by blob (a scalar subquery): as NOT EXISTS, PostgreSQL may read every link
        # for the fresh ones instead, once per range.
        f"AND (SELECT 1 FROM {table(BlobLink)} l WHERE l.blob_id = b.id AND l.created_at >= %s LIMIT 1) IS NULL "
        "ORDER BY b.id"
    )


def unused_blobs(low: int, high: int, cutoff: datetime, blob_ids: Sequence[int] = (),
                 discount: bool = False) -> list[UnusedBlob]:
    """Blobs with ids ``low`` to ``high`` created before ``cutoff`` that no manifest of any
    repository references and nobody linked since ``cutoff`` (only among ``blob_ids`` when given;
    leaving out the manifests a dry run would delete with ``discount``)."""
    at = moment(cutoff)
    params = [low, high, at, *blob_ids, ManifestReference.BLOB, at]
    return [UnusedBlob(*row) for row in fetch_all(_unused_blobs_sql(len(blob_ids), discount), params)]


def delete_blob_rows(blob_ids: Sequence[int]) -> None:
    """Delete blob rows and whatever links they still have."""
    for chunk in chunks(blob_ids):
        execute(f"DELETE FROM {table(BlobLink)} WHERE blob_id IN ({marks(len(chunk))})", chunk)
        execute(f"DELETE FROM {table(Blob)} WHERE id IN ({marks(len(chunk))})", chunk)


@statement
def _with_candidates_sql() -> str:
    return (f"SELECT DISTINCT m.repository_id FROM {table(Manifest)} m WHERE m.repository_id BETWEEN %s AND %s "
            f"AND m.created_at < %s AND NOT EXISTS (SELECT 1 FROM {table(Tag)} t WHERE t.manifest_id = m.id)")


def repositories_with_untagged(low: int, high: int, cutoff: datetime) -> set[int]:
    """Of the repositories ``low`` to ``high``, those with a manifest pushed before ``cutoff``
    that no tag points at: one pass over their manifests, instead of queries per repository."""
    return {int(row[0]) for row in fetch_all(_with_candidates_sql(), [low, high, moment(cutoff)])}
