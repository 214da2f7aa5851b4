"""The repository catalog: repositories holding at least one manifest, in byte order."""
from __future__ import annotations

from django.db.models import Exists, OuterRef

from registry.models import Manifest, Repository
from registry.services.common import byte_order
from registry.services.pagination import Page

DEFAULT_ENTRIES = 100
MAX_ENTRIES = 1000


def list_repositories(n: int, last: str | None) -> Page:
    if n == 0:
        return Page([], False)
    query = Repository.objects.filter(Exists(Manifest.objects.filter(repository=OuterRef("pk"))))
    query = query.alias(key=byte_order("name"))
    if last:
        query = query.filter(key__gt=last)
    rows = list(query.order_by("key").values_list("name", flat=True)[: n + 1])
    return Page(rows[:n], len(rows) > n)
