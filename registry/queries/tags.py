"""Tags: pointing them at a manifest, listing them in byte order, deleting one."""
from __future__ import annotations

from datetime import datetime

from registry.models import Repository, Tag
from registry.queries._sql import byte_order, byte_order_sql, execute_many, fetch_all, moment, statement, table


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


@statement
def _names_sql(after: bool, limited: bool) -> str:
    # Hand-written: compiling it with the ORM, plus a separate repository lookup, was most of a list.
    key = byte_order_sql("t.name")
    return (f"SELECT t.name FROM {table(Tag)} t JOIN {table(Repository)} r ON r.id = t.repository_id "
            "WHERE r.name = %s" + (f" AND {key} > %s" if after else "") + f" ORDER BY {key}"
            + (" LIMIT %s" if limited else ""))


def tag_names(repository: str, after: str | None, limit: int | None) -> list[str]:
    """The repository's tags in byte order, after ``after``, at most ``limit`` (empty as well for
    a repository that does not exist)."""
    params: list[object] = [repository] + ([after] if after else []) + ([limit] if limit is not None else [])
    return [row[0] for row in fetch_all(_names_sql(bool(after), limit is not None), params)]


def tags_of(manifest_id: int) -> list[str]:
    """The tags pointing at a manifest, in byte order."""
    return list(Tag.objects.filter(manifest_id=manifest_id).alias(key=byte_order("name")).order_by("key")
                .values_list("name", flat=True))


def tagged_manifests(repository_id: int) -> set[int]:
    """Ids of the repository's manifests that a tag points at."""
    return set(Tag.objects.filter(repository_id=repository_id).values_list("manifest_id", flat=True))


def delete_tag(repository_id: int, name: str) -> int:
    deleted, _ = Tag.objects.filter(repository_id=repository_id, name=name).delete()
    return deleted
