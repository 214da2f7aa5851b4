"""A registry's worth of consistent content, loaded in bulk through registry.queries.bulk: the scale
benchmark (bench/scale.py) and the tests that pin query plans on big data use it.

The shape of issue 25: one big repository with ``big_tags`` tagged images beside ``small``
single-image repositories, every image sharing one base layer and having a config of its own. Each
image is a real OCI image (a valid tar layer, a config naming its diff id), so a client can pull it;
with ``files`` the blob data is written too, so ``manage.py scrub`` finds every blob whole. Every
``untagged_every``-th image of the big repository is pushed by digest only (garbage for
``garbagecollect --delete-untagged``), and ``orphans`` blobs are linked but referenced by nothing.
"""
from __future__ import annotations

import hashlib
import io
import json
import os
import tarfile
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import cached_property
from pathlib import Path
from typing import Any, Callable, Iterator

from django.db import transaction
from django.utils import timezone

from registry.digests import Digest
from registry.models import Blob, BlobLink, Manifest, ManifestReference, Repository, Tag
from registry.queries import bulk
from registry.storage import paths

OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
OCI_CONFIG = "application/vnd.oci.image.config.v1+json"
OCI_LAYER = "application/vnd.oci.image.layer.v1.tar"
BIG = "scale/big"
CHUNK = 10_000  # images per transaction


def _digest(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def _base_layer() -> bytes:
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        payload = b"the base layer every image of the scale benchmark shares\n" * 16
        info = tarfile.TarInfo("etc/base.txt")
        info.size, info.mtime = len(payload), 0
        tar.addfile(info, io.BytesIO(payload))
    return raw.getvalue()


BASE_LAYER = _base_layer()
BASE_DIGEST = _digest(BASE_LAYER)


@dataclass(frozen=True)
class Shape:
    big_tags: int
    small: int
    untagged_every: int = 0  # 0: every image of the big repository is tagged
    orphans: int = 0
    files: bool = True
    age: timedelta = timedelta(days=3)  # older than the collector's grace period

    @classmethod
    def of_size(cls, size: int, **options: Any) -> "Shape":
        """Issue 25's sizes: ``size`` single-image repositories and up to 100,000 tags in the big one."""
        return cls(big_tags=min(size, 100_000), small=size, **options)

    @property
    def images(self) -> int:
        return self.big_tags + self.small


@dataclass(frozen=True)
class Image:
    repository: str
    tag: str | None  # None: pushed by digest
    config: bytes
    manifest: bytes

    @cached_property
    def config_digest(self) -> str:
        return _digest(self.config)

    @cached_property
    def digest(self) -> str:
        return _digest(self.manifest)


def image(repository: str, tag: str | None, number: int) -> Image:
    config = json.dumps({
        "architecture": "amd64", "os": "linux", "created": "2026-01-01T00:00:00Z",
        "config": {"Labels": {"scale.image": f"{repository}:{tag or number}"}},
        "rootfs": {"type": "layers", "diff_ids": [BASE_DIGEST]},
    }, separators=(",", ":")).encode()
    manifest = json.dumps({
        "schemaVersion": 2, "mediaType": OCI_MANIFEST,
        "config": {"mediaType": OCI_CONFIG, "digest": _digest(config), "size": len(config)},
        "layers": [{"mediaType": OCI_LAYER, "digest": BASE_DIGEST, "size": len(BASE_LAYER)}],
    }, separators=(",", ":")).encode()
    return Image(repository, tag, config, manifest)


def big_tag(number: int) -> str:
    return f"t{number:07d}"


def small_repository(number: int) -> str:
    return f"small/r{number:07d}"


def images(shape: Shape) -> Iterator[Image]:
    """Every image of the shape, the big repository's first."""
    for n in range(shape.big_tags):
        untagged = shape.untagged_every and n % shape.untagged_every == shape.untagged_every - 1
        yield image(BIG, None if untagged else big_tag(n), n)
    for n in range(shape.small):
        yield image(small_repository(n), "latest", n)


def orphan_blob(number: int) -> bytes:
    return f"a blob no manifest references, #{number}\n".encode()


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
        bulk.load(Blob, ["id", "digest", "size", "created_at"], [(bid, _digest(data), len(data), at)
                                                                 for bid, data in blobs])
        bulk.load(BlobLink, ["repository_id", "blob_id", "created_at"], [(repository_id, bid, at) for bid, _ in blobs])
    if write:
        for _, data in blobs:
            write(_digest(data), data)


class _BlobFiles:
    """Blob data where the filesystem driver keeps it (registry.storage.paths), written plainly:
    a benchmark's data needs no fsync."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def __call__(self, digest: str, data: bytes) -> None:
        path = self.root / paths.blob_data(Digest.parse(digest))
        os.makedirs(path.parent, exist_ok=True)
        path.write_bytes(data)

