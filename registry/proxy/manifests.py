"""Manifests through a pull-through cache: served from the database when cached, else fetched.

A manifest by digest never changes, so once cached it is served for ever (until evicted). A tag is
trusted for the mirror's ``tag_ttl``; after that one HEAD asks the upstream for its digest: the same
one costs nothing more, a new one is fetched by digest and the tag moves. When the upstream cannot
answer (down, 429, 5xx, credentials refused) a cached tag is served anyway with a ``Warning``
header, and a miss is refused with the upstream's failure (registry.errors maps it to 502, 503, 504
or 429 with Retry-After). A tag the upstream says it does not have is gone here too, and that
answer, as any 404 of the upstream, is remembered for the cache's ``negative_ttl``
(registry.proxy.misses). Asking the upstream holds one of the worker's slots for the cache
(registry.proxy.slots); when none is free a cached tag is served as when the upstream fails.

Manifests are stored as the upstream sent them, byte for byte, without their blobs: those are
fetched when a client asks for them (registry.proxy.blobs).
"""
from __future__ import annotations

import logging
from datetime import datetime

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from registry import queries
from registry.digests import Digest, is_digest_like
from registry.policies import pulls
from registry.proxy import metrics, misses, slots
from registry.proxy.mirrors import Mirror, split
from registry.proxy.upstream import FetchedManifest, Upstream
from registry.services import manifest_format
from registry.services.common import check_name, check_tag, ensure_repository, parse_digest
from registry.services.digest_locks import lock_digests
from registry.services.exceptions import (
    ManifestInvalid,
    ManifestUnknown,
    TagInvalid,
    UpstreamError,
    UpstreamFailed,
)
from registry.services.manifests import StoredManifest

log = logging.getLogger(__name__)


def get(name: str, reference: str, with_body: bool = True) -> StoredManifest:
    check_name(name)
    mirror, upstream_name = split(name)
    by_digest = is_digest_like(reference)
    if by_digest:
        reference = str(parse_digest(reference))
    else:
        try:
            check_tag(reference)
        except TagInvalid:
            raise ManifestUnknown(f"manifest {reference[:200]!r} unknown to repository {name!r}") from None
    now = timezone.now()
    cached = queries.cached_manifest(name, reference, not by_digest, with_body, now - mirror.tag_ttl)
    if cached is not None and cached.fresh:
        metrics.HITS.labels(mirror.prefix, "manifest").inc()
        return _served(cached)
    if cached is None and misses.remembered(mirror, "manifest", upstream_name, reference):
        raise _unknown(name, reference)
    slot: slots.Slot | None = None
    try:
        slot = slots.take(mirror)
        upstream = Upstream(mirror)
        if cached is not None:
            return _revalidate(upstream, mirror, name, upstream_name, reference, cached, with_body, now)
        fetched = upstream.get_manifest(upstream_name, reference, settings.REGISTRY_MAX_MANIFEST_BYTES)
    except UpstreamError as error:
        if cached is None:
            raise
        metrics.STALE.labels(mirror.prefix).inc()
        return _served(cached, f"the upstream could not confirm this tag ({error.message}); "
                                    "serving the copy cached here")
    finally:
        if slot is not None:
            slot.release()
    if fetched is None:
        misses.remember(mirror, "manifest", upstream_name, reference)
        raise _unknown(name, reference)
    metrics.MISSES.labels(mirror.prefix, "manifest").inc()
    return _cache(mirror, name, reference, fetched, with_body, now)


def _unknown(name: str, reference: str) -> ManifestUnknown:
    return ManifestUnknown(f"manifest {reference!r} unknown to the upstream of {name!r}")


def _served(cached: queries.CachedManifest, warning: str = "") -> StoredManifest:
    if cached.body is not None:  # a GET is a pull, recorded as for any repository; a HEAD is not
        pulls.record(cached.id, cached.pull_due)
    if warning:
        # RFC 7234's form, which the OCI spec's warnings use; quotes cannot appear inside.
        warning = '299 - "' + warning.replace('"', "'")[:1000] + '"'
    return StoredManifest(cached.digest, cached.media_type, cached.size, cached.body, warning)


