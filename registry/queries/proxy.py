"""The pull-through caches' statements (registry.proxy): a cached manifest by tag or digest with
whether its tag is still fresh, pointing and confirming a cached tag, what a cache may adopt from
another repository, and what eviction finds.

A cached pull must cost what a pull of an ordinary repository costs: the lookup is one statement,
built once, that also says whether the tag is fresh and whether the manifest's pull must be recorded
(the same test as manifests.manifest_by_tag's, registry.policies.pulls writes it).
"""
from __future__ import annotations

from datetime import datetime
from typing import Any, NamedTuple

from registry.models import Blob, Manifest, ManifestReference, Repository, Tag
from registry.queries._sql import execute, fetch_one, moment, statement, table
from registry.queries.manifests import pull_due_sql


class CachedManifest(NamedTuple):
    id: int
    repository_id: int
    digest: str
    media_type: str
    size: int
    body: bytes | None  # None when asked for without it
    fresh: bool  # by digest always; by tag, confirmed by the upstream since ``fresh_after``
    pull_due: bool  # with the body: no pull recorded in the last minute


@statement
def _cached_sql(by_tag: bool, with_body: bool) -> str:
    columns = "m.id, m.repository_id, m.digest, m.media_type, m.size"
    columns += ", (t.checked_at IS NOT NULL AND t.checked_at >= %s)" if by_tag else ", 1 = 1"
    columns += f", m.body, {pull_due_sql()}" if with_body else ""
    if by_tag:
        return (f"SELECT {columns} FROM {table(Tag)} t JOIN {table(Repository)} r ON r.id = t.repository_id "
                f"JOIN {table(Manifest)} m ON m.id = t.manifest_id WHERE r.name = %s AND t.name = %s")
    return (f"SELECT {columns} FROM {table(Manifest)} m JOIN {table(Repository)} r ON r.id = m.repository_id "
            "WHERE r.name = %s AND m.digest = %s")


def cached_manifest(repository: str, reference: str, by_tag: bool, with_body: bool,
                    fresh_after: datetime) -> CachedManifest | None:
    params: list[Any] = ([moment(fresh_after)] if by_tag else []) + [repository, reference]
    row = fetch_one(_cached_sql(by_tag, with_body), params)
    if row is None:
        return None
    body, due = (bytes(row[6]), bool(row[7])) if with_body else (None, False)
    return CachedManifest(row[0], row[1], row[2], row[3], row[4], body, bool(row[5]), due)


@statement
def _point_sql() -> str:
    tags = table(Tag)
    # updated_at is when the tag moved (what the UI shows as pushed), not when it was confirmed.
    return (f"INSERT INTO {tags} (repository_id, name, manifest_id, updated_at, checked_at) "
            "VALUES (%s, %s, %s, %s, %s) ON CONFLICT (repository_id, name) DO UPDATE SET "
            f"updated_at = CASE WHEN {tags}.manifest_id = excluded.manifest_id THEN {tags}.updated_at "
            "ELSE excluded.updated_at END, manifest_id = excluded.manifest_id, checked_at = excluded.checked_at")


def point_cached_tag(repository_id: int, tag: str, manifest_id: int, now: datetime) -> None:
    """Create or move a cached tag, confirmed upstream ``now``."""
    execute(_point_sql(), [repository_id, tag, manifest_id, moment(now), moment(now)])


@statement
def _checked_sql() -> str:
    return f"UPDATE {table(Tag)} SET checked_at = %s WHERE repository_id = %s AND name = %s"


def mark_tag_checked(repository_id: int, tag: str, now: datetime) -> None:
    """The upstream confirmed the tag's digest ``now``."""
    execute(_checked_sql(), [moment(now), repository_id, tag])


# -- adopting a blob stored for another repository ------------------------------------------------


@statement
def _size_sql() -> str:
    return f"SELECT size FROM {table(Blob)} WHERE digest = %s"


def stored_blob_size(digest: str) -> int | None:
    """The size of a blob stored here, in whichever repository, or None."""
    row = fetch_one(_size_sql(), [digest])
    return None if row is None else int(row[0])


@statement
def _references_sql() -> str:
    return (f"SELECT 1 FROM {table(ManifestReference)} x JOIN {table(Manifest)} m ON m.id = x.manifest_id "
            f"JOIN {table(Repository)} r ON r.id = m.repository_id "
            "WHERE r.name = %s AND x.digest = %s AND x.kind = %s")


def references_blob(repository: str, digest: str) -> bool:
    """Whether a manifest of the repository lists the blob ``digest``."""
    return fetch_one(_references_sql(), [repository, digest, ManifestReference.BLOB]) is not None


# -- eviction ([[proxy]] evict_after_days) ---------------------------------------------------------


def stale_manifests(prefix: str, cutoff: datetime) -> dict[tuple[int, str], dict[int, str]]:
    """Manifests under ``prefix``/ (every one for a root mirror's empty prefix) whose last pull (or,
    never pulled, whose caching) is before ``cutoff``: id -> digest, by (repository id, name)."""
    manifests = Manifest.objects.filter(repository__name__startswith=prefix + "/") if prefix else Manifest.objects.all()
    rows = (manifests
            .exclude(last_pulled_at__gte=cutoff).filter(created_at__lt=cutoff)
            .values_list("repository_id", "repository__name", "id", "digest"))
    found: dict[tuple[int, str], dict[int, str]] = {}
    for repository_id, name, mid, digest in rows:
        found.setdefault((repository_id, name), {})[mid] = digest
    return found


def still_stale(repository_id: int, manifest_ids: list[int], cutoff: datetime) -> set[int]:
    """Which of ``manifest_ids`` are still unpulled since ``cutoff`` (read again under their locks)."""
    return set(Manifest.objects.filter(id__in=manifest_ids, repository_id=repository_id)
               .exclude(last_pulled_at__gte=cutoff).filter(created_at__lt=cutoff).values_list("id", flat=True))


def listed_by_others(manifest_ids: list[int], repository_id: int) -> set[str]:
    """Digests of the child manifests that the repository's manifests other than ``manifest_ids``
    list (an index kept keeps its children)."""
    return set(ManifestReference.objects.filter(
        manifest__repository_id=repository_id, kind=ManifestReference.MANIFEST
    ).exclude(manifest_id__in=manifest_ids).values_list("digest", flat=True))
