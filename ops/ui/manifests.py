"""What the pages show of a stored manifest body: layers, platforms, children (pure, no database).

The body is read by the registry's own manifest reader (``manifest_format.read_stored``), leniently:
a page must render whatever is stored, so a part the API would refuse is left out rather than
raised, and the page never shows a manifest differently from what the API accepted.
"""
from __future__ import annotations

import json
from dataclasses import dataclass

from django.conf import settings

from registry.media_types import IMAGE_CONFIG_TYPES
from registry.services.manifest_format import Descriptor, read_stored


@dataclass(frozen=True)
class Summary:
    media_type: str
    is_index: bool
    config: Descriptor | None
    layers: list[Descriptor]
    children: list[Descriptor]
    artifact_type: str
    subject: str  # its digest, or empty
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


def pretty(body: bytes) -> str:
    """The manifest's JSON, indented, up to ``[ui] manifest_json_bytes`` of it; the rest is a link
    to the raw manifest."""
    limit = settings.UI_MANIFEST_JSON_BYTES
    try:
        doc = json.loads(body)
    except (UnicodeDecodeError, ValueError, RecursionError):
        doc = None
    if not isinstance(doc, dict) or not doc:
        text = body[:limit].decode("utf-8", errors="replace")
    else:
        # Lone surrogates (stored before pushes refused them) are written out, not sent as
        # text that cannot be encoded.
        text = json.dumps(doc, indent=2, ensure_ascii=False).encode("utf-8", "backslashreplace").decode()
    if len(text) > limit:
        return text[:limit] + f"\n… ({len(body)} bytes in all: the manifest's own URL gives the rest)"
    return text


def summarize(body: bytes, media_type: str) -> Summary:
    manifest = read_stored(body, media_type)
    return Summary(
        media_type=manifest.media_type,
        is_index=manifest.is_index,
        config=manifest.config,
        layers=manifest.layers,
        children=manifest.children,
        artifact_type=manifest.artifact_type,
        subject=manifest.subject.digest if manifest.subject else "",
        annotations=manifest.annotations,
        pretty=pretty(body),
    )
