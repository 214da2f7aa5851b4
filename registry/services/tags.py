"""Tag listing in byte order with ``n``/``last`` pagination."""
from __future__ import annotations

from registry import queries, visibility
from registry.services.common import check_name, get_repository
from registry.services.pagination import Page

MAX_TAGS = 1000


def list_tags(name: str, n: int | None, last: str | None) -> Page:
    check_name(name)
    if n == 0:
        get_repository(name)
        return Page([], False)
    rows = [] if visibility.hidden(name) else queries.tag_names(name, last, None if n is None else n + 1)
    if not rows:
        get_repository(name)  # an unknown repository is an error, an empty one is not
    if n is None:
        return Page(rows, False)
    return Page(rows[:n], len(rows) > n)
