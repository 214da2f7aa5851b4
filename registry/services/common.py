"""Helpers shared by the services: name, tag and digest checks, and the repository lookup."""
from __future__ import annotations

from registry import queries, visibility
from registry.digests import Digest, InvalidDigest
from registry.names import is_valid_name, is_valid_tag
from registry.queries import RepositoryRow
from registry.services.exceptions import DigestInvalid, NameInvalid, NameUnknown, TagInvalid


def check_name(name: str) -> None:
    if not is_valid_name(name):
        raise NameInvalid(f"invalid repository name {name[:300]!r}")


def check_tag(tag: str) -> None:
    if not is_valid_tag(tag):
        raise TagInvalid(f"invalid tag {tag[:200]!r}")


def parse_digest(text: str) -> Digest:
    try:
        return Digest.parse(text)
    except InvalidDigest as exc:
        raise DigestInvalid(str(exc)) from None


def get_repository(name: str) -> RepositoryRow:
    check_name(name)
    repository = None if visibility.hidden(name) else queries.find_repository(name)
    if repository is None:
        raise NameUnknown(f"repository {name!r} not known to registry")
    return repository


def ensure_repository(name: str) -> RepositoryRow:
    check_name(name)
    return queries.find_repository(name) or queries.create_repository(name)
