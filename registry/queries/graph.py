"""A repository's manifest graph a page at a time, for registry.services.reachability: candidates
(manifests the database can tell are no roots) in push order, the (repository, created_at, id)
index's, each with the facts that decide whether it is kept, and the ancestors that may keep a page
(indexes listing it, subjects it names), looked up for that page only.

With ``without_removed``, the tags a retention plan removes (registry.queries.retention's
temporary table) count as gone already: what the plan leaves to the next collection.
"""
from __future__ import annotations

from datetime import datetime
from typing import Any, Iterator, NamedTuple, Sequence, TypeVar

from django.db import connection

from registry.models import Manifest, ManifestReference, Tag
from registry.queries._sql import fetch_all, marks, moment, reader, statement, table

REMOVED_TAGS = "registry_retention_removals"  # a temporary table (registry.queries.retention)
CHUNK = 500  # digests or ids per IN list: SQLite limits a statement's parameters
T = TypeVar("T")


def chunks(items: Sequence[T]) -> Iterator[list[T]]:
    for start in range(0, len(items), CHUNK):
        yield list(items[start:start + CHUNK])


class GraphNode(NamedTuple):
    """A manifest with what decides whether it is kept (registry.services.reachability)."""

    id: int
    digest: str
    subject: str  # the subject's digest, or ""
    pushed_at: datetime
    last_pulled_at: datetime | None
    tagged: bool
    referrer: bool  # its subject is another manifest of the repository


def _tags_of_m(without_removed: bool) -> str:
    # NOT EXISTS on the table's key, not NOT IN: PostgreSQL rescans a NOT IN list too big to hash.
    kept = f" AND NOT EXISTS (SELECT 1 FROM {REMOVED_TAGS} gone WHERE gone.id = t.id)" if without_removed else ""
    return f"SELECT 1 FROM {table(Tag)} t WHERE t.manifest_id = m.id{kept}"


def _referrer_sql() -> str:
    return (f"(m.subject_digest <> '' AND m.subject_digest <> m.digest AND EXISTS (SELECT 1 FROM {table(Manifest)} s "
            "WHERE s.repository_id = m.repository_id AND s.digest = m.subject_digest))")


def _node_columns(without_removed: bool) -> str:
    # The flags as scalar subqueries, which PostgreSQL probes row by row: as EXISTS in the select
    # list it may hash the whole tag table for a page of 200.
    return (f"m.id, m.digest, m.subject_digest, m.created_at, m.last_pulled_at, "
            f"({_tags_of_m(without_removed)} LIMIT 1) IS NOT NULL, "
            "(m.subject_digest <> '' AND m.subject_digest <> m.digest AND (SELECT 1 FROM "
            f"{table(Manifest)} s WHERE s.repository_id = m.repository_id AND s.digest = m.subject_digest) "
            "IS NOT NULL)")


def _node(row: Sequence[Any]) -> GraphNode:
    pushed, pulled = reader(Manifest, "created_at"), reader(Manifest, "last_pulled_at")
    return GraphNode(int(row[0]), str(row[1]), str(row[2]), pushed(row[3]), pulled(row[4]), bool(row[5]), bool(row[6]))


@statement
def _candidates_sql(referrers_follow: bool, without_removed: bool, resumed: bool) -> str:
    # Candidates: what no tag keeps and is not young. Under a retention rule (referrers_follow), a
    # referrer is a candidate whatever its tags and age: it follows its subject.
    # A scalar subquery, probed row by row along the repository's push-order index until the page is
    # full: as NOT EXISTS, PostgreSQL hashed every tag and read the whole repository for each page.
    # Written as "<> 1", which it estimates true for most rows (as "IS NULL", for almost none, and
    # then it read the whole repository to sort it rather than walk the index to a full page).
    untagged = f"coalesce(({_tags_of_m(without_removed)} LIMIT 1), 0) <> 1"
    old = "m.created_at < %s AND (m.last_pulled_at IS NULL OR m.last_pulled_at < %s)"
    if connection.vendor == "sqlite":
        # SQLite tests a row's own columns before a subquery, so it read every manifest's row (its
        # body too) to find the few untagged ones, reads that outgrow its cache with the
        # repository (15 times the time from 10,000 images to 100,000). Asked as a subquery after
        # the tag probe, the age is read from the untagged rows only.
        old = (f"(SELECT 1 FROM {table(Manifest)} x WHERE x.id = m.id AND x.created_at < %s "
               "AND (x.last_pulled_at IS NULL OR x.last_pulled_at < %s)) = 1")
    wanted = f"({_referrer_sql()} OR ({untagged} AND {old}))" if referrers_follow else f"{untagged} AND {old}"
    after = "AND (m.created_at, m.id) > (%s, %s) " if resumed else ""
    return (f"SELECT {_node_columns(without_removed)} FROM {table(Manifest)} m WHERE m.repository_id = %s "
            f"{after}AND {wanted} ORDER BY m.created_at, m.id LIMIT %s")


