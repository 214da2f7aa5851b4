"""Tags: pointing them at a manifest, listing them in byte order, deleting one; creating immutable
ones only where absent, and what retention plans over."""
from __future__ import annotations

from datetime import datetime
from typing import NamedTuple, Sequence

from registry.models import Manifest, ManifestReference, Repository, Tag
from registry.queries._sql import byte_order, byte_order_sql, execute_many, fetch_all, moment, statement, table
from registry.queries.repositories import touch_pushed


@statement
def _upsert_sql() -> str:
    # One statement per tag (SQLite >= 3.24 and PostgreSQL): cheaper than update_or_create's
    # SELECT, savepoints and INSERT or UPDATE, and than compiling bulk_create(update_conflicts=True)
    # on every PUT (bench/queries.py --variants).
    return (f"INSERT INTO {table(Tag)} (repository_id, name, manifest_id, updated_at) "
            "VALUES (%s, %s, %s, %s) ON CONFLICT (repository_id, name) "
            "DO UPDATE SET manifest_id = excluded.manifest_id, updated_at = excluded.updated_at")


def point_tags(repository_id: int, manifest_id: int, tags: list[str], now: datetime) -> None:
    """Create the tags, or move them, to the manifest."""
    if tags:
        at = moment(now)
        execute_many(_upsert_sql(), [(repository_id, tag, manifest_id, at) for tag in tags])
        touch_pushed(repository_id, now)


@statement
def _names_sql(after: bool, limited: bool) -> str:
    # Hand-written: compiling it with the ORM, plus a separate repository lookup, was most of a list.
    # The repository's id as a scalar subquery, not a join: PostgreSQL then reads tag_name_bytes in
    # the order asked for and stops at the limit, where after a join it sorted the whole repository.
    key = byte_order_sql("t.name")
    return (f"SELECT t.name FROM {table(Tag)} t WHERE t.repository_id = "
            f"(SELECT r.id FROM {table(Repository)} r WHERE r.name = %s)"
            + (f" AND {key} > %s" if after else "") + f" ORDER BY {key}" + (" LIMIT %s" if limited else ""))


def tag_names(repository: str, after: str | None, limit: int | None) -> list[str]:
    """The repository's tags in byte order, after ``after``, at most ``limit`` (empty as well for
    a repository that does not exist)."""
    params: list[object] = [repository] + ([after] if after else []) + ([limit] if limit is not None else [])
    return [row[0] for row in fetch_all(_names_sql(bool(after), limit is not None), params)]


def tags_of(manifest_id: int) -> list[str]:
    """The tags pointing at a manifest, in byte order."""
    return list(Tag.objects.filter(manifest_id=manifest_id).alias(key=byte_order("name")).order_by("key")
                .values_list("name", flat=True))


def delete_tag(repository_id: int, name: str) -> int:
    deleted, _ = Tag.objects.filter(repository_id=repository_id, name=name).delete()
    return deleted


# -- immutable tags and retention (registry.policies.immutable, registry.retention) ----------------


@statement
def _insert_absent_sql() -> str:
    return (f"INSERT INTO {table(Tag)} (repository_id, name, manifest_id, updated_at) "
            "VALUES (%s, %s, %s, %s) ON CONFLICT (repository_id, name) DO NOTHING")


def insert_tags_if_absent(repository_id: int, manifest_id: int, names: Sequence[str], now: datetime) -> None:
    """Create the tags that do not exist; an existing one is left as it is, wherever it points.
    (On PostgreSQL a conflict with a tag being created by another transaction waits for it.)"""
    at = moment(now)
    execute_many(_insert_absent_sql(), [(repository_id, name, manifest_id, at) for name in names])


def tag_targets(repository_id: int, names: Sequence[str]) -> dict[str, tuple[int, str]]:
    """tag -> (manifest id, digest) for those of ``names`` that exist."""
    rows = Tag.objects.filter(repository_id=repository_id, name__in=list(names)).values_list(
        "name", "manifest_id", "manifest__digest")
    return {name: (mid, digest) for name, mid, digest in rows}


def tag_digests(repository: str, names: Sequence[str]) -> dict[str, str]:
    """tag -> digest for those of ``names`` that exist in the repository named ``repository``."""
    rows = Tag.objects.filter(repository__name=repository, name__in=list(names)).values_list(
        "name", "manifest__digest")
    return dict(rows)


def tags_of_digest(repository_id: int, digest: str) -> list[str]:
    """The tags of the repository pointing at the manifest ``digest``."""
    return list(Tag.objects.filter(repository_id=repository_id, manifest__digest=digest)
                .values_list("name", flat=True))


@statement
def _reaching_sql(blob: bool) -> str:
    # The manifests of the repository that reference the blob (or are the manifest), then every
    # index above them, however deep; UNION, not UNION ALL, so that a cycle ends. Both databases
    # have recursive common table expressions.
    m, r = table(Manifest), table(ManifestReference)
    seed = (f"SELECT m.id, m.digest FROM {m} m JOIN {r} ref ON ref.manifest_id = m.id "
            "WHERE m.repository_id = %s AND ref.kind = %s AND ref.digest = %s") if blob else (
            f"SELECT m.id, m.digest FROM {m} m WHERE m.repository_id = %s AND m.digest = %s")
    return (f"WITH RECURSIVE reaching(id, digest) AS ({seed} UNION "
            f"SELECT p.id, p.digest FROM reaching c JOIN {r} ref ON ref.digest = c.digest AND ref.kind = %s "
            f"JOIN {m} p ON p.id = ref.manifest_id AND p.repository_id = %s) "
            f"SELECT DISTINCT t.name FROM {table(Tag)} t JOIN reaching ON reaching.id = t.manifest_id")


def tags_reaching(repository_id: int, digest: str, blob: bool) -> list[str]:
    """The tags of the repository whose image needs ``digest``: a blob (``blob``: its config or a
    layer, of the image or of a platform image of an index) or a manifest (the image itself, or a
    child of an index). One statement, however many manifests the repository holds."""
    seed: list[object] = [repository_id, ManifestReference.BLOB, digest] if blob else [repository_id, digest]
    params = seed + [ManifestReference.MANIFEST, repository_id]
    return [row[0] for row in fetch_all(_reaching_sql(blob), params)]


class TagRow(NamedTuple):
    id: int
    name: str
    manifest_id: int
    pushed_at: datetime


def tag_rows(repository_id: int) -> list[TagRow]:
    """Every tag of the repository, with when it was pushed (pointed where it points)."""
    return [TagRow(*row) for row in
            Tag.objects.filter(repository_id=repository_id).values_list("id", "name", "manifest_id", "updated_at")]


def tags_for_removal(ids: Sequence[int]) -> list[tuple[int, int, datetime, datetime | None]]:
    """(tag id, manifest id, pushed at, manifest last pulled at) of these tags, locked until the
    transaction ends so that a push moving one of them waits or goes first."""
    return list(Tag.objects.select_for_update(of=("self",)).filter(id__in=list(ids)).values_list(
        "id", "manifest_id", "updated_at", "manifest__last_pulled_at"))


def delete_tags_by_id(ids: Sequence[int]) -> int:
    return Tag.objects.filter(id__in=list(ids)).delete()[0]
