"""Tag listing in byte order with ``n``/``last`` pagination."""
from __future__ import annotations

from functools import lru_cache

from django.db import connection

from registry.models import Repository, Tag
from registry.services.common import check_name, get_repository
from registry.services.pagination import Page

MAX_TAGS = 1000


@lru_cache(maxsize=4)
def _tags_sql(after: bool, limited: bool) -> str:
    """Built once: compiling it with the ORM, plus a separate repository lookup, was most of a list."""
    q = connection.ops.quote_name
    tag, repo = q(Tag._meta.db_table), q(Repository._meta.db_table)
    # Byte order ("ASCIIbetical"): SQLite compares text with BINARY collation already.
    key = 't.name COLLATE "C"' if connection.vendor == "postgresql" else "t.name"
    return (f"SELECT t.name FROM {tag} t JOIN {repo} r ON r.id = t.repository_id WHERE r.name = %s"
            + (f" AND {key} > %s" if after else "") + f" ORDER BY {key}" + (" LIMIT %s" if limited else ""))


def list_tags(name: str, n: int | None, last: str | None) -> Page:
    check_name(name)
    if n == 0:
        get_repository(name)
        return Page([], False)
    params: list[object] = [name] + ([last] if last else []) + ([n + 1] if n is not None else [])
    with connection.cursor() as cursor:
        cursor.execute(_tags_sql(bool(last), n is not None), params)
        rows = [row[0] for row in cursor.fetchall()]
    if not rows:
        get_repository(name)  # an unknown repository is an error, an empty one is not
    if n is None:
        return Page(rows, False)
    return Page(rows[:n], len(rows) > n)
