"""Helpers for storage lifecycle tests: push blobs and images through the services, age rows."""
from __future__ import annotations

import hashlib
import io
import json
import os
from datetime import timedelta

from django.utils import timezone

from registry.digests import Digest
from registry.models import Blob, BlobLink, Manifest, Tag, Upload
from registry.services import manifests, uploads
from registry.storage import default_driver, paths
from registry.storage.driver import PathNotFound

OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
OCI_INDEX = "application/vnd.oci.image.index.v1+json"
OCI_CONFIG = "application/vnd.oci.image.config.v1+json"
OCI_LAYER = "application/vnd.oci.image.layer.v1.tar"
MAX_MANIFEST = 4 * 1024 * 1024


def digest_of(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def push_blob(name: str, data: bytes) -> str:
    info = uploads.monolithic(name, digest_of(data), uploads.Body(io.BytesIO(data), len(data)))
    return info.digest


def image_manifest(config: bytes, layers: list[bytes], subject: str | None = None) -> bytes:
    doc: dict = {
        "schemaVersion": 2,
        "mediaType": OCI_MANIFEST,
        "config": {"mediaType": OCI_CONFIG, "digest": digest_of(config), "size": len(config)},
        "layers": [{"mediaType": OCI_LAYER, "digest": digest_of(d), "size": len(d)} for d in layers],
    }
    if subject:
        doc["subject"] = {"mediaType": OCI_MANIFEST, "digest": subject, "size": 1}
    return json.dumps(doc).encode()


def push_image(name: str, reference: str | None, layers: list[bytes], config: bytes | None = None,
               subject: str | None = None) -> str:
    """Push the blobs and a manifest (by tag, or by digest when ``reference`` is None)."""
    config = config if config is not None else json.dumps({"layers": [digest_of(d) for d in layers]}).encode()
    for data in [config, *layers]:
        push_blob(name, data)
    body = image_manifest(config, layers, subject)
    manifests.put(name, reference or digest_of(body), body, OCI_MANIFEST, MAX_MANIFEST)
    return digest_of(body)


def push_index(name: str, reference: str, children: list[str]) -> str:
    body = json.dumps({
        "schemaVersion": 2,
        "mediaType": OCI_INDEX,
        "manifests": [{"mediaType": OCI_MANIFEST, "digest": d, "size": 1} for d in children],
    }).encode()
    manifests.put(name, reference, body, OCI_INDEX, MAX_MANIFEST)
    return digest_of(body)


def age_everything(hours: float = 48) -> None:
    """Move every creation time back, as if all was pushed ``hours`` ago."""
    then = timezone.now() - timedelta(hours=hours)
    Blob.objects.update(created_at=then)
    BlobLink.objects.update(created_at=then)
    Manifest.objects.update(created_at=then)
    Tag.objects.update(updated_at=then)
    Upload.objects.update(created_at=then, updated_at=then)


def age_data(digest: str, hours: float = 48) -> None:
    """Move a blob data file's modification time back, as if written ``hours`` ago."""
    then = (timezone.now() - timedelta(hours=hours)).timestamp()
    os.utime(default_driver().root / paths.blob_data(Digest.parse(digest)), (then, then))


def has_data(digest: str) -> bool:
    try:
        default_driver().stat(paths.blob_data(Digest.parse(digest)))
    except PathNotFound:
        return False
    return True


def has_row(digest: str) -> bool:
    return Blob.objects.filter(digest=digest).exists()
