"""What the pages show of a stored manifest body: layers, platforms, children (pure, no database).

Bodies were validated when pushed, but the reading here is still defensive: a page must render
whatever is stored, so anything unexpected becomes "absent" rather than an exception.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from registry.media_types import IMAGE_CONFIG_TYPES, INDEX_TYPES

TITLE = "org.opencontainers.image.title"
# buildx stores provenance/SBOM attestations as index children with platform unknown/unknown.
ATTESTATION_KEY = "vnd.docker.reference.type"


@dataclass(frozen=True)
class Blob:
    media_type: str
    digest: str
    size: int
    annotations: dict[str, str] = field(default_factory=dict)

    @property
    def title(self) -> str:
        return self.annotations.get(TITLE, "")


@dataclass(frozen=True)
class Child:
    media_type: str
    digest: str
    size: int
    platform: str
    attestation: bool
    artifact_type: str = ""
    annotations: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Summary:
    media_type: str
    is_index: bool
    config: Blob | None
    layers: list[Blob]
    children: list[Child]
    artifact_type: str
    subject: str
    annotations: dict[str, str]
    pretty: str

    @property
    def content_size(self) -> int:
        """Config plus layers: what a pull of this image downloads (compressed)."""
        return (self.config.size if self.config else 0) + sum(layer.size for layer in self.layers)

    @property
    def platforms(self) -> list[str]:
        return [c.platform for c in self.children if c.platform and not c.attestation]

    @property
    def is_image(self) -> bool:
        return self.config is not None and self.config.media_type in IMAGE_CONFIG_TYPES


def _strings(value: Any) -> dict[str, str]:
    if not isinstance(value, dict):
        return {}
    return {str(k): str(v) for k, v in value.items()}


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _str(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _blob(value: Any) -> Blob | None:
    if not isinstance(value, dict) or not _str(value.get("digest")):
        return None
    return Blob(_str(value.get("mediaType")), value["digest"], _int(value.get("size")),
                _strings(value.get("annotations")))


def platform_of(value: Any) -> str:
    if not isinstance(value, dict):
        return ""
    parts = [_str(value.get("os")), _str(value.get("architecture")), _str(value.get("variant"))]
    return "/".join(p for p in parts if p)


def _child(value: Any) -> Child | None:
    blob = _blob(value)
    if blob is None:
        return None
    platform = platform_of(value.get("platform"))
    attestation = blob.annotations.get(ATTESTATION_KEY) == "attestation-manifest" or (
        platform == "unknown/unknown"
    )
    return Child(blob.media_type, blob.digest, blob.size, platform, attestation,
                 _str(value.get("artifactType")), blob.annotations)


def parse_json(body: bytes) -> dict[str, Any]:
    try:
        doc = json.loads(body)
    except (UnicodeDecodeError, ValueError):
        return {}
    return doc if isinstance(doc, dict) else {}


def pretty(body: bytes) -> str:
    doc = parse_json(body)
    if not doc:
        return body.decode("utf-8", errors="replace")
    return json.dumps(doc, indent=2, ensure_ascii=False)


def summarize(body: bytes, media_type: str) -> Summary:
    doc = parse_json(body)
    is_index = media_type in INDEX_TYPES
    layers = doc.get("layers") if isinstance(doc.get("layers"), list) else []
    children = doc.get("manifests") if isinstance(doc.get("manifests"), list) else []
    subject = doc.get("subject")
    return Summary(
        media_type=media_type,
        is_index=is_index,
        config=None if is_index else _blob(doc.get("config")),
        layers=[b for b in map(_blob, layers) if b is not None],
        children=[c for c in map(_child, children) if c is not None] if is_index else [],
        artifact_type=_str(doc.get("artifactType")),
        subject=_str(subject.get("digest")) if isinstance(subject, dict) else "",
        annotations=_strings(doc.get("annotations")),
        pretty=pretty(body),
    )
