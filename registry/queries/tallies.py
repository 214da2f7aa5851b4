"""Figures that cost a scan to count: the registry's totals and a big repository's, counted exactly
when that is cheap and otherwise kept in Tally rows that a background count refreshes (ops.ui.tallies
decides which). Also the cheap probes that tell the two apart, and bounded counts.
"""
from __future__ import annotations

from datetime import datetime
from typing import Any

from django.db import connection
from django.db.models import Count, Q, Sum

from registry.models import Blob, BlobLink, Manifest, Repository, Tag, Tally
from registry.queries._sql import execute, fetch_all, fetch_one, marks, moment, reader, statement, table
from registry.queries.repositories import with_content


def read_tally(name: str) -> tuple[dict[str, Any], datetime | None] | None:
    """A tally's figures and when they were counted; None when never counted."""
    row = Tally.objects.filter(name=name).values_list("data", "counted_at").first()
    return None if row is None else (dict(row[0] or {}), row[1])


@statement
def _claim_sql() -> str:
    return (f"UPDATE {table(Tally)} SET counting_until = %s WHERE name = %s "
            "AND (counting_until IS NULL OR counting_until < %s)")


def claim_tally(name: str, until: datetime, now: datetime) -> bool:
    """Become the one process counting the tally until ``until``; False when another one is."""
    Tally.objects.bulk_create([Tally(name=name)], ignore_conflicts=True)
    return execute(_claim_sql(), [moment(until), name, moment(now)]) == 1


def store_tally(name: str, data: dict[str, Any], now: datetime) -> None:
    Tally.objects.filter(name=name).update(data=data, counted_at=now, counting_until=None)


def release_tally(name: str) -> None:
    Tally.objects.filter(name=name).update(counting_until=None)


@statement
def _highest_ids_sql() -> str:
    return "SELECT " + ", ".join(f"(SELECT MAX(id) FROM {table(model)})" for model in (Tag, Manifest, Blob))


def biggest_table_rows() -> int:
    """An upper bound of the rows of the biggest table the totals count, in an index lookup each
    (ids are not reused)."""
    row = fetch_one(_highest_ids_sql(), []) or ()
    return max((int(value or 0) for value in row), default=0)


@statement
def _totals_sql() -> str:
    manifests = table(Manifest)
    return (f"SELECT (SELECT COUNT(*) FROM {table(Repository)} r WHERE EXISTS (SELECT 1 FROM {manifests} m "
            f"WHERE m.repository_id = r.id)), (SELECT COUNT(*) FROM {table(Tag)}), (SELECT COUNT(*) FROM {manifests}), "
            f"(SELECT COUNT(*) FROM {table(Blob)}), (SELECT COALESCE(SUM(size), 0) FROM {table(Blob)})")


def registry_totals() -> dict[str, int]:
    """Exact totals, in one statement: a scan of every big table."""
    row = fetch_one(_totals_sql(), []) or (0, 0, 0, 0, 0)
    return dict(zip(("repositories", "tags", "manifests", "blobs", "bytes"), (int(v or 0) for v in row), strict=True))


BIG_REPOSITORY = 10_000  # links: above this, a repository's figures are tallied


@statement
def _figures_sql(count: int) -> str:
    # One statement for a page of repositories, each figure a subquery over that repository's own
    # index range. A repository with more than BIG_REPOSITORY links (probed up to the bound, not
    # counted) is only flagged: CASE evaluates its counts only for the others. The probe is made
    # once a repository, in a subquery that OFFSET 0 keeps whole: flattened into each CASE, it was
    # made four times (issue 25: 4-7 ms of the tag page on PostgreSQL).
    tags, manifests, links = table(Tag), table(Manifest), table(BlobLink)
    big = (f"(SELECT 1 FROM {links} l WHERE l.repository_id = r.id ORDER BY l.repository_id "
           f"LIMIT 1 OFFSET {BIG_REPOSITORY}) IS NOT NULL")

    fence = "OFFSET 0" if connection.vendor == "postgresql" else "LIMIT -1 OFFSET 0"  # SQLite: no OFFSET alone

    def unless_big(figure: str) -> str:
        return f"CASE WHEN p.big THEN NULL ELSE ({figure}) END"

    return ("SELECT r.id, p.big, "
            + unless_big(f"SELECT COUNT(*) FROM {tags} t WHERE t.repository_id = r.id") + ", "
            + unless_big(f"SELECT COUNT(*) FROM {manifests} m WHERE m.repository_id = r.id") + ", "
            + unless_big(f"SELECT SUM(b.size) FROM {links} l JOIN {table(Blob)} b ON b.id = l.blob_id "
                         "WHERE l.repository_id = r.id") + ", "
            # One index lookup each (manifest_pushed_idx, tag_pushed_idx), not a MAX over the repository.
            f"(SELECT m.created_at FROM {manifests} m WHERE m.repository_id = r.id "
            "ORDER BY m.created_at DESC, m.id DESC LIMIT 1), "
            f"(SELECT t.updated_at FROM {tags} t WHERE t.repository_id = r.id ORDER BY t.updated_at DESC, t.id DESC "
            f"LIMIT 1) FROM {table(Repository)} r JOIN (SELECT r.id, {big} AS big FROM {table(Repository)} r "
            f"WHERE r.id IN ({marks(count)}) {fence}) p ON p.id = r.id")


