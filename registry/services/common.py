"""Helpers shared by the services: name and digest checks, repository lookup, byte-order sorting."""
from __future__ import annotations

from functools import lru_cache
from typing import Any

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


@lru_cache(maxsize=1)
def _repository_lookup() -> tuple[str, Expression, list[Any]]:
    """The lookup by name, built once: nearly every request looks its repository up, and compiling
    the ORM query cost more than running it. Also the converters the ORM applies to created_at."""
    sql = f"SELECT id, created_at FROM {connection.ops.quote_name(Repository._meta.db_table)} WHERE name = %s"
    field = Repository._meta.get_field("created_at")
    column = field.get_col(Repository._meta.db_table)
    return sql, column, connection.ops.get_db_converters(column) + field.get_db_converters(connection)


def _find_repository(name: str) -> Repository | None:
    sql, column, converters = _repository_lookup()
    with connection.cursor() as cursor:
        cursor.execute(sql, [name])
        row = cursor.fetchone()
    if row is None:
        return None
    created_at = row[1]
    for convert in converters:
        created_at = convert(created_at, column, connection)
    return Repository.from_db(connection.alias, ["id", "name", "created_at"], [row[0], name, created_at])


def get_repository(name: str) -> Repository:
    check_name(name)
    repo = _find_repository(name)
    if repo is None:
        raise NameUnknown(f"repository {name!r} not known to registry")
    return repo


def ensure_repository(name: str) -> Repository:
    check_name(name)
    repo = _find_repository(name)
    if repo is None:
        repo, _ = Repository.objects.get_or_create(name=name)
    return repo


def byte_order(field: str) -> Expression:
    """The field compared byte by byte ("ASCIIbetical"), whatever the database's locale collation."""
    if connection.vendor == "postgresql":
        return Collate(F(field), "C")
    return F(field)  # SQLite compares text with BINARY collation already
