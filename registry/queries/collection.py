"""What the garbage collector and retention ask of the whole registry, as set-based statements over
bounded ranges, so that a collection's work grows with what it examines and never with how often a
blob is shared (registry.services.gc, registry.services.reachability).

- Blob links are examined a range of repositories at a time: the blobs the range's manifests
  reference are gathered once (a materialised set), and each link of the range is looked up in
  it; SQLite, which has no hash join, reads the links and the references each in (repository,
  digest) order instead and merges them. Looking each link up from its digest instead reads every
  reference to a shared base layer (a million, in a million repositories) once per page.
- Blob rows are examined a range of digests at a time, each checked for any reference by a probe
  of the references' digest index that stops at the first; in digest order, the probes of a range
  read neighbouring pages of that index.
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
from registry.queries._sql import (
    execute,
    fetch_all,
    fetch_one,
    marks,
    moment,
    statement,
    streamed,
    table,
)
from registry.queries.graph import chunks

DOOMED = "registry_gc_doomed"  # a temporary table, one per connection
MERGE_FROM = 2000  # manifests in a range of links from which SQLite merges its check (``_merges``)


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
def range_plans() -> Iterator[None]:
    """PostgreSQL plans a collection's statements meanwhile as what they are, reads of a bounded
    range through an index: no sequential scans where an index serves (a small table's whole read
    looks cheaper to the planner, but it is work that grows with the table, not with the range,
    and tables grow), and no parallel workers (starting them costs more than a range saves, and
    the cores are the requests' that are served meanwhile)."""
    if connection.vendor != "postgresql":
        yield
        return
    execute("SET max_parallel_workers_per_gather = 0", [])
    execute("SET enable_seqscan = off", [])
    execute("SET random_page_cost = 1.1", [])
    try:
        yield
    finally:
        execute("RESET random_page_cost", [])
        execute("RESET enable_seqscan", [])
        execute("RESET max_parallel_workers_per_gather", [])


@statement
def _hold_doomed_sql(count: int) -> str:
    return f"INSERT INTO {DOOMED} (id) VALUES {', '.join(['(%s)'] * count)} ON CONFLICT DO NOTHING"


def hold_doomed(manifest_ids: Sequence[int]) -> None:
    """Remember manifests a dry run would delete, for the rest of the run (``forget_doomed``)."""
    execute(f"CREATE TEMPORARY TABLE IF NOT EXISTS {DOOMED} (id bigint PRIMARY KEY)", [])
    # One statement per chunk, not a row at a time: outside a transaction every row was a
    # transaction of its own, and on SQLite from the second collection of a process on (the
    # scheduler's), once a first run had dropped the table, each cost 25 us instead of 2.5.
    for chunk in chunks(list(manifest_ids)):
        execute(_hold_doomed_sql(len(chunk)), chunk)


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
def _unreferenced_links_sql(count: int, discount: bool, by_digest: bool) -> str:
    # The referenced (repository, digest) pairs of the range, gathered once and MATERIALIZED so
    # that no planner turns the lookup into a probe by digest (PostgreSQL >= 12, SQLite >= 3.35);
    # the repositories' names looked up for the links that are left only (as a join, PostgreSQL
    # hashed every repository for each range).
    if not count:
        references = _range_references(discount)
    elif by_digest:
        references = _references_by_digest(count, discount)
    else:
        references = f"{_range_references(discount)} AND mr.digest || '' IN ({marks(count)})"
    return (
        f"WITH referenced AS MATERIALIZED ({references}) "
        f"SELECT k.id, k.repository_id, (SELECT r.name FROM {table(Repository)} r WHERE r.id = k.repository_id), "
        f"k.digest FROM {_range_links(count)} WHERE NOT EXISTS (SELECT 1 FROM referenced x "
        "WHERE x.repository_id = k.repository_id AND x.digest = k.digest) ORDER BY k.id"
    )


def _range_links(count: int) -> str:
    """``k``: the range's links (those of ``count`` ids) with their digests. PostgreSQL looks each
    digest up (a scalar subquery in a subquery that OFFSET 0 keeps whole): as a join, it hashed
    every blob for each range. SQLite probes the join by itself."""
    where = "l.repository_id BETWEEN %s AND %s AND l.created_at < %s"
    where += f" AND l.id IN ({marks(count)})" if count else ""
    if connection.vendor == "postgresql":
        return (f"(SELECT l.id, l.repository_id, (SELECT b.digest FROM {table(Blob)} b WHERE b.id = l.blob_id) "
                f"AS digest FROM {table(BlobLink)} l WHERE {where} OFFSET 0) k")
    return (f"(SELECT l.id, l.repository_id, b.digest FROM {table(BlobLink)} l JOIN {table(Blob)} b "
            f"ON b.id = l.blob_id WHERE {where}) k")


def _range_references(discount: bool) -> str:
    """The blob references of the range's manifests, read manifest by manifest through the
    references' index. PostgreSQL hashed every reference of the registry for each range instead:
    a LATERAL subquery that OFFSET 0 keeps from being flattened is probed for each manifest. SQLite
    has no LATERAL and probes by itself."""
    if connection.vendor == "postgresql":
        references = (f"CROSS JOIN LATERAL (SELECT r.digest FROM {table(ManifestReference)} r "
                      "WHERE r.manifest_id = m.id AND r.kind = %s OFFSET 0) mr")
    else:
        references = f"JOIN {table(ManifestReference)} mr ON mr.manifest_id = m.id AND mr.kind = %s"
    return (f"SELECT m.repository_id, mr.digest FROM {table(Manifest)} m {references} "
            f"WHERE m.repository_id BETWEEN %s AND %s{_not_doomed('m.id', discount)}")


def _references_by_digest(count: int, discount: bool) -> str:
    # ``+ 0``: the manifests' repository index stays out of it, so both databases start from the
    # digests' references whatever their statistics say.
    return (f"SELECT m.repository_id, mr.digest FROM {table(ManifestReference)} mr JOIN {table(Manifest)} m "
            f"ON m.id = mr.manifest_id WHERE mr.kind = %s AND m.repository_id + 0 BETWEEN %s AND %s"
            f"{_not_doomed('m.id', discount)} AND mr.digest IN ({marks(count)})")


@statement
def _references_at_most_sql(count: int) -> str:
    return (f"SELECT count(*) FROM (SELECT 1 FROM {table(ManifestReference)} WHERE digest IN ({marks(count)}) "
            "LIMIT %s) AS probe")


def unreferenced_links(low: int, high: int, cutoff: datetime, again: Sequence[LinkRow] = (),
                       discount: bool = False) -> list[LinkRow]:
    """Links of repositories ``low`` to ``high`` made before ``cutoff`` that no manifest of their
    repository references (only among ``again``, links found so before, when given; leaving out
    the manifests a dry run would delete with ``discount``).

    Checking links again reads either the references to their digests or those of their
    repositories' manifests, whichever is bounded by the batch: a base layer shared by every
    repository has a million references, a big repository a million manifests, and reading either
    for each batch made a collection quadratic. One probe that stops after a few references per
    link tells which.
    """
    if not again and _merges(low, high):
        return _merged_unreferenced_links(low, high, cutoff, discount)
    digests, ids = [link.digest for link in again], [link.id for link in again]
    few = 4 * len(ids)
    by_digest = bool(ids) and _count(_references_at_most_sql(len(ids)), [*digests, few]) < few
    params = [ManifestReference.BLOB, low, high, *digests, low, high, moment(cutoff), *ids]
    return [LinkRow(*row) for row in fetch_all(_unreferenced_links_sql(len(ids), discount, by_digest), params)]


def _merges(low: int, high: int) -> bool:
    """Whether a range's check merges its links with its references in Python: SQLite has no hash
    or merge join, and anti-joined a big repository's links against an index of its references it
    built for each check, with a temporary file (issue 25: 35-56 ms at 10,000 images, 0.85-1.2 s at
    100,000). PostgreSQL joins them by a hash or a merge of its own. A range of few manifests keeps
    the statement: its index is small, and it sends only the links left, where the merge reads
    every row (a range of small repositories took 3.5 ms, merged 5 to 5.5)."""
    return (connection.vendor == "sqlite"
            and _count(_manifests_at_most_sql(), [low, high, MERGE_FROM]) >= MERGE_FROM)


@statement
def _manifests_at_most_sql() -> str:
    return (f"SELECT count(*) FROM (SELECT 1 FROM {table(Manifest)} WHERE repository_id BETWEEN %s AND %s "
            "LIMIT %s) AS probe")


@statement
def _links_in_order_sql() -> str:
    return f"SELECT k.id, k.repository_id, k.digest FROM {_range_links(0)} ORDER BY k.repository_id, k.digest"


@statement
def _references_in_order_sql(discount: bool) -> str:
    # The repositories come in order from the manifests' index: SQLite sorts each one's digests.
    return f"{_range_references(discount)} ORDER BY m.repository_id, mr.digest"


@statement
def _repository_names_sql(count: int) -> str:
    return f"SELECT id, name FROM {table(Repository)} WHERE id IN ({marks(count)})"


def _merged_unreferenced_links(low: int, high: int, cutoff: datetime, discount: bool) -> list[LinkRow]:
    """``unreferenced_links`` of a whole range, from its links and its references each read in
    (repository, digest) order, a batch at a time, side by side (SQLite orders text by its UTF-8
    bytes, which is Python's order of the characters)."""
    found: list[tuple[int, int, str]] = []
    with streamed(_links_in_order_sql(), [low, high, moment(cutoff)]) as links, \
            streamed(_references_in_order_sql(discount), [ManifestReference.BLOB, low, high]) as references:
        referenced = next(references, None)
        for link in links:
            key = (link[1], link[2])
            while referenced is not None and referenced < key:
                referenced = next(references, None)
            if referenced != key:
                found.append(link)
    names: dict[int, str] = {}
    for chunk in chunks(sorted({repository_id for _id, repository_id, _digest in found})):
        names.update(fetch_all(_repository_names_sql(len(chunk)), chunk))
    # A repository deleted meanwhile took its links with it.
    return [LinkRow(link_id, repository_id, names[repository_id], digest)
            for link_id, repository_id, digest in sorted(found) if repository_id in names]


def _count(sql: str, params: list[object]) -> int:
    row = fetch_one(sql, params)
    return int(row[0]) if row else 0


def delete_links(link_ids: Sequence[int]) -> None:
    for chunk in chunks(link_ids):
        execute(f"DELETE FROM {table(BlobLink)} WHERE id IN ({marks(len(chunk))})", chunk)


# -- blob rows --------------------------------------------------------------------------------------


class UnusedBlob(NamedTuple):
    id: int
    digest: str
    size: int


def blob_ranges(batch: int) -> Iterator[tuple[str, str | None]]:
    """Ranges of blob digests, from ``low`` up to (not including) ``high`` (None: to the end),
    holding ``batch`` blobs each, in digest order. The references' digest index is then read in
    the same order, a few pages a range; a range of ids probed it at random, a page each once it
    outgrew the database's cache (2.2 times the time per range from 10,000 images to 100,000)."""
    blobs = table(Blob)
    row = fetch_one(f"SELECT MIN(digest) FROM {blobs}", [])
    low: str | None = row[0] if row else None
    while low is not None:
        found = fetch_one(f"SELECT digest FROM {blobs} WHERE digest >= %s ORDER BY digest LIMIT 1 OFFSET %s",
                          [low, batch])
        high: str | None = found[0] if found else None
        yield low, high
        low = high


def _references_bounded() -> bool:
    """Whether the blob check bounds the references by the range too: PostgreSQL merges the two
    digest indexes, and read the references from the first digest on for every range; SQLite
    probes one digest at a time, and the bound only adds work."""
    return connection.vendor == "postgresql"


@statement
def _unused_blobs_sql(count: int, bounded: bool, discount: bool) -> str:
    def digest_within(column: str) -> str:
        if count:
            return f"{column} IN ({marks(count)})"
        return f"{column} >= %s" + (f" AND {column} < %s" if bounded else "")

    # The unreferenced digests first, from the two digest indexes alone (the references' one
    # covers kind and manifest too): the blob rows are read for those few only.
    references = f" AND {digest_within('mr.digest')}" if _references_bounded() else ""
    return (
        f"WITH unreferenced AS MATERIALIZED (SELECT b.id FROM {table(Blob)} b WHERE {digest_within('b.digest')} "
        f"AND NOT EXISTS (SELECT 1 FROM {table(ManifestReference)} mr WHERE mr.digest = b.digest "
        f"AND mr.kind = %s{references}{_not_doomed('mr.manifest_id', discount)})) "
        f"SELECT b.id, b.digest, b.size FROM unreferenced u JOIN {table(Blob)} b ON b.id = u.id "
        "WHERE b.created_at < %s "
        # Probed blob by blob (a scalar subquery): as NOT EXISTS, PostgreSQL may read every link
        # for the fresh ones instead, once per range.
        f"AND (SELECT 1 FROM {table(BlobLink)} l WHERE l.blob_id = b.id AND l.created_at >= %s LIMIT 1) IS NULL "
        "ORDER BY b.digest"
    )


def unused_blobs(low: str, high: str | None, cutoff: datetime, digests: Sequence[str] = (),
                 discount: bool = False) -> list[UnusedBlob]:
    """Blobs with digests from ``low`` up to ``high`` (see ``blob_ranges``), or those of
    ``digests`` when given (all in that range), created before ``cutoff`` that no manifest of any
    repository references and nobody linked since ``cutoff`` (leaving out the manifests a dry run
    would delete with ``discount``)."""
    at = moment(cutoff)
    within = list(digests) or ([low] if high is None else [low, high])
    params = [*within, ManifestReference.BLOB, *(within if _references_bounded() else []), at, at]
    return [UnusedBlob(*row) for row in fetch_all(_unused_blobs_sql(len(digests), high is not None, discount), params)]


def delete_blob_rows(blob_ids: Sequence[int]) -> None:
    """Delete blob rows and whatever links they still have."""
    for chunk in chunks(blob_ids):
        execute(f"DELETE FROM {table(BlobLink)} WHERE blob_id IN ({marks(len(chunk))})", chunk)
        execute(f"DELETE FROM {table(Blob)} WHERE id IN ({marks(len(chunk))})", chunk)


@statement
def _with_candidates_sql() -> str:
    return (f"SELECT DISTINCT m.repository_id FROM {table(Manifest)} m WHERE m.repository_id BETWEEN %s AND %s "
            f"AND m.created_at < %s AND (SELECT 1 FROM {table(Tag)} t WHERE t.manifest_id = m.id LIMIT 1) IS NULL")


def repositories_with_untagged(low: int, high: int, cutoff: datetime) -> set[int]:
    """Of the repositories ``low`` to ``high``, those with a manifest pushed before ``cutoff``
    that no tag points at: one pass over their manifests, instead of queries per repository."""
    return {int(row[0]) for row in fetch_all(_with_candidates_sql(), [low, high, moment(cutoff)])}