def repository_figures(ids: list[int]) -> dict[int, dict[str, Any]]:
    """Each repository's tags, manifests, linked blob bytes and last push (the later of its newest
    manifest and its newest tag move: both are pushes); ``big``, and no counts, for one with more
    than BIG_REPOSITORY links."""
    if not ids:
        return {}
    manifest_time, tag_time = reader(Manifest, "created_at"), reader(Tag, "updated_at")
    figures: dict[int, dict[str, Any]] = {}
    for pk, big, tags, manifests, size, manifest, tag in fetch_all(_figures_sql(len(ids)), ids):
        moments = [read(value) for read, value in ((manifest_time, manifest), (tag_time, tag)) if value is not None]
        figures[int(pk)] = {"big": bool(big), "tags": int(tags or 0), "manifests": int(manifests or 0),
                            "bytes": int(size or 0), "pushed": max(moments) if moments else None}
    return figures


def repositories_matching(search: str, limit: int, within: Q | None = None) -> int:
    """How many repositories with content have ``search`` in their name (and meet ``within``, a
    condition on their name: registry.queries.visible_names), counted up to ``limit``."""
    query = with_content().filter(Q(name__icontains=search))
    return (query if within is None else query.filter(within))[:limit].count()


def visible_totals(within: Q) -> dict[str, int]:
    """registry_totals over the repositories whose name meets ``within`` alone: a look at every
    repository's name, then the counts over those repositories' own index ranges (their tags,
    manifests and links), so it costs what they hold, not what the registry does."""
    repositories = Repository.objects.filter(within).values("id")
    linked = BlobLink.objects.filter(repository_id__in=repositories).values("blob_id")
    blobs = Blob.objects.filter(id__in=linked).aggregate(count=Count("id"), size=Sum("size"))
    return {
        "repositories": with_content().filter(within).count(),
        "tags": Tag.objects.filter(repository_id__in=repositories).count(),
        "manifests": Manifest.objects.filter(repository_id__in=repositories).count(),
        "blobs": int(blobs["count"] or 0), "bytes": int(blobs["size"] or 0),
    }


@statement
def _untagged_sql() -> str:
    # A tag looked up for each manifest (the tag's manifest index): as NOT EXISTS, PostgreSQL hashed
    # every tag of the registry to join them.
    return (f"SELECT COUNT(*) FROM {table(Manifest)} m WHERE m.repository_id = %s "
            f"AND (SELECT 1 FROM {table(Tag)} t WHERE t.manifest_id = m.id LIMIT 1) IS NULL")


def untagged_count(repository_id: int) -> int:
    """How many manifests of the repository no tag points to: a look at each of its manifests."""
    row = fetch_one(_untagged_sql(), [repository_id]) or (0,)
    return int(row[0] or 0)


@statement
def _repository_totals_sql() -> str:
    return (f"SELECT (SELECT COUNT(*) FROM {table(Tag)} WHERE repository_id = %s), "
            f"(SELECT COUNT(*) FROM {table(Manifest)} WHERE repository_id = %s), "
            f"(SELECT SUM(b.size) FROM {table(BlobLink)} l JOIN {table(Blob)} b ON b.id = l.blob_id "
            "WHERE l.repository_id = %s)")


def repository_totals(repository_id: int) -> dict[str, int]:
    """A repository's tags, manifests, untagged manifests and linked blob bytes, counted: a scan of
    its rows."""
    row = fetch_one(_repository_totals_sql(), [repository_id] * 3) or (0, 0, 0)
    return {"tags": int(row[0] or 0), "manifests": int(row[1] or 0), "bytes": int(row[2] or 0),
            "untagged": untagged_count(repository_id)}