def candidate_page(repository_id: int, after: GraphNode | None, limit: int, pushed_before: datetime,
                   pulled_before: datetime, referrers_follow: bool, without_removed: bool = False) -> list[GraphNode]:
    """The repository's manifests, in push order after ``after`` (the last node of the page before),
    that no tag keeps and that were pushed before ``pushed_before`` and not pulled since
    ``pulled_before`` (with ``referrers_follow``: and every referrer).

    Push order, not digest order: a collector deletes a page in one transaction, and the rows of a
    page pushed together lie together in the table and in the indexes by push time, where a page
    of digests is scattered over all of them. At 100,000 images, deleting 10,000 manifests 200 at a
    time wrote 555 MiB of pages by digest and 310 MiB by push, in half the time."""
    resumed = [moment(after.pushed_at), after.id] if after is not None else []
    params = [repository_id, *resumed, moment(pushed_before), moment(pulled_before), limit]
    return [_node(row) for row in fetch_all(_candidates_sql(referrers_follow, without_removed, bool(resumed)), params)]


@statement
def _parents_sql(count: int, without_removed: bool) -> str:
    # From the digests' references to their manifests, never from the repository's manifests
    # (``+ 0`` keeps the repository's index out of it): SQLite read the whole repository per page.
    return (f"SELECT mr.digest, {_node_columns(without_removed)} FROM {table(ManifestReference)} mr "
            f"JOIN {table(Manifest)} m ON m.id = mr.manifest_id WHERE m.repository_id + 0 = %s AND mr.kind = %s "
            f"AND mr.digest IN ({marks(count)})")


def index_parents(repository_id: int, digests: Sequence[str],
                  without_removed: bool = False) -> list[tuple[str, GraphNode]]:
    """(child digest, index) for every index of the repository listing one of ``digests``."""
    found = []
    for chunk in chunks(sorted(set(digests))):
        rows = fetch_all(_parents_sql(len(chunk), without_removed), [repository_id, ManifestReference.MANIFEST, *chunk])
        found += [(str(row[0]), _node(row[1:])) for row in rows]
    return found


@statement
def _by_digests_sql(count: int, without_removed: bool) -> str:
    return (f"SELECT {_node_columns(without_removed)} FROM {table(Manifest)} m WHERE m.repository_id = %s "
            f"AND m.digest IN ({marks(count)})")


def graph_nodes(repository_id: int, digests: Sequence[str], without_removed: bool = False) -> list[GraphNode]:
    """The manifests of the repository with these digests."""
    found = []
    for chunk in chunks(sorted(set(digests))):
        rows = fetch_all(_by_digests_sql(len(chunk), without_removed), [repository_id, *chunk])
        found += [_node(row) for row in rows]
    return found


@statement
def _tag_names_sql(count: int) -> str:
    return f"SELECT manifest_id, name FROM {table(Tag)} WHERE manifest_id IN ({marks(count)})"


def tag_names_of(manifest_ids: Sequence[int]) -> dict[int, list[str]]:
    names: dict[int, list[str]] = {}
    for chunk in chunks(sorted(set(manifest_ids))):
        for mid, name in fetch_all(_tag_names_sql(len(chunk)), chunk):
            names.setdefault(int(mid), []).append(str(name))
    return names
