"""The content of the scale shape (issue 25), without Django: what tests/support/scale.py loads into
a registry and bench/scale.py writes as the CNCF registry's filesystem tree, image by image.

One big repository with ``big_tags`` tagged images beside ``small`` single-image repositories,
every image sharing one base layer and having a config of its own; each a real OCI image (a valid
tar layer, a config naming its diff id), so a client can pull it.
"""
from __future__ import annotations

import hashlib
import io
import json
import tarfile
from dataclasses import dataclass
from datetime import timedelta
from functools import cached_property
from typing import Any, Iterator

OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
OCI_CONFIG = "application/vnd.oci.image.config.v1+json"
OCI_LAYER = "application/vnd.oci.image.layer.v1.tar"
BIG = "scale/big"


def digest_of(data: bytes) -> str:
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
BASE_DIGEST = digest_of(BASE_LAYER)


@dataclass(frozen=True)
class Shape:
    big_tags: int
    small: int
    untagged_every: int = 0  # 0: every image of the big repository is tagged
    orphans: int = 0
    referrers: int = 0  # signatures of the big repository's first image (the referrers API)
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
        return digest_of(self.config)

    @cached_property
    def digest(self) -> str:
        return digest_of(self.manifest)


def image(repository: str, tag: str | None, number: int) -> Image:
    config = json.dumps({
        "architecture": "amd64", "os": "linux", "created": "2026-01-01T00:00:00Z",
        "config": {"Labels": {"scale.image": f"{repository}:{tag or number}"}},
        "rootfs": {"type": "layers", "diff_ids": [BASE_DIGEST]},
    }, separators=(",", ":")).encode()
    manifest = json.dumps({
        "schemaVersion": 2, "mediaType": OCI_MANIFEST,
        "config": {"mediaType": OCI_CONFIG, "digest": digest_of(config), "size": len(config)},
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


SIGNATURE = "application/vnd.example.signature.v1+json"
EMPTY = b"{}"


def referrer(number: int) -> bytes:
    """The ``number``-th signature of the big repository's first image."""
    subject = image(BIG, big_tag(0), 0)
    return json.dumps({
        "schemaVersion": 2, "mediaType": OCI_MANIFEST, "artifactType": SIGNATURE,
        "config": {"mediaType": "application/vnd.oci.empty.v1+json", "digest": digest_of(EMPTY), "size": 2},
        "layers": [{"mediaType": "application/vnd.oci.empty.v1+json", "digest": digest_of(EMPTY), "size": 2}],
        "subject": {"mediaType": OCI_MANIFEST, "digest": subject.digest, "size": len(subject.manifest)},
        "annotations": {"scale.signature": str(number)},
    }, separators=(",", ":")).encode()