def _revalidate(upstream: Upstream, mirror: Mirror, name: str, upstream_name: str, tag: str,
                cached: queries.CachedManifest, with_body: bool, now: datetime) -> StoredManifest:
    digest = upstream.head_manifest(upstream_name, tag)
    if digest is None:
        queries.delete_tag(cached.repository_id, tag)
        misses.remember(mirror, "manifest", upstream_name, tag)
        raise ManifestUnknown(f"tag {tag!r} is no longer in the upstream of {name!r}")
    if digest == cached.digest:
        queries.mark_tag_checked(cached.repository_id, tag, now)
        metrics.HITS.labels(mirror.prefix, "manifest").inc()
        return _served(cached)
    moved_to = queries.manifest_id(cached.repository_id, digest) if Digest.parse_or_none(digest) else None
    if moved_to is not None:  # back to a manifest cached before
        queries.point_cached_tag(cached.repository_id, tag, moved_to, now)
        metrics.HITS.labels(mirror.prefix, "manifest").inc()
        return _served(queries.cached_manifest(name, digest, False, with_body, now) or cached)
    # Fetched by digest when the upstream named one: the tag may move again meanwhile.
    reference = digest if Digest.parse_or_none(digest) else tag
    fetched = upstream.get_manifest(upstream_name, reference, settings.REGISTRY_MAX_MANIFEST_BYTES)
    if fetched is None:
        queries.delete_tag(cached.repository_id, tag)
        misses.remember(mirror, "manifest", upstream_name, tag)
        raise ManifestUnknown(f"tag {tag!r} is no longer in the upstream of {name!r}")
    metrics.MISSES.labels(mirror.prefix, "manifest").inc()
    stored = _cache(mirror, name, reference, fetched, with_body, now, tag)
    return stored


def _cache(mirror: Mirror, name: str, reference: str, fetched: FetchedManifest, with_body: bool,
           now: datetime, tag: str | None = None) -> StoredManifest:
    """Verify what the upstream sent and store it (tagged when asked by tag)."""
    by_digest = Digest.parse_or_none(reference) if is_digest_like(reference) else None
    digest = Digest.of(fetched.body, by_digest.algorithm if by_digest else "sha256")
    claimed = Digest.parse_or_none(fetched.digest) if fetched.digest else None
    if (by_digest is not None and digest != by_digest) or (
            claimed is not None and claimed.algorithm == digest.algorithm and claimed != digest):
        metrics.UPSTREAM_ERRORS.labels(mirror.prefix, "digest_mismatch").inc()
        log.error("pull-through cache %s: the upstream %s sent a manifest for %s that hashes to %s; "
                  "nothing was stored", mirror.prefix, mirror.upstream, reference, digest)
        raise UpstreamFailed(f"the upstream {mirror.upstream} sent a manifest that does not match its digest")
    try:
        parsed = manifest_format.parse(fetched.body, fetched.content_type, settings.REGISTRY_MAX_DESCRIPTORS)
    except ManifestInvalid as error:
        metrics.UPSTREAM_ERRORS.labels(mirror.prefix, "failed").inc()
        raise UpstreamFailed(f"the upstream {mirror.upstream} sent a manifest this registry does not store: "
                             f"{error.message}") from None
    tag = tag if tag is not None else (None if by_digest is not None else reference)
    _store(name, str(digest), fetched.body, parsed, tag, now, pulled=with_body)
    return StoredManifest(str(digest), parsed.media_type, len(fetched.body), fetched.body if with_body else None)


def _store(name: str, digest: str, body: bytes, parsed: manifest_format.ParsedManifest, tag: str | None,
           now: datetime, pulled: bool) -> None:
    """Insert the manifest and its references (unless a concurrent pull did) and point the tag.
    ``pulled``: a GET stores it, and that is its first pull (a HEAD is none).

    Unlike a push, nothing it references need be here: blobs and child manifests are fetched when
    pulled. Under the digest lock a collection takes too, as a push does.
    """
    repository = ensure_repository(name)
    for _attempt in range(3):
        try:
            with transaction.atomic():
                lock_digests([digest])
                manifest_id = queries.manifest_id(repository.id, digest)
                if manifest_id is None:
                    manifest_id = queries.insert_manifest(
                        repository.id, digest, body, media_type=parsed.media_type,
                        artifact_type=parsed.referrer_artifact_type,
                        subject_digest=parsed.subject.digest if parsed.subject else "",
                        annotations=parsed.annotations, blobs=[d.digest for d in parsed.blobs if not d.foreign],
                        children=[d.digest for d in parsed.children], pulled_at=now if pulled else None)
                if tag is not None:
                    queries.point_cached_tag(repository.id, tag, manifest_id, now)
            return
        except IntegrityError:
            continue  # a concurrent pull stored it first: use its row
    raise UpstreamFailed("the manifest could not be stored because of concurrent updates", 1)
