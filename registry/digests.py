"""Content digests (``<algorithm>:<hex>``) for the algorithms the registry verifies."""
from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from typing import Callable

HASHERS: dict[str, Callable[[], "hashlib._Hash"]] = {
    "sha256": hashlib.sha256,
    "sha512": hashlib.sha512,
}
# The digest grammar of the OCI image specification (descriptor.md); the API documentation
# publishes this same pattern.
DIGEST_PATTERN = r"^[a-z0-9]+(?:[.+_-][a-z0-9]+)*:[a-zA-Z0-9=_-]+$"
_DIGEST = re.compile(DIGEST_PATTERN)
# The encoded part of each algorithm this registry verifies: lowercase hex of the hash's length.
HEX = {"sha256": re.compile(r"[0-9a-f]{64}"), "sha512": re.compile(r"[0-9a-f]{128}")}


class InvalidDigest(ValueError):
    """The text is not a digest this registry can verify."""


@dataclass(frozen=True, slots=True)
class Digest:
    algorithm: str
    hex: str

    def __str__(self) -> str:
        return f"{self.algorithm}:{self.hex}"

    @classmethod
    def parse(cls, text: str) -> "Digest":
        if not _DIGEST.fullmatch(text):
            raise InvalidDigest(f"invalid digest {text[:200]!r}")
        algorithm, _, hex_part = text.partition(":")
        if algorithm not in HASHERS:
            raise InvalidDigest(f"unsupported digest algorithm {algorithm[:32]!r}")
        if not HEX[algorithm].fullmatch(hex_part):
            raise InvalidDigest(f"invalid {algorithm} digest {text[:200]!r}")
        return cls(algorithm, hex_part)

    @classmethod
    def parse_or_none(cls, text: str) -> "Digest | None":
        try:
            return cls.parse(text)
        except InvalidDigest:
            return None

    @classmethod
    def of(cls, data: bytes, algorithm: str = "sha256") -> "Digest":
        hasher = HASHERS[algorithm]()
        hasher.update(data)
        return cls(algorithm, hasher.hexdigest())


def is_digest_like(reference: str) -> bool:
    """True when a manifest reference is meant as a digest (it has a colon) rather than a tag."""
    return ":" in reference


def new_hasher(algorithm: str) -> "hashlib._Hash":
    if algorithm not in HASHERS:
        raise InvalidDigest(f"unsupported digest algorithm {algorithm[:32]!r}")
    return HASHERS[algorithm]()
