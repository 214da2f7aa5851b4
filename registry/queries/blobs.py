"""Blobs and the links that make them visible in repositories: reading one through a repository,
linking, mounting, and what the garbage collector and scrub ask of them."""
from __future__ import annotations

from datetime import datetime
from typing import Iterable, Iterator, NamedTuple, Sequence

from django.db.models import Count, Sum

from registry.models import Blob, BlobLink, Repository
from registry.queries._sql import execute, fetch_all, fetch_one, marks, moment, statement, table
from registry.queries.graph import chunks


class BlobRow(NamedTuple):
    digest: str
    size: int


class StoredBlob(NamedTuple):
    id: int
    digest: str
    size: int
    created_at: datetime


class BlobTotals(NamedTuple):
    blobs: int
    size: int  # bytes


# -- through a repository --------------------------------------------------------------------------


@statement
def _link_of_blob_sql() -> str:
    return (f"SELECT 1 FROM {table(BlobLink)} l JOIN {table(Repository)} r ON r.id = l.repository_id "
            "WHERE r.name = %s AND l.blob_id = %s")


def linked_blob(repository: str, digest: str) -> BlobRow | None:
    """The blob ``digest`` if repository ``repository`` links it.

    Two statements, so that the link's is planned for this blob: joined on the repository's name
    and the blob's digest, PostgreSQL planned for a repository and a blob of a few links each and
    read every link of a big repository, or of a base layer every image shares (issue 25: 540 ms
    for a blob HEAD in a 100,000-tag repository)."""
    blob = fetch_one(_blob_sql(), [digest])
    if blob is None or fetch_one(_link_of_blob_sql(), [repository, blob[0]]) is None:
        return None
    return BlobRow(digest, blob[1])


@statement
def _linked_digests_sql(count: int) -> str:
    return (f"SELECT b.digest FROM {table(BlobLink)} l JOIN {table(Blob)} b ON b.id = l.blob_id "
            f"WHERE l.repository_id = %s AND b.digest IN ({marks(count)})")


def linked_digests(repository_id: int, digests: Iterable[str]) -> set[str]:
    """Which of ``digests`` the repository links."""
    wanted = sorted(set(digests))
    if not wanted:
        return set()
    return {row[0] for row in fetch_all(_linked_digests_sql(len(wanted)), [repository_id, *wanted])}


@statement
def _insert_blob_sql() -> str:
    # SQLite >= 3.24 and PostgreSQL both have ON CONFLICT.
    return f"INSERT INTO {table(Blob)} (digest, size, created_at) VALUES (%s, %s, %s) ON CONFLICT (digest) DO NOTHING"


@statement
def _blob_sql() -> str:
    return f"SELECT id, size FROM {table(Blob)} WHERE digest = %s"


@statement
def _upsert_link_sql() -> str:
    return (f"INSERT INTO {table(BlobLink)} (repository_id, blob_id, created_at) VALUES (%s, %s, %s) "
            "ON CONFLICT (repository_id, blob_id) DO UPDATE SET created_at = excluded.created_at")


def link_blob(repository_id: int, digest: str, size: int, now: datetime) -> BlobRow:
    """Record the blob (unless known) and link it into the repository. A link made again starts
    anew (a new grace period for the collector); a known blob keeps its recorded size."""
    at = moment(now)
    execute(_insert_blob_sql(), [digest, size, at])
    found = fetch_one(_blob_sql(), [digest])
    assert found is not None  # inserted or kept above, under the digest's lock
    blob_id, stored_size = found
    execute(_upsert_link_sql(), [repository_id, blob_id, at])
    return BlobRow(digest, stored_size)


class MountSource(NamedTuple):
    repository: str
    size: int
    link_id: int


def mount_sources(digest: str, repository: str | None, after: int = 0, limit: int = 50) -> list[MountSource]:
    """Repositories (``repository`` only, when given) that link the blob ``digest``, a page at a
    time in link order (``after``: the last page's last ``link_id``)."""
    links = BlobLink.objects.filter(blob__digest=digest, id__gt=after).order_by("id")
    if repository is not None:
        links = links.filter(repository__name=repository)
    return [MountSource(*row) for row in links.values_list("repository__name", "blob__size", "id")[:limit]]


def unlink_blob(repository_id: int, digest: str) -> int:
    deleted, _ = BlobLink.objects.filter(repository_id=repository_id, blob__digest=digest).delete()
    return deleted


# -- every blob ------------------------------------------------------------------------------------


def blob_totals() -> BlobTotals:
    totals = Blob.objects.aggregate(count=Count("id"), size=Sum("size"))
    return BlobTotals(totals["count"] or 0, totals["size"] or 0)


def blob_count() -> int:
    return Blob.objects.count()


