"""Blobs as seen through a repository: stat, read, link, mount, unlink."""
from __future__ import annotations

from dataclasses import dataclass
from typing import BinaryIO, Callable

from django.db import transaction
from django.utils import timezone

from notifications import outbox
from registry import queries, visibility
from registry.digests import Digest
from registry.policies import immutable, quotas
from registry.services.common import check_name, ensure_repository, get_repository, parse_digest
from registry.services.digest_locks import lock_digests
from registry.services.exceptions import BlobUnknown, DeleteDisabled, NameUnknown
from registry.storage import default_driver, paths
from registry.storage.driver import PathNotFound


@dataclass(frozen=True)
class BlobInfo:
    digest: str
    size: int


def _linked(name: str, digest: Digest) -> queries.BlobRow:
    check_name(name)
    blob = None if visibility.hidden(name) else queries.linked_blob(name, str(digest))
    if blob is None:
        raise BlobUnknown(f"blob {digest} unknown to repository {name!r}", {"digest": str(digest)})
    return blob


def stat(name: str, digest_text: str) -> BlobInfo:
    digest = parse_digest(digest_text)
    blob = _linked(name, digest)
    drv = default_driver()
    if drv.remote:
        return BlobInfo(blob.digest, blob.size)  # the database is the truth; scrub checks the store
    try:
        drv.stat(paths.blob_data(digest))
    except PathNotFound:
        # As GET does: a client that HEADs before pushing must push the missing data again.
        raise BlobUnknown(f"blob {digest} data is missing", {"digest": str(digest)}) from None
    return BlobInfo(blob.digest, blob.size)


def open_blob(name: str, digest_text: str) -> tuple[BinaryIO, BlobInfo]:
    digest = parse_digest(digest_text)
    blob = _linked(name, digest)
    try:
        stream = default_driver().open(paths.blob_data(digest))
    except PathNotFound:
        # Metadata without data: answer as unknown so that the client pushes it again.
        raise BlobUnknown(f"blob {digest} data is missing", {"digest": str(digest)}) from None
    return stream, BlobInfo(blob.digest, blob.size)


def location(name: str, digest_text: str) -> tuple[str, BlobInfo] | None:
    """Where a client can fetch the blob itself (a presigned URL), when the store offers that and
    [storage] redirect is on; None to have the registry send the bytes."""
    from django.conf import settings

    drv = default_driver()
    if not settings.REGISTRY_REDIRECT or not drv.remote:
        return None
    digest = parse_digest(digest_text)
    blob = _linked(name, digest)
    url = drv.url_for(paths.blob_data(digest))
    return (url, BlobInfo(blob.digest, blob.size)) if url else None


def link(
    repository_id: int,
    name: str,
    digest: Digest,
    size: int,
    *,
    source: str | None = None,
) -> BlobInfo:
    """Record that the repository ``name`` (of id ``repository_id``) holds the blob ``digest``.

    When the data is not stored, ``source`` (an upload's verified file) is moved into place, or
    without one BlobUnknown is raised. Both happen under the digest's lock, so a garbage collection
    deleting the data either ran before or sees the new row and keeps the data.
    """
    drv = default_driver()
    if source is not None and drv.remote:
        quotas.precheck(name, str(digest), size)  # before a copy that is not undone
        # A copy inside an object store takes as long as the blob is large: done before the
        # transaction, which then only checks that the data is there. The copy is new, so the
        # collector's grace period keeps it until the row exists. Copying over a stored copy of
        # the same digest writes the same bytes: cheaper than asking first. The source stays (its
        # caller removes it once the row is committed): a commit that fails (the database failing
        # over) leaves the upload whole, and the client's retry finishes it.
        drv.copy(source, paths.blob_data(digest))
        source = None
    with transaction.atomic():
        lock_digests([str(digest)])
        quotas.charge(name, str(digest), size)  # QuotaExceeded rolls all of this back
        try:
            drv.stat(paths.blob_data(digest))
        except PathNotFound:
            if source is None:
                raise BlobUnknown(f"blob {digest} data is missing", {"digest": str(digest)}) from None
            drv.move(source, paths.blob_data(digest))
        # A re-pushed blob starts a new grace period, like a new one (see services.gc).
        blob = queries.link_blob(repository_id, str(digest), size, timezone.now())
    return BlobInfo(blob.digest, blob.size)


def mount(
    name: str,
    digest_text: str,
    source: str | None,
    may_read: Callable[[str], bool] = lambda _name: True,
) -> BlobInfo | None:
    """Link a blob from ``source`` (or, without it, from any readable repository) into ``name``.

    Returns None when the blob cannot be mounted, so that the caller starts a normal upload.
    """
    check_name(name)
    digest = Digest.parse_or_none(digest_text)
    if digest is None:
        return None
    candidate = _readable_source(str(digest), source, may_read)
    if candidate is None:
        return None
    try:
        with transaction.atomic():
            info = link(ensure_repository(name).id, name, digest, candidate.size)
            outbox.blob_mounted(name, info.digest, info.size, candidate.repository)
    except BlobUnknown:  # the data is gone (collected, or lost): the client uploads it instead
        return None
    return info


# Repositories holding a blob that a mount looks through for one the caller may read: 20 pages of 50.
MOUNT_PAGE, MOUNT_PAGES = 50, 20


def _readable_source(digest: str, source: str | None,
                     may_read: Callable[[str], bool]) -> queries.MountSource | None:
    """The first repository linking ``digest`` that the caller may read. Bounded: past MOUNT_PAGES
    the caller uploads the blob instead, which the spec allows for any mount."""
    after = 0
    for _page in range(MOUNT_PAGES):
        sources = queries.mount_sources(digest, source, after, MOUNT_PAGE)
        found = next((found for found in sources if may_read(found.repository)), None)
        if found is not None or len(sources) < MOUNT_PAGE:
            return found
        after = sources[-1].link_id
    return None


def delete(name: str, digest_text: str, delete_enabled: bool) -> None:
    """Unlink a blob from a repository; the data goes when the garbage collector finds it unused."""
    if not delete_enabled:
        raise DeleteDisabled("deletes are disabled on this registry")
    digest = parse_digest(digest_text)
    try:
        repository = get_repository(name)
    except NameUnknown:
        raise BlobUnknown(f"blob {digest} unknown to repository {name!r}", {"digest": str(digest)}) from None
    with transaction.atomic(), quotas.releasing(lambda: queries.quota_links_of_digest(str(digest), repository.id)):
        if immutable.applies(repository.name):
            lock_digests([str(digest)])  # a manifest PUT referencing it goes first, or after
            immutable.check_blob_delete(repository, str(digest))
        deleted = queries.unlink_blob(repository.id, str(digest))
        if deleted:
            outbox.blob_deleted(name, str(digest))
    if not deleted:
        raise BlobUnknown(f"blob {digest} unknown to repository {name!r}", {"digest": str(digest)})
