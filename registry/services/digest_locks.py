"""Per-digest locks that make metadata writers and the garbage collector take turns.

A manifest PUT checks that its blobs are linked and records its references; linking a blob checks
that its data is on disk; the collector re-checks that a blob is unreferenced before deleting its
row, and that no row came back before deleting its data. Each of those is one transaction that must
not interleave with the others on the same digest. How the database holds such a lock is
registry.queries.lock_keys.
"""
from __future__ import annotations

from typing import Iterable

from django.db import connection

from registry import queries


def lock_digests(digests: Iterable[str]) -> None:
    """Hold the locks of ``digests`` until the current transaction ends."""
    if not connection.in_atomic_block:
        raise RuntimeError("lock_digests() must be called inside transaction.atomic()")
    # One fixed order for every caller, so two transactions locking overlapping sets cannot deadlock.
    queries.lock_keys(sorted(set(digests)))
