"""Named queries of the pull-through caches.

A cached pull must cost what a pull of an ordinary repository costs: the lookup of a manifest by tag
or digest is one statement, built once, that also says whether the tag is still fresh and whether
the manifest's last pull must be recorded (at most once a minute, so a busy image is not a write
per pull). Times are compared in SQL, against parameters adapted by the backend, as
registry.queries does for upload sessions.
"""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import lru_cache
from typing import Any

from django.db import connection

from registry.models import Blob, BlobLink, Lease, Manifest, ManifestReference, Repository, Tag

PULL_RECORD_INTERVAL = timedelta(minutes=1)


def _q(name: str) -> str:
    return connection.ops.quote_name(name)


def _time(moment: datetime) -> Any:
    return connection.ops.adapt_datetimefield_value(moment)


@dataclass(frozen=True)
class Cached:
    manifest_id: int
    repository_id: int
    digest: str
    media_type: str
    size: int
    body: bytes | None
    fresh: bool  # by digest always; by tag, confirmed by the upstream within its time to live
    record_pull: bool  # last_pulled_at is older than PULL_RECORD_INTERVAL (or unset)


@lru_cache(maxsize=4)
def _lookup_sql(by_tag: bool, with_body: bool) -> str:
    manifest, tag, repo = (_q(model._meta.db_table) for model in (Manifest, Tag, Repository))
    columns = ("m.id, m.repository_id, m.digest, m.media_type, m.size, "
               "(m.last_pulled_at IS NULL OR m.last_pulled_at < %s)")
    columns += ", (t.checked_at IS NOT NULL AND t.checked_at >= %s)" if by_tag else ", 1"
    columns += ", m.body" if with_body else ""
    if by_tag:
        return (f"SELECT {columns} FROM {tag} t JOIN {repo} r ON r.id = t.repository_id "
                f"JOIN {manifest} m ON m.id = t.manifest_id WHERE r.name = %s AND t.name = %s")
    return (f"SELECT {columns} FROM {manifest} m JOIN {repo} r ON r.id = m.repository_id "
            "WHERE r.name = %s AND m.digest = %s")


def cached_manifest(name: str, reference: str, by_tag: bool, with_body: bool, fresh_after: datetime,
                    now: datetime) -> Cached | None:
    params = [_time(now - PULL_RECORD_INTERVAL)] + ([_time(fresh_after)] if by_tag else []) + [name, reference]
    with connection.cursor() as cursor:
        cursor.execute(_lookup_sql(by_tag, with_body), params)
        row = cursor.fetchone()
    if row is None:
        return None
    body = bytes(row[7]) if with_body else None
    return Cached(row[0], row[1], row[2], row[3], row[4], body, bool(row[6]), bool(row[5]))


def record_pull(manifest_id: int, now: datetime) -> None:
    Manifest.objects.filter(id=manifest_id).update(last_pulled_at=now)


def mark_checked(repository_id: int, tag: str, now: datetime) -> None:
    Tag.objects.filter(repository_id=repository_id, name=tag).update(checked_at=now)


@lru_cache(maxsize=1)
def _point_tag_sql() -> str:
    table = _q(Tag._meta.db_table)
    # updated_at is when the tag moved (what the UI shows as pushed), not when it was confirmed.
    return (f"INSERT INTO {table} (repository_id, name, manifest_id, updated_at, checked_at) "
            "VALUES (%s, %s, %s, %s, %s) ON CONFLICT (repository_id, name) DO UPDATE SET "
            f"updated_at = CASE WHEN {table}.manifest_id = excluded.manifest_id THEN {table}.updated_at "
            "ELSE excluded.updated_at END, manifest_id = excluded.manifest_id, checked_at = excluded.checked_at")


def point_tag(repository_id: int, tag: str, manifest_id: int, now: datetime) -> None:
    with connection.cursor() as cursor:
        cursor.execute(_point_tag_sql(), [repository_id, tag, manifest_id, _time(now), _time(now)])


def drop_tag(name: str, tag: str) -> None:
    Tag.objects.filter(repository__name=name, name=tag).delete()


def manifest_id(repository_id: int, digest: str) -> int | None:
    return Manifest.objects.filter(repository_id=repository_id, digest=digest).values_list("id", flat=True).first()


@lru_cache(maxsize=1)
def _linked_sql() -> str:
    blob, link, repo = (_q(model._meta.db_table) for model in (Blob, BlobLink, Repository))
    return (f"SELECT 1 FROM {link} l JOIN {blob} b ON b.id = l.blob_id JOIN {repo} r ON r.id = l.repository_id "
            "WHERE r.name = %s AND b.digest = %s")


def blob_linked(name: str, digest: str) -> bool:
    with connection.cursor() as cursor:
        cursor.execute(_linked_sql(), [name, digest])
        return cursor.fetchone() is not None


def stored_size(digest: str) -> int | None:
    """The size of a blob stored here, in whichever repository, or None."""
    return Blob.objects.filter(digest=digest).values_list("size", flat=True).first()


def referenced_in(name: str, digest: str) -> bool:
    """Whether a manifest of repository ``name`` lists the blob ``digest``."""
    return ManifestReference.objects.filter(
        manifest__repository__name=name, digest=digest, kind=ManifestReference.BLOB
    ).exists()


def lease_held(name: str, now: datetime) -> bool:
    return Lease.objects.filter(name=name, until__gt=now).exclude(owner="").exists()


def drop_free_lease(name: str) -> None:
    """Remove a lease row nobody holds (one is made per fetched blob)."""
    Lease.objects.filter(name=name, owner="").delete()


def stale_manifests(prefix: str, cutoff: datetime) -> dict[tuple[int, str], dict[int, str]]:
    """Manifests under ``prefix``/ whose last pull (or, never pulled, whose caching) is before
    ``cutoff``: id -> digest, by (repository id, name)."""
    rows = (Manifest.objects.filter(repository__name__startswith=prefix + "/")
            .exclude(last_pulled_at__gte=cutoff).filter(created_at__lt=cutoff)
            .values_list("repository_id", "repository__name", "id", "digest"))
    found: dict[tuple[int, str], dict[int, str]] = {}
    for repository_id, name, mid, digest in rows:
        found.setdefault((repository_id, name), {})[mid] = digest
    return found


def still_stale(repository_id: int, manifest_ids: list[int], cutoff: datetime) -> set[int]:
    return set(Manifest.objects.filter(id__in=manifest_ids, repository_id=repository_id)
               .exclude(last_pulled_at__gte=cutoff).filter(created_at__lt=cutoff).values_list("id", flat=True))


def listed_by(manifest_ids: list[int], repository_id: int) -> set[str]:
    """Digests of the child manifests that the manifests of one repository other than ``manifest_ids``
    list (an index kept keeps its children)."""
    return set(ManifestReference.objects.filter(
        manifest__repository_id=repository_id, kind=ManifestReference.MANIFEST
    ).exclude(manifest_id__in=manifest_ids).values_list("digest", flat=True))
