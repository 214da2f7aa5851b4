"""The referrers API: manifests in a repository whose ``subject`` is a given digest."""
from __future__ import annotations

from typing import Any

from registry.media_types import OCI_INDEX
from registry.models import Manifest
from registry.services.common import check_name, parse_digest


def referrers(name: str, digest_text: str, artifact_type: str | None = None) -> dict[str, Any]:
    """An OCI image index of the referrers; empty (never an error) for an unknown digest or name."""
    check_name(name)
    digest = parse_digest(digest_text)
    query = Manifest.objects.filter(repository__name=name, subject_digest=str(digest))
    if artifact_type:
        query = query.filter(artifact_type=artifact_type)
    manifests = []
    rows = query.order_by("created_at", "id").values_list(
        "media_type", "digest", "size", "artifact_type", "annotations"
    )
    for media_type, ref_digest, size, kind, notes in rows:
        descriptor: dict[str, Any] = {"mediaType": media_type, "digest": ref_digest, "size": size}
        if kind:
            descriptor["artifactType"] = kind
        if notes:
            descriptor["annotations"] = notes
        manifests.append(descriptor)
    return {"schemaVersion": 2, "mediaType": OCI_INDEX, "manifests": manifests}
