"""Pull-through caches of other registries, configured by [[proxy]] tables (docs/pull-through-cache.md).

Each mirrors one upstream under a read-only prefix. The views call in through ``mirrored`` and the
three functions below; cached content is then ordinary content for everything else (catalog, UI,
metrics, garbage collection, scrub).

The functions import the caches' code when a pull first goes through one: it brings the upstream
client (urllib3, about 4 MiB), which a worker of a registry without [[proxy]] never needs.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, BinaryIO

from registry.proxy.mirrors import mirrored

if TYPE_CHECKING:
    from registry.services.blobs import BlobInfo
    from registry.services.manifests import StoredManifest

__all__ = ["get_manifest", "mirrored", "pull_blob", "stat_blob"]


def get_manifest(name: str, reference: str, with_body: bool = True) -> StoredManifest:
    from registry.proxy import manifests

    return manifests.get(name, reference, with_body)


def stat_blob(name: str, digest_text: str) -> BlobInfo:
    from registry.proxy import blobs

    return blobs.stat(name, digest_text)


def pull_blob(name: str, digest_text: str, ranged: bool = False) -> tuple[BinaryIO, BlobInfo] | None:
    from registry.proxy import blobs

    return blobs.pull(name, digest_text, ranged)
