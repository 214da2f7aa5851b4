"""Tag listing in byte order with ``n``/``last`` pagination."""
from __future__ import annotations

from registry.models import Tag
from registry.services.common import byte_order, get_repository
from registry.services.pagination import Page

MAX_TAGS = 1000


def list_tags(name: str, n: int | None, last: str | None) -> Page:
    repository = get_repository(name)
    query = Tag.objects.filter(repository=repository).alias(key=byte_order("name"))
    if last:
        query = query.filter(key__gt=last)
    query = query.order_by("key").values_list("name", flat=True)
    if n is None:
        return Page(list(query), False)
    if n == 0:
        return Page([], False)
    rows = list(query[: n + 1])
    return Page(rows[:n], len(rows) > n)