def blob_page(after_id: int, limit: int) -> list[StoredBlob]:
    """Blob rows with ids above ``after_id``, in id order: paging by id, not by offset, so rows
    deleted or added meanwhile neither skip nor repeat a row."""
    rows = Blob.objects.filter(id__gt=after_id).order_by("id").values_list("id", "digest", "size", "created_at")
    return [StoredBlob(*row) for row in rows[:limit]]


@statement
def _known_digests_sql(count: int) -> str:
    return f"SELECT digest FROM {table(Blob)} WHERE digest IN ({marks(count)})"


def known_digests(digests: Iterable[str]) -> set[str]:
    """Which of ``digests`` have a blob row. The collector asks this under SQLite's write lock,
    ten digests at a time: the ORM's query building was most of the 1.2 ms each took."""
    return {row[0] for chunk in chunks(list(digests)) for row in fetch_all(_known_digests_sql(len(chunk)), chunk)}


@statement
def _digests_between_sql() -> str:
    return f"SELECT digest FROM {table(Blob)} WHERE digest >= %s AND digest < %s"


def digests_with_prefix(algorithm: str, prefix: str) -> set[str]:
    """The digests of the blob rows whose hex part starts with ``prefix`` (two hex characters, a
    blob prefix directory's name): one range of the digest index. The bounds are the prefix and the
    next one, or "g" after "ff": hex is digits then a to f, in the bytes' order and in a
    language's collation alike."""
    following = f"{int(prefix, 16) + 1:02x}" if prefix != "ff" else "g"
    return {row[0] for row in fetch_all(_digests_between_sql(), [f"{algorithm}:{prefix}", f"{algorithm}:{following}"])}


def blob_exists(digest: str) -> bool:
    return Blob.objects.filter(digest=digest).exists()


def delete_blob(digest: str) -> None:
    """Forget a blob: its links in every repository and its row."""
    BlobLink.objects.filter(blob__digest=digest).delete()
    Blob.objects.filter(digest=digest).delete()


# -- quotas ----------------------------------------------------------------------------------------
# What registry.policies.quotas asks of the links: whose they are and how large their blobs, to
# charge a link and to give back what an unlink frees. Lists of ids go in chunks of CHUNK: SQLite
# refuses statements with too many parameters.

CHUNK = 500


class QuotaLink(NamedTuple):
    id: int
    repository: str
    blob_id: int
    size: int  # the blob's


_QUOTA_LINK = ("id", "repository__name", "blob_id", "blob__size")


def _chunked(ids: Sequence[int]) -> Iterator[list[int]]:
    ordered = sorted(set(ids))
    for start in range(0, len(ordered), CHUNK):
        yield ordered[start:start + CHUNK]


def quota_links_by_id(link_ids: Sequence[int]) -> list[QuotaLink]:
    return [QuotaLink(*row) for chunk in _chunked(link_ids)
            for row in BlobLink.objects.filter(id__in=chunk).values_list(*_QUOTA_LINK)]


def quota_links_of_blobs(blob_ids: Sequence[int]) -> list[QuotaLink]:
    return [QuotaLink(*row) for chunk in _chunked(blob_ids)
            for row in BlobLink.objects.filter(blob_id__in=chunk).values_list(*_QUOTA_LINK)]


def quota_links_of_digest(digest: str, repository_id: int | None = None) -> list[QuotaLink]:
    """The links of the blob ``digest`` (in the repository only, when given)."""
    links = BlobLink.objects.filter(blob__digest=digest)
    if repository_id is not None:
        links = links.filter(repository_id=repository_id)
    return [QuotaLink(*row) for row in links.values_list(*_QUOTA_LINK)]


def quota_links_in_repository(repository_id: int) -> list[QuotaLink]:
    return [QuotaLink(*row) for row in BlobLink.objects.filter(repository_id=repository_id).values_list(*_QUOTA_LINK)]


@statement
def _linkers_sql() -> str:
    return (f"SELECT r.name FROM {table(BlobLink)} l JOIN {table(Blob)} b ON b.id = l.blob_id "
            f"JOIN {table(Repository)} r ON r.id = l.repository_id WHERE b.digest = %s")


def repositories_linking(digest: str) -> list[str]:
    """Names of the repositories holding a link to the blob ``digest``."""
    return [row[0] for row in fetch_all(_linkers_sql(), [digest])]


def repositories_linking_blobs(blob_ids: Sequence[int]) -> list[tuple[int, str]]:
    """(blob id, repository name) of every link of these blobs."""
    return [(blob_id, name) for chunk in _chunked(blob_ids)
            for blob_id, name in BlobLink.objects.filter(blob_id__in=chunk).values_list("blob_id", "repository__name")]
