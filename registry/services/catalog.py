"""The repository catalog: repositories holding at least one manifest, in byte order."""
from __future__ import annotations

from registry import queries
from registry.services.pagination import Page
from registry.visibility import EVERYTHING, Visible

DEFAULT_ENTRIES = 100
MAX_ENTRIES = 1000


def list_repositories(n: int, last: str | None, visible: Visible = EVERYTHING) -> Page:
    """The repositories with content that ``visible`` holds (those the caller may read)."""
    if n == 0:
        return Page([], False)
    rows = queries.catalog_names(last, n + 1, visible)
    return Page(rows[:n], len(rows) > n)
