"""The scale shape written as the CNCF registry's filesystem storage (distribution 2.8,
registry/storage/paths.go), so that docker-registry serves the same images as ours:

    docker/registry/v2/blobs/sha256/<first two hex>/<hex>/data        configs, the layer, manifests
    docker/registry/v2/repositories/<name>/_layers/sha256/<hex>/link   the blobs linked in a repository
    docker/registry/v2/repositories/<name>/_manifests/revisions/sha256/<hex>/link
    docker/registry/v2/repositories/<name>/_manifests/tags/<tag>/current/link

A link holds the digest it points at. A tag's index (tags/<tag>/index/...) is left out: only
deleting a tag reads it, and it costs four more inodes per image.
"""
from __future__ import annotations

import os
from pathlib import Path

from tests.support.scale_content import BASE_DIGEST, BASE_LAYER, Shape, images


def _write(path: str, data: bytes) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as out:
        out.write(data)


def _hex(digest: str) -> str:
    return digest.split(":", 1)[1]


def write(root: Path, shape: Shape) -> int:
    """Write the shape under ``root`` (the filesystem driver's rootdirectory); the images written."""
    v2 = str(root / "docker" / "registry" / "v2")

    def blob(digest: str, data: bytes) -> None:
        hexdigest = _hex(digest)
        _write(f"{v2}/blobs/sha256/{hexdigest[:2]}/{hexdigest}/data", data)

    def link(repository: str, kind: str, digest: str) -> None:
        _write(f"{v2}/repositories/{repository}/{kind}/sha256/{_hex(digest)}/link", digest.encode())

    blob(BASE_DIGEST, BASE_LAYER)
    linked: set[str] = set()
    count = 0
    for img in images(shape):
        blob(img.config_digest, img.config)
        blob(img.digest, img.manifest)
        if img.repository not in linked:  # the shared layer, once per repository
            link(img.repository, "_layers", BASE_DIGEST)
            linked.add(img.repository)
        link(img.repository, "_layers", img.config_digest)
        link(img.repository, "_manifests/revisions", img.digest)
        if img.tag is not None:
            _write(f"{v2}/repositories/{img.repository}/_manifests/tags/{img.tag}/current/link", img.digest.encode())
        count += 1
    return count
