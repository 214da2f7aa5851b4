"""Named queries of the governance features: quota usage rows, who links a blob, immutable tag
pointers, last-pulled times, and the repository state retention plans over."""
from __future__ import annotations

from datetime import datetime
from functools import lru_cache
from typing import Any, Iterable, Sequence

from django.db import connection
from django.db.models import QuerySet, Sum
from django.utils import timezone

from registry.models import Blob, BlobLink, Manifest, ManifestReference, QuotaUsage, Repository, Tag


def _q(name: str) -> str:
    return connection.ops.quote_name(name)


def _time(moment: datetime) -> Any:
    return connection.ops.adapt_datetimefield_value(moment)


def _chunks(items: Sequence[Any], size: int = 500) -> Iterable[Sequence[Any]]:
    for start in range(0, len(items), size):
        yield items[start:start + size]


# -- quota usage ---------------------------------------------------------------------------------


def lock_quota(name: str) -> tuple[int, str] | None:
    """The quota's (used bytes, scope), its row locked until the transaction ends (PostgreSQL; on
    SQLite every write transaction holds the database's one write lock already)."""
    return QuotaUsage.objects.select_for_update().filter(name=name).values_list("used_bytes", "scope").first()


@lru_cache(maxsize=1)
def _create_quota_sql() -> str:
    return (f"INSERT INTO {_q(QuotaUsage._meta.db_table)} (name, scope, used_bytes, updated_at) "
            "VALUES (%s, '', 0, %s) ON CONFLICT (name) DO NOTHING")


def create_quota(name: str) -> None:
    with connection.cursor() as cursor:
        cursor.execute(_create_quota_sql(), [name, _time(timezone.now())])


def set_quota(name: str, used: int, scope: str) -> None:
    QuotaUsage.objects.filter(name=name).update(used_bytes=used, scope=scope, updated_at=timezone.now())


@lru_cache(maxsize=1)
def _add_quota_sql() -> str:
    return (f"UPDATE {_q(QuotaUsage._meta.db_table)} SET used_bytes = used_bytes + %s, updated_at = %s "
            "WHERE name = %s")


def add_quota(name: str, delta: int) -> None:
    with connection.cursor() as cursor:
        cursor.execute(_add_quota_sql(), [delta, _time(timezone.now()), name])


def quota_rows() -> dict[str, tuple[int, str]]:
    return {name: (used, scope) for name, used, scope in
            QuotaUsage.objects.values_list("name", "used_bytes", "scope")}


def delete_quota_rows_except(names: Iterable[str]) -> int:
    return QuotaUsage.objects.exclude(name__in=list(names)).delete()[0]


def repositories_matching(regex: str, excluded: Sequence[str]) -> QuerySet[Repository]:
    """Repositories whose name matches ``regex`` and none of ``excluded`` (the rules before it)."""
    query = Repository.objects.filter(name__regex=regex)
    for earlier in excluded:
        query = query.exclude(name__regex=earlier)
    return query


def usage_of(regex: str, excluded: Sequence[str]) -> int:
    """Bytes of the distinct blobs linked in the repositories of a rule, counted from the links."""
    linked = BlobLink.objects.filter(repository__in=repositories_matching(regex, excluded)).values("blob_id")
    return Blob.objects.filter(id__in=linked).aggregate(total=Sum("size"))["total"] or 0


def repository_usage(repository_id: int) -> int:
    return BlobLink.objects.filter(repository_id=repository_id).aggregate(total=Sum("blob__size"))["total"] or 0


@lru_cache(maxsize=1)
def _linkers_sql() -> str:
    link, blob, repo = (_q(m._meta.db_table) for m in (BlobLink, Blob, Repository))
    return (f"SELECT r.name FROM {link} l JOIN {blob} b ON b.id = l.blob_id "
            f"JOIN {repo} r ON r.id = l.repository_id WHERE b.digest = %s")


def repositories_linking(digest: str) -> list[str]:
    """Names of the repositories holding a link to the blob ``digest``."""
    with connection.cursor() as cursor:
        cursor.execute(_linkers_sql(), [digest])
        return [row[0] for row in cursor.fetchall()]


def repositories_linking_ids(blob_ids: Sequence[int]) -> list[tuple[int, str]]:
    """(blob id, repository name) of every link of these blobs."""
    rows: list[tuple[int, str]] = []
    for chunk in _chunks(list(blob_ids)):
        rows += BlobLink.objects.filter(blob_id__in=chunk).values_list("blob_id", "repository__name")
    return rows


def link_rows(links: QuerySet[BlobLink]) -> list[tuple[int, str, int, int]]:
    """(link id, repository name, blob id, blob size) of each link of ``links``."""
    return list(links.values_list("id", "repository__name", "blob_id", "blob__size"))


