"""Parsing and validation of OCI and Docker schema2 manifests and indexes (pure, no database)."""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from registry.digests import Digest
from registry.media_types import (
    FOREIGN_LAYER_TYPES,
    INDEX_TYPES,
    OCI_INDEX,
    OCI_MANIFEST,
    SCHEMA1_TYPES,
    SUPPORTED_TYPES,
)
from registry.services.exceptions import ManifestInvalid


@dataclass(frozen=True)
class Descriptor:
    media_type: str
    digest: str
    size: int
    artifact_type: str = ""
    annotations: dict[str, str] = field(default_factory=dict)
    foreign: bool = False


@dataclass(frozen=True)
class ParsedManifest:
    media_type: str
    blobs: list[Descriptor]
    children: list[Descriptor]
    subject: Descriptor | None
    artifact_type: str
    annotations: dict[str, str]
    config_media_type: str = ""

    @property
    def is_index(self) -> bool:
        return self.media_type in INDEX_TYPES

    @property
    def referrer_artifact_type(self) -> str:
        """What the referrers API reports: artifactType, else the config media type of an image."""
        return self.artifact_type or self.config_media_type


def base_media_type(content_type: str | None) -> str:
    return (content_type or "").split(";", 1)[0].strip().lower()


# RFC 6838: a media type's type and subtype are at most 127 characters each.
MAX_MEDIA_TYPE = 255


def _storable(text: str) -> bool:
    """Text every supported database stores: JSON's "\\ud800" (a lone surrogate) is not UTF-8, and
    PostgreSQL refuses NUL characters."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return "\x00" not in text


def _type_name(value: Any, where: str, required: bool) -> str:
    if not isinstance(value, str) or (required and not value):
        raise ManifestInvalid(f"{where} must be a {'non-empty ' if required else ''}string")
    if len(value) > MAX_MEDIA_TYPE or not _storable(value):
        raise ManifestInvalid(f"{where} must be a media type of at most {MAX_MEDIA_TYPE} characters")
    return value


def _annotations(value: Any, where: str, stored: bool = False) -> dict[str, str]:
    """An annotations object; ``stored`` ones (the manifest's own) go into a database column."""
    if value is None:
        return {}
    if not isinstance(value, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    ):
        raise ManifestInvalid(f"{where}annotations must be an object of strings")
    if stored and not all(_storable(k) and _storable(v) for k, v in value.items()):
        raise ManifestInvalid(f"{where}annotations must be valid Unicode text without NUL characters")
    return value


def _descriptor(value: Any, where: str) -> Descriptor:
    if not isinstance(value, dict):
        raise ManifestInvalid(f"{where} must be a descriptor object")
    media_type = _type_name(value.get("mediaType"), f"{where}.mediaType", required=True)
    digest, size = value.get("digest"), value.get("size")
    if not isinstance(digest, str) or Digest.parse_or_none(digest) is None:
        raise ManifestInvalid(f"{where}.digest is not a valid digest", {"digest": str(digest)[:200]})
    if isinstance(size, bool) or not isinstance(size, int) or size < 0:
        raise ManifestInvalid(f"{where}.size must be a non-negative integer")
    artifact_type = _type_name(value.get("artifactType", ""), f"{where}.artifactType", required=False)
    urls = value.get("urls")
    if urls is not None and not (isinstance(urls, list) and all(isinstance(u, str) for u in urls)):
        raise ManifestInvalid(f"{where}.urls must be a list of strings")
    return Descriptor(
        media_type=media_type,
        digest=digest,
        size=size,
        artifact_type=artifact_type,
        annotations=_annotations(value.get("annotations"), f"{where}."),
        foreign=bool(urls) and media_type in FOREIGN_LAYER_TYPES,
    )


def _media_type(doc: dict[str, Any], content_type: str) -> str:
    declared = doc.get("mediaType")
    if declared is not None and not isinstance(declared, str):
        raise ManifestInvalid("mediaType must be a string")
    if content_type in SCHEMA1_TYPES or declared in SCHEMA1_TYPES or doc.get("schemaVersion") == 1:
        raise ManifestInvalid(
            "Docker schema1 manifests are not supported; push an OCI or Docker schema2 manifest"
        )
    if declared and content_type in SUPPORTED_TYPES and declared != content_type:
        raise ManifestInvalid(
            f"mediaType {declared!r} does not match Content-Type {content_type!r}"
        )
    media_type = declared or (content_type if content_type in SUPPORTED_TYPES else "")
    if not media_type:
        media_type = OCI_INDEX if "manifests" in doc else OCI_MANIFEST if "config" in doc else ""
    if media_type not in SUPPORTED_TYPES:
        raise ManifestInvalid(f"unsupported manifest media type {media_type[:200]!r}")
    return media_type


def parse(body: bytes, content_type: str | None) -> ParsedManifest:
    try:
        doc = json.loads(body)
    except (UnicodeDecodeError, ValueError) as exc:
        raise ManifestInvalid(f"manifest is not valid JSON: {exc}") from None
    except RecursionError:
        # A few MiB of "[[[[..." nest deeper than the decoder can recurse: refuse, never a 500.
        raise ManifestInvalid("manifest JSON is nested too deeply") from None
    if not isinstance(doc, dict):
        raise ManifestInvalid("manifest must be a JSON object")
    media_type = _media_type(doc, base_media_type(content_type))
    version = doc.get("schemaVersion")
    if isinstance(version, bool) or version != 2:
        raise ManifestInvalid("schemaVersion must be 2")
    artifact_type = _type_name(doc.get("artifactType", ""), "artifactType", required=False)
    subject = _descriptor(doc["subject"], "subject") if doc.get("subject") is not None else None
    annotations = _annotations(doc.get("annotations"), "", stored=True)

    if media_type in INDEX_TYPES:
        entries = doc.get("manifests")
        if not isinstance(entries, list):
            raise ManifestInvalid("manifests must be a list of descriptors")
        children = [_descriptor(d, f"manifests[{i}]") for i, d in enumerate(entries)]
        return ParsedManifest(media_type, [], children, subject, artifact_type, annotations)

    config = _descriptor(doc.get("config"), "config")
    layers = doc.get("layers")
    if not isinstance(layers, list):
        raise ManifestInvalid("layers must be a list of descriptors")
    descriptors = [config] + [_descriptor(d, f"layers[{i}]") for i, d in enumerate(layers)]
    return ParsedManifest(
        media_type, descriptors, [], subject, artifact_type, annotations, config.media_type
    )
