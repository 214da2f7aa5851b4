"""Figures the web UI shows that cost a scan to count: exact while that is cheap, otherwise as last
counted (registry.queries.tallies keeps them), counted again in the background once older than
FRESH, by one process at a time.

A page must not count a million tags to say how many there are: issue 25 measured the overview and
the repository list at 0.4 to 0.9 s with 100,000 repositories. Only the very first view of a big
registry (or of a big repository) counts while the page waits; every later one reads the last
count and says when it was made.
"""
from __future__ import annotations

import hashlib
import logging
import threading
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Callable

from django.db import connection
from django.utils import timezone

from registry import queries
from registry.visibility import Visible

FRESH = timedelta(minutes=5)
COUNTING = timedelta(minutes=10)  # how long a count may take before another process tries again
SMALL = 50_000  # rows of the biggest table below which the registry's totals are counted each time

log = logging.getLogger("ops.ui")


@dataclass(frozen=True)
class Figures:
    data: dict[str, Any]
    counted_at: datetime | None  # None: counted for this page


def figures(name: str, count: Callable[[], dict[str, Any]], cheap: bool) -> Figures:
    """``count()``'s figures: counted now when ``cheap``, else as last counted."""
    if cheap:
        return Figures(count(), None)
    found = queries.read_tally(name)
    now = timezone.now()
    if found is None or found[1] is None:
        data = count()  # never counted: this page waits, once
        if queries.claim_tally(name, now + COUNTING, now):
            queries.store_tally(name, data, now)
        return Figures(data, None)
    data, counted_at = found[0], found[1]
    if now - counted_at > FRESH:
        _recount_in_background(name, count)
    return Figures(data, counted_at)


def _recount_in_background(name: str, count: Callable[[], dict[str, Any]]) -> None:
    now = timezone.now()
    if not queries.claim_tally(name, now + COUNTING, now):
        return  # another process is counting it

    def recount() -> None:
        try:
            queries.store_tally(name, count(), timezone.now())
        except Exception:
            log.exception("counting %s failed", name)
            queries.release_tally(name)
        finally:
            connection.close()  # this thread's own connection

    threading.Thread(target=recount, name=f"tally {name}", daemon=True).start()


def visible_key(visible: Visible) -> str:
    """The tally of what a set of visible names holds: one per distinct set of access rules that
    decides it, not per viewer (the rules' regular expressions, hashed to fit a name)."""
    return "visible:" + hashlib.sha256(repr(visible.parts).encode()).hexdigest()


def registry_is_small() -> bool:
    return queries.biggest_table_rows() < SMALL
