"""Helpers shared by the services: name and digest checks, repository lookup, byte-order sorting."""
from __future__ import annotations

from django.db import connection
from django.db.models import F
from django.db.models.expressions import Expression
from django.db.models.functions import Collate

from registry.digests import Digest, InvalidDigest
from registry.models import Repository
from registry.names import is_valid_name, is_valid_tag
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


def get_repository(name: str) -> Repository:
    check_name(name)
    try:
        return Repository.objects.get(name=name)
    except Repository.DoesNotExist:
        raise NameUnknown(f"repository {name!r} not known to registry") from None


def ensure_repository(name: str) -> Repository:
    check_name(name)
    repo, _ = Repository.objects.get_or_create(name=name)
    return repo


def byte_order(field: str) -> Expression:
    """The field compared byte by byte ("ASCIIbetical"), whatever the database's locale collation."""
    if connection.vendor == "postgresql":
        return Collate(F(field), "C")
    return F(field)  # SQLite compares text with BINARY collation already
