"""A registry's worth of consistent content, loaded in bulk through registry.queries.bulk: the scale
benchmark (bench/scale.py) and the tests that pin query plans on big data use it.

The shape of issue 25 (tests/support/scale_content.py): with ``files`` the blob data is written
too, so ``manage.py scrub`` finds every blob whole. Every ``untagged_every``-th image of the big
repository is pushed by digest only (garbage for ``garbagecollect --delete-untagged``),
``orphans`` blobs are linked but referenced by nothing, and ``referrers`` signatures name the big
repository's first image.
"""
from __future__ import annotations

import json
import os
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, Callable

from django.db import transaction
from django.utils import timezone

from registry.digests import Digest
from registry.models import Blob, BlobLink, Manifest, ManifestReference, Repository, Tag
from registry.queries import bulk
from registry.storage import paths
from tests.support.scale_content import (
    BASE_DIGEST,
    BASE_LAYER,
    BIG,
    EMPTY,
    OCI_MANIFEST,
    SIGNATURE,
    Shape,
    big_tag,
    digest_of,
    image,
    images,
    orphan_blob,
    referrer,
)

CHUNK = 10_000  # images per transaction


class _Ids:
    def __init__(self) -> None:
        self.next = {model: bulk.next_id(model) for model in (Repository, Blob, Manifest)}

    def take(self, model: type[Any]) -> int:
        value = self.next[model]
        self.next[model] += 1
        return value


def load(shape: Shape, storage_root: Path | None = None, progress: Callable[[int], None] = lambda n: None) -> None:
    """Write the shape's rows (and, with ``shape.files``, its blob files under ``storage_root``)
    into an otherwise idle database, then refresh the planner's statistics."""
    ids = _Ids()
    now = timezone.now()
    first = now - shape.age - timedelta(seconds=shape.images)
    write = _BlobFiles(storage_root) if shape.files and storage_root is not None else None
    repositories: dict[str, int] = {}
    base_id = ids.take(Blob)
    with transaction.atomic():
        bulk.load(Blob, ["id", "digest", "size", "created_at"], [(base_id, BASE_DIGEST, len(BASE_LAYER), first)])
    if write:
        write(BASE_DIGEST, BASE_LAYER)
    done = 0
    source = images(shape)
    while chunk := [img for _, img in zip(range(CHUNK), source, strict=False)]:
        fresh = list(dict.fromkeys(img.repository for img in chunk if img.repository not in repositories))
        repositories.update((name, ids.take(Repository)) for name in fresh)
        rows = [(img, repositories[img.repository], ids.take(Manifest), ids.take(Blob),
                 first + timedelta(seconds=done + k)) for k, img in enumerate(chunk)]
        with transaction.atomic():
            bulk.load(Repository, ["id", "name", "created_at", "pushed_at"],
                      [(repositories[name], name, first, _last_push(shape, name, first)) for name in fresh])
            bulk.load(Blob, ["id", "digest", "size", "created_at"],
                      [(bid, img.config_digest, len(img.config), t) for img, _, _, bid, t in rows])
            bulk.load(BlobLink, ["repository_id", "blob_id", "created_at"],
                      [(repositories[name], base_id, first) for name in fresh]
                      + [(rid, bid, t) for _, rid, _, bid, t in rows])
            bulk.load(Manifest, ["id", "repository_id", "digest", "media_type", "size", "body", "artifact_type",
                                 "subject_digest", "annotations", "created_at"],
                      [(mid, rid, img.digest, OCI_MANIFEST, len(img.manifest), img.manifest, "", "", "{}", t)
                       for img, rid, mid, _, t in rows])
            bulk.load(ManifestReference, ["manifest_id", "digest", "kind"],
                      [ref for img, _, mid, _, _ in rows
                       for ref in ((mid, img.config_digest, "blob"), (mid, BASE_DIGEST, "blob"))])
            bulk.load(Tag, ["repository_id", "name", "manifest_id", "updated_at"],
                      [(rid, img.tag, mid, t) for img, rid, mid, _, t in rows if img.tag is not None])
        if write:
            for img in chunk:
                write(img.config_digest, img.config)
        done += len(chunk)
        progress(done)
    _load_orphans(shape, ids, repositories.get(BIG), first, write)
    _load_referrers(shape, ids, repositories.get(BIG), first, write)
    bulk.finish()


def _last_push(shape: Shape, name: str, first: datetime) -> datetime:
    """Repository.pushed_at as pushes keep it: when the repository's last image was pushed (the
    big repository's images come first, a second apart, then one per small repository)."""
    if name == BIG:
        return first + timedelta(seconds=shape.big_tags - 1)
    return first + timedelta(seconds=shape.big_tags + int(name.rsplit("r", 1)[1]))


def _load_orphans(shape: Shape, ids: _Ids, repository_id: int | None, at: datetime,
                  write: "_BlobFiles | None") -> None:
    if not shape.orphans or repository_id is None:
        return
    blobs = [(ids.take(Blob), orphan_blob(n)) for n in range(shape.orphans)]
    with transaction.atomic():
        bulk.load(Blob, ["id", "digest", "size", "created_at"], [(bid, digest_of(data), len(data), at)
                                                                 for bid, data in blobs])
        bulk.load(BlobLink, ["repository_id", "blob_id", "created_at"], [(repository_id, bid, at) for bid, _ in blobs])
    if write:
        for _, data in blobs:
            write(digest_of(data), data)


def _load_referrers(shape: Shape, ids: _Ids, repository_id: int | None, at: datetime,
                    write: "_BlobFiles | None") -> None:
    if not shape.referrers or repository_id is None:
        return
    subject = image(BIG, big_tag(0), 0).digest
    empty_id = ids.take(Blob)
    bodies = [referrer(n) for n in range(shape.referrers)]
    rows = [(ids.take(Manifest), body) for body in bodies]
    with transaction.atomic():
        bulk.load(Blob, ["id", "digest", "size", "created_at"], [(empty_id, digest_of(EMPTY), len(EMPTY), at)])
        bulk.load(BlobLink, ["repository_id", "blob_id", "created_at"], [(repository_id, empty_id, at)])
        bulk.load(Manifest, ["id", "repository_id", "digest", "media_type", "size", "body", "artifact_type",
                             "subject_digest", "annotations", "created_at"],
                  [(mid, repository_id, digest_of(body), OCI_MANIFEST, len(body), body, SIGNATURE, subject,
                    json.dumps({"scale.signature": str(n)}), at + timedelta(seconds=n))
                   for n, (mid, body) in enumerate(rows)])
        bulk.load(ManifestReference, ["manifest_id", "digest", "kind"],
                  [(mid, digest_of(EMPTY), "blob") for mid, _ in rows])
    if write:
        write(digest_of(EMPTY), EMPTY)


class _BlobFiles:
    """Blob data where the filesystem driver keeps it (registry.storage.paths), written plainly:
    a benchmark's data needs no fsync."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def __call__(self, digest: str, data: bytes) -> None:
        path = self.root / paths.blob_data(Digest.parse(digest))
        os.makedirs(path.parent, exist_ok=True)
        path.write_bytes(data)