def link_rows_by_id(ids: Sequence[int]) -> list[tuple[int, str, int, int]]:
    rows: list[tuple[int, str, int, int]] = []
    for chunk in _chunks(list(ids)):
        rows += link_rows(BlobLink.objects.filter(id__in=chunk))
    return rows


def delete_links_by_id(ids: Sequence[int]) -> int:
    deleted = 0
    for chunk in _chunks(list(ids)):
        deleted += BlobLink.objects.filter(id__in=chunk).delete()[0]
    return deleted


# -- immutable tags ------------------------------------------------------------------------------


@lru_cache(maxsize=1)
def _insert_tag_sql() -> str:
    return (f"INSERT INTO {_q(Tag._meta.db_table)} (repository_id, name, manifest_id, updated_at) "
            "VALUES (%s, %s, %s, %s) ON CONFLICT (repository_id, name) DO NOTHING")


def insert_tags_if_absent(repository_id: int, manifest_id: int, names: Sequence[str]) -> None:
    """Create the tags that do not exist; an existing one is left as it is, wherever it points.
    (On PostgreSQL a conflict with a tag being created by another transaction waits for it.)"""
    now = _time(timezone.now())
    with connection.cursor() as cursor:
        cursor.executemany(_insert_tag_sql(), [(repository_id, name, manifest_id, now) for name in names])


def tag_targets(repository_id: int, names: Sequence[str]) -> dict[str, tuple[int, str]]:
    """tag -> (manifest id, digest) for those of ``names`` that exist."""
    rows = Tag.objects.filter(repository_id=repository_id, name__in=list(names)).values_list(
        "name", "manifest_id", "manifest__digest")
    return {name: (mid, digest) for name, mid, digest in rows}


def tags_of_manifest(repository_id: int, digest: str) -> list[str]:
    return list(Tag.objects.filter(repository_id=repository_id, manifest__digest=digest)
                .values_list("name", flat=True))


def tag_names(repository_id: int) -> list[str]:
    return list(Tag.objects.filter(repository_id=repository_id).values_list("name", flat=True))


# -- last pulled ---------------------------------------------------------------------------------


def pull_is_due_sql(vendor: str, alias: str = "m") -> str:
    """A column that says whether a pull of manifest ``alias`` should be recorded (none in the last
    minute), worked out by the database: parsing the time in Python was most of the added cost."""
    column = f"{alias}.last_pulled_at"
    if vendor == "postgresql":
        return f"({column} IS NULL OR {column} < now() - interval '1 minute')"
    # SQLite keeps Django's times as 'YYYY-MM-DD HH:MM:SS.ffffff' in UTC, which datetime() compares as text.
    return f"({column} IS NULL OR {column} < datetime('now', '-1 minute'))"


@lru_cache(maxsize=1)
def _touch_sql() -> str:
    return (f"UPDATE {_q(Manifest._meta.db_table)} SET last_pulled_at = %s WHERE id = %s "
            "AND (last_pulled_at IS NULL OR last_pulled_at < %s)")


def touch_pulled(manifest_id: int, now: datetime, before: datetime) -> None:
    """Record a pull, unless one was recorded since ``before`` (by another worker, say)."""
    with connection.cursor() as cursor:
        cursor.execute(_touch_sql(), [_time(now), manifest_id, _time(before)])


# -- retention -----------------------------------------------------------------------------------


def repositories() -> list[tuple[int, str]]:
    return list(Repository.objects.order_by("name").values_list("id", "name"))


def retention_tags(repository_id: int) -> list[tuple[int, str, int, datetime]]:
    """(tag id, name, manifest id, pushed at) of every tag of the repository."""
    return list(Tag.objects.filter(repository_id=repository_id).values_list("id", "name", "manifest_id", "updated_at"))


def retention_manifests(repository_id: int) -> list[tuple[int, str, str, datetime, datetime | None]]:
    """(id, digest, subject digest, pushed at, last pulled at) of every manifest, bodies left out."""
    return list(Manifest.objects.filter(repository_id=repository_id).values_list(
        "id", "digest", "subject_digest", "created_at", "last_pulled_at"))


def retention_children(repository_id: int) -> list[tuple[int, str]]:
    """(index id, child digest) of every index entry of the repository's manifests."""
    return list(ManifestReference.objects.filter(
        manifest__repository_id=repository_id, kind=ManifestReference.MANIFEST).values_list("manifest_id", "digest"))


def tags_for_removal(ids: Sequence[int]) -> list[tuple[int, int, datetime, datetime | None]]:
    """(tag id, manifest id, pushed at, manifest last pulled at) of these tags, locked until the
    transaction ends so that a push moving one of them waits or goes first."""
    return list(Tag.objects.select_for_update(of=("self",)).filter(id__in=list(ids)).values_list(
        "id", "manifest_id", "updated_at", "manifest__last_pulled_at"))


def delete_tags(ids: Sequence[int]) -> int:
    return Tag.objects.filter(id__in=list(ids)).delete()[0]
