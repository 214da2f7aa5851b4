"""Manifests: put (with validation of what they reference), get by tag or digest, delete."""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from django.conf import settings
from django.db import IntegrityError, connection, transaction
from django.utils import timezone

from notifications import outbox
from registry.digests import Digest, is_digest_like
from registry.models import Blob, BlobLink, Manifest, ManifestReference, Repository, Tag
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
                # Taken in the garbage collector's order, so a collection deleting one of these
                # runs wholly before (MANIFEST_BLOB_UNKNOWN here) or after (it sees our references).
                lock_digests(
                    [str(digest)] + [d.digest for d in parsed.blobs] + [d.digest for d in parsed.children]
                )
                _check_references(repository, parsed)
                manifest = _store(repository, str(digest), body, parsed)
                _point_tags(repository, manifest, list(dict.fromkeys(tags)))
                outbox.manifest_pushed(name, str(digest), parsed.media_type, len(body), list(dict.fromkeys(tags)))
            break
        except IntegrityError:
            continue  # a concurrent push of the same manifest or tag won: retry against its rows
    else:
        raise ManifestInvalid("manifest could not be stored because of concurrent updates")
    return PutResult(str(digest), parsed.subject.digest if parsed.subject else None, list(dict.fromkeys(tags)))


@lru_cache(maxsize=1)
def _upsert_tag_sql() -> str:
    # One statement per tag (SQLite >= 3.24 and PostgreSQL): update_or_create's SELECT, savepoints
    # and INSERT or UPDATE were 28% of a tag PUT's CPU.
    q = connection.ops.quote_name
    return (f"INSERT INTO {q(Tag._meta.db_table)} (repository_id, name, manifest_id, updated_at) "
            "VALUES (%s, %s, %s, %s) ON CONFLICT (repository_id, name) "
            "DO UPDATE SET manifest_id = excluded.manifest_id, updated_at = excluded.updated_at")


def _point_tags(repository: Repository, manifest: Manifest, tags: list[str]) -> None:
    if not tags:
        return
    now = connection.ops.adapt_datetimefield_value(timezone.now())
    with connection.cursor() as cursor:
        cursor.executemany(_upsert_tag_sql(), [(repository.pk, tag, manifest.pk, now) for tag in tags])


@lru_cache(maxsize=64)
def _present_sql(kind: str, count: int) -> str:
    """Which of ``count`` digests a repository holds, as blobs or as manifests; built once per
    shape, since compiling these ORM queries was a third of a tag PUT's CPU (inside its lock)."""
    q = connection.ops.quote_name
    marks = ", ".join(["%s"] * count)
    if kind == "blob":
        return (f"SELECT b.digest FROM {q(BlobLink._meta.db_table)} l JOIN {q(Blob._meta.db_table)} b "
                f"ON b.id = l.blob_id WHERE l.repository_id = %s AND b.digest IN ({marks})")
    return f"SELECT digest FROM {q(Manifest._meta.db_table)} WHERE repository_id = %s AND digest IN ({marks})"


def _missing(kind: str, repository: Repository, digests: set[str]) -> list[str]:
    wanted = sorted(digests)
    with connection.cursor() as cursor:
        cursor.execute(_present_sql(kind, len(wanted)), [repository.pk, *wanted])
        present = {row[0] for row in cursor.fetchall()}
    return [d for d in wanted if d not in present]


def _check_references(repository: Repository, parsed: manifest_format.ParsedManifest) -> None:
    wanted = {d.digest for d in parsed.blobs if not d.foreign}
    missing = _missing("blob", repository, wanted) if wanted else []
    if missing:
        raise ManifestBlobUnknown(
            f"blob {missing[0]} is not in repository {repository.name!r}", {"digest": missing[0]}
        )
    children = {d.digest for d in parsed.children}
    missing = _missing("manifest", repository, children) if children else []
    if missing:
        raise ManifestBlobUnknown(
            f"manifest {missing[0]} is not in repository {repository.name!r}", {"digest": missing[0]}
        )


