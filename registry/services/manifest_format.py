"""Reading OCI and Docker schema2 manifests and indexes (pure, no database): one reader, two uses.

``parse`` is the strict use, for a push: anything malformed raises ManifestInvalid. ``read_stored``
is the lenient use, for the pages: it reads a stored body with the same rules, but leaves out the
parts ``parse`` would refuse instead of raising, so a page never fails on a body and never shows a
manifest differently from what the API accepted. For any body ``parse`` accepts, both give the same
ParsedManifest.
"""
from __future__ import annotations

import functools
import json
from dataclasses import dataclass, field
from typing import Any, Callable, TypeVar

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
from regsite import text

T = TypeVar("T")
TITLE = "org.opencontainers.image.title"
# buildx stores provenance/SBOM attestations as index children with platform unknown/unknown.
ATTESTATION_KEY = "vnd.docker.reference.type"


@dataclass(frozen=True)
class Descriptor:
    media_type: str
    digest: str
    size: int
    artifact_type: str = ""
    annotations: dict[str, str] = field(default_factory=dict)
    foreign: bool = False
    platform: str = ""  # os/architecture[/variant] of an index entry; informational, never refused

    @property
    def title(self) -> str:
        return self.annotations.get(TITLE, "")

    @property
    def attestation(self) -> bool:
        """An index entry holding build attestations rather than an image for a platform."""
        marked = self.annotations.get(ATTESTATION_KEY) == "attestation-manifest"
        return marked or self.platform == "unknown/unknown"


@dataclass(frozen=True)
class ParsedManifest:
    media_type: str
    config: Descriptor | None  # of an image
    layers: list[Descriptor]  # of an image
    children: list[Descriptor]  # of an index
    subject: Descriptor | None
    artifact_type: str
    annotations: dict[str, str]

    @property
    def is_index(self) -> bool:
        return self.media_type in INDEX_TYPES

    @property
    def blobs(self) -> list[Descriptor]:
        """The blobs an image references: its config, then its layers."""
        return ([self.config] if self.config else []) + self.layers

    @property
    def config_media_type(self) -> str:
        return self.config.media_type if self.config else ""

    @property
    def referrer_artifact_type(self) -> str:
        """What the referrers API reports: artifactType, else the config media type of an image."""
        return self.artifact_type or self.config_media_type


def base_media_type(content_type: str | None) -> str:
    return (content_type or "").split(";", 1)[0].strip().lower()


# RFC 6838: a media type's type and subtype are at most 127 characters each.
MAX_MEDIA_TYPE = 255


def _type_name(value: Any, where: str, required: bool) -> str:
    if not isinstance(value, str) or (required and not value):
        raise ManifestInvalid(f"{where} must be a {'non-empty ' if required else ''}string")
    if len(value) > MAX_MEDIA_TYPE or text.problem(value):
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
    if stored and any(text.problem(k) or text.problem(v) for k, v in value.items()):
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
        platform=_platform(value.get("platform")),
    )


def _platform(value: Any) -> str:
    if not isinstance(value, dict):
        return ""
    parts = [value.get("os"), value.get("architecture"), value.get("variant")]
    return "/".join(part for part in parts if isinstance(part, str) and part)


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


# Descriptors a manifest may list (config and layers, or an index's manifests) unless configured
# otherwise: the spec sets no limit, and images of more than a few hundred layers are unheard of
# (docker's own limit is 127), while one listing a blob 37,000 times cost 37,000 rows.
MAX_DESCRIPTORS = 1000


def parse(body: bytes, content_type: str | None, max_descriptors: int = MAX_DESCRIPTORS) -> ParsedManifest:
    """A pushed manifest, read strictly: ManifestInvalid for anything malformed."""
    try:
        doc = json.loads(body)
    except (UnicodeDecodeError, ValueError) as exc:
        raise ManifestInvalid(f"manifest is not valid JSON: {exc}") from None
    except RecursionError:
        # A few MiB of "[[[[..." nest deeper than the decoder can recurse: refuse, never a 500.
        raise ManifestInvalid("manifest JSON is nested too deeply") from None
    if not isinstance(doc, dict):
        raise ManifestInvalid("manifest must be a JSON object")
    bad_text = text.find_in(doc, nul=False)  # a NUL is refused only where a column keeps it
    if bad_text:
        # Stored as pushed, it would break every page that shows it.
        raise ManifestInvalid(f"{bad_text[0]} {bad_text[1]}")
    media_type = _media_type(doc, base_media_type(content_type))
    version = doc.get("schemaVersion")
    if isinstance(version, bool) or version != 2:
        raise ManifestInvalid("schemaVersion must be 2")
    listed = doc.get("manifests") if media_type in INDEX_TYPES else doc.get("layers")
    if isinstance(listed, list) and len(listed) + (media_type not in INDEX_TYPES) > max_descriptors:
        raise ManifestInvalid(f"a manifest may list at most {max_descriptors} descriptors; this one lists "
                              f"{len(listed)} ([registry] max_descriptors)")
    return _read(doc, media_type, strict=True)


def read_stored(body: bytes, media_type: str) -> ParsedManifest:
    """A stored manifest of ``media_type``, read leniently: never raises, leaves out what is malformed."""
    try:
        doc = text.printable_json(json.loads(body))  # what was stored before pushes refused it
    except (UnicodeDecodeError, ValueError, RecursionError):
        doc = {}
    return _read(doc if isinstance(doc, dict) else {}, media_type, strict=False)


def _read(doc: dict[str, Any], media_type: str, strict: bool) -> ParsedManifest:
    def part(read: Callable[[], T], absent: T) -> T:
        """``read()``; when lenient, ``absent`` instead of what it would refuse."""
        try:
            return read()
        except ManifestInvalid:
            if strict:
                raise
            return absent

    def descriptors(value: Any, where: str) -> list[Descriptor]:
        entries: list[Any] = part(lambda: _list(value, where), [])
        read = [part(functools.partial(_descriptor, entry, f"{where}[{i}]"), None) for i, entry in enumerate(entries)]
        return [d for d in read if d is not None]

    artifact_type = part(lambda: _type_name(doc.get("artifactType", ""), "artifactType", required=False), "")
    subject = part(lambda: _subject(doc.get("subject")), None)
    annotations: dict[str, str] = part(lambda: _annotations(doc.get("annotations"), "", stored=True), {})
    if media_type in INDEX_TYPES:
        children = descriptors(doc.get("manifests"), "manifests")
        return ParsedManifest(media_type, None, [], children, subject, artifact_type, annotations)
    config = part(lambda: _descriptor(doc.get("config"), "config"), None)
    layers = descriptors(doc.get("layers"), "layers")
    return ParsedManifest(media_type, config, layers, [], subject, artifact_type, annotations)


def _list(value: Any, where: str) -> list[Any]:
    if not isinstance(value, list):
        raise ManifestInvalid(f"{where} must be a list of descriptors")
    return value


def _subject(value: Any) -> Descriptor | None:
    return None if value is None else _descriptor(value, "subject")
