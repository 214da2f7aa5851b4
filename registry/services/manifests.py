"""Manifests: put (with validation of what they reference), get by tag or digest, delete."""
from __future__ import annotations

from dataclasses import dataclass

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from notifications import outbox
from registry import queries, visibility
from registry.digests import Digest, is_digest_like
from registry.policies import immutable, pulls
from registry.queries import RepositoryRow
from registry.services import manifest_format
from registry.services.common import (
    check_name,
    check_tag,
    ensure_repository,
    get_repository,
    parse_digest,
)
from registry.services.digest_locks import lock_digests
from registry.services.exceptions import (
    DeleteDisabled,
    DigestInvalid,
    ManifestBlobUnknown,
    ManifestInvalid,
    ManifestTooLarge,
    ManifestUnknown,
    TagInvalid,
)


@dataclass(frozen=True)
class StoredManifest:
    digest: str
    media_type: str
    size: int
    body: bytes | None  # None when asked for headers only
    warning: str = ""  # a Warning header's value (a pull-through cache serving a stale tag)


@dataclass(frozen=True)
class PutResult:
    digest: str
    subject: str | None
    tags: list[str]


def _reference(reference: str) -> tuple[Digest | None, str | None]:
    if is_digest_like(reference):
        return parse_digest(reference), None
    check_tag(reference)
    return None, reference


def put(
    name: str,
    reference: str,
    body: bytes,
    content_type: str | None,
    max_bytes: int,
    extra_tags: list[str] | None = None,
) -> PutResult:
    check_name(name)
    by_digest, tag = _reference(reference)
    tags = ([tag] if tag else []) + list(extra_tags or [])
    for extra in tags:
        check_tag(extra)
    if len(body) > max_bytes:
        raise ManifestTooLarge(f"manifest of {len(body)} bytes is over the limit of {max_bytes}")
    digest = Digest.of(body, by_digest.algorithm if by_digest else "sha256")
    if by_digest is not None and digest != by_digest:
        raise DigestInvalid(
            f"manifest digest {digest} does not match reference {by_digest}", {"digest": str(by_digest)}
        )
    parsed = manifest_format.parse(body, content_type, settings.REGISTRY_MAX_DESCRIPTORS)
    repository = ensure_repository(name)
    for _attempt in range(3):
        try:
            with transaction.atomic():
                # Shared with other pushes; the collector deciding which of the repository's
                # manifests nothing reaches holds it alone (services.gc).
                queries.lock_repository(repository.id, exclusive=False)
                # Taken in the garbage collector's order, so a collection deleting one of these
                # runs wholly before (MANIFEST_BLOB_UNKNOWN here) or after (it sees our references).
                lock_digests(
                    [str(digest)] + [d.digest for d in parsed.blobs] + [d.digest for d in parsed.children]
                )
                _check_references(repository, parsed)
                manifest_id = _store(repository, str(digest), body, parsed)
                movable = immutable.guard(repository, manifest_id, list(dict.fromkeys(tags)))
                queries.point_tags(repository.id, manifest_id, movable, timezone.now())
                outbox.manifest_pushed(name, str(digest), parsed.media_type, len(body), list(dict.fromkeys(tags)),
                                       parsed.subject.digest if parsed.subject else "")
            break
        except IntegrityError:
            continue  # a concurrent push of the same manifest or tag won: retry against its rows
    else:
        raise ManifestInvalid("manifest could not be stored because of concurrent updates")
    return PutResult(str(digest), parsed.subject.digest if parsed.subject else None, list(dict.fromkeys(tags)))


def _check_references(repository: RepositoryRow, parsed: manifest_format.ParsedManifest) -> None:
    wanted = {d.digest for d in parsed.blobs if not d.foreign}
    missing = sorted(wanted - queries.linked_digests(repository.id, wanted))
    if missing:
        raise ManifestBlobUnknown(
            f"blob {missing[0]} is not in repository {repository.name!r}", {"digest": missing[0]}
        )
    children = {d.digest for d in parsed.children}
    missing = sorted(children - queries.stored_manifests(repository.id, children))
    if missing:
        raise ManifestBlobUnknown(
            f"manifest {missing[0]} is not in repository {repository.name!r}", {"digest": missing[0]}
        )


def _store(repository: RepositoryRow, digest: str, body: bytes, parsed: manifest_format.ParsedManifest) -> int:
    """The manifest's id, storing it unless the repository has it already."""
    stored = queries.manifest_id(repository.id, digest)
    if stored is not None:
        return stored
    return queries.insert_manifest(
        repository.id, digest, body,
        media_type=parsed.media_type,
        artifact_type=parsed.referrer_artifact_type,
        subject_digest=parsed.subject.digest if parsed.subject else "",
        annotations=parsed.annotations,
        blobs=[d.digest for d in parsed.blobs if not d.foreign],
        children=[d.digest for d in parsed.children],
    )


def get(name: str, reference: str, with_body: bool = True) -> StoredManifest:
    check_name(name)
    try:
        by_digest, tag = _reference(reference)
    except TagInvalid:
        # A reference that is not a valid tag names nothing: 404, as CNCF distribution answers
        # and the OCI conformance suite expects (a PUT of one is still refused as invalid).
        raise ManifestUnknown(f"manifest {reference[:200]!r} unknown to repository {name!r}") from None
    if visibility.hidden(name):
        row = None
    elif by_digest is not None:
        row = queries.manifest_by_digest(name, str(by_digest), with_body)
    else:
        row = queries.manifest_by_tag(name, str(tag), with_body)
    if row is None:
        raise ManifestUnknown(f"manifest {reference!r} unknown to repository {name!r}")
    if with_body:  # a GET is a pull; a HEAD is not
        pulls.record(row.id, row.pull_due)
    return StoredManifest(row.digest, row.media_type, row.size, row.body)


def delete(name: str, reference: str, delete_enabled: bool) -> None:
    """Delete by digest removes the manifest and every tag on it; by tag removes only the tag."""
    if not delete_enabled:
        raise DeleteDisabled("deletes are disabled on this registry")
    check_name(name)
    by_digest, tag = _reference(reference)
    repository = get_repository(name)
    with transaction.atomic():
        if by_digest is not None and immutable.applies(name):
            lock_digests([str(by_digest)])  # an index PUT listing it goes first, or after
        immutable.check_delete(repository, tag, str(by_digest) if by_digest else None)
        if by_digest is not None:
            deleted = queries.delete_manifest(repository.id, str(by_digest))
            if deleted:
                outbox.manifest_deleted(name, str(by_digest))
        else:
            deleted = queries.delete_tag(repository.id, str(tag))
            if deleted:
                outbox.tag_deleted(name, str(tag))
    if not deleted:
        raise ManifestUnknown(f"manifest {reference!r} unknown to repository {name!r}")
