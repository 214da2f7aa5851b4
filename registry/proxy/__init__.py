"""Pull-through caches of other registries, configured by [[proxy]] tables (docs/pull-through-cache.md).

Each mirrors one upstream under a read-only prefix. The views call in through ``mirrored`` and the
three functions below; cached content is then ordinary content for everything else (catalog, UI,
metrics, garbage collection, scrub).
"""
from __future__ import annotations

from registry.proxy.blobs import pull as pull_blob
from registry.proxy.blobs import stat as stat_blob
from registry.proxy.manifests import get as get_manifest
from registry.proxy.mirrors import mirrored

__all__ = ["get_manifest", "mirrored", "pull_blob", "stat_blob"]