@lru_cache(maxsize=1)
def _existing_sql() -> str:
    q = connection.ops.quote_name
    return f"SELECT id FROM {q(Manifest._meta.db_table)} WHERE repository_id = %s AND digest = %s"


def _store(
    repository: Repository, digest: str, body: bytes, parsed: manifest_format.ParsedManifest
) -> Manifest:
    with connection.cursor() as cursor:
        cursor.execute(_existing_sql(), [repository.pk, digest])
        row = cursor.fetchone()
    if row is not None:
        return Manifest.from_db(connection.alias, ["id"], [row[0]])  # only its id is used
    manifest = Manifest.objects.create(
        repository=repository,
        digest=digest,
        media_type=parsed.media_type,
        size=len(body),
        body=body,
        artifact_type=parsed.referrer_artifact_type,
        subject_digest=parsed.subject.digest if parsed.subject else "",
        annotations=parsed.annotations,
    )
    refs = [
        ManifestReference(manifest=manifest, digest=d.digest, kind=ManifestReference.BLOB)
        for d in parsed.blobs
        if not d.foreign
    ] + [
        ManifestReference(manifest=manifest, digest=d.digest, kind=ManifestReference.MANIFEST)
        for d in parsed.children
    ]
    ManifestReference.objects.bulk_create(refs)
    return manifest


@lru_cache(maxsize=4)
def _lookup_sql(by_digest: bool, with_body: bool) -> str:
    """The manifest lookup, built once: compiling it with the ORM was 2/3 of a manifest GET's CPU."""
    q = connection.ops.quote_name
    manifest, tag, repo = (q(model._meta.db_table) for model in (Manifest, Tag, Repository))
    columns = "m.digest, m.media_type, m.size" + (", m.body" if with_body else "")
    if by_digest:
        return (f"SELECT {columns} FROM {manifest} m JOIN {repo} r ON r.id = m.repository_id "
                "WHERE r.name = %s AND m.digest = %s")
    return (f"SELECT {columns} FROM {tag} t JOIN {repo} r ON r.id = t.repository_id "
            f"JOIN {manifest} m ON m.id = t.manifest_id WHERE r.name = %s AND t.name = %s")


def get(name: str, reference: str, with_body: bool = True) -> StoredManifest:
    check_name(name)
    try:
        by_digest, tag = _reference(reference)
    except TagInvalid:
        # A reference that is not a valid tag names nothing: 404, as CNCF distribution answers
        # and the OCI conformance suite expects (a PUT of one is still refused as invalid).
        raise ManifestUnknown(f"manifest {reference[:200]!r} unknown to repository {name!r}") from None
    with connection.cursor() as cursor:
        cursor.execute(_lookup_sql(by_digest is not None, with_body), [name, str(by_digest or tag)])
        row = cursor.fetchone()
    if row is None:
        raise ManifestUnknown(f"manifest {reference!r} unknown to repository {name!r}")
    body = bytes(row[3]) if with_body else None
    return StoredManifest(row[0], row[1], row[2], body)


def delete(name: str, reference: str, delete_enabled: bool) -> None:
    """Delete by digest removes the manifest and every tag on it; by tag removes only the tag."""
    if not delete_enabled:
        raise DeleteDisabled("deletes are disabled on this registry")
    check_name(name)
    by_digest, tag = _reference(reference)
    repository = get_repository(name)
    with transaction.atomic():
        if by_digest is not None:
            deleted, _ = Manifest.objects.filter(repository=repository, digest=str(by_digest)).delete()
            if deleted:
                outbox.manifest_deleted(name, str(by_digest))
        else:
            deleted, _ = Tag.objects.filter(repository=repository, name=tag).delete()
            if deleted:
                outbox.tag_deleted(name, str(tag))
    if not deleted:
        raise ManifestUnknown(f"manifest {reference!r} unknown to repository {name!r}")
