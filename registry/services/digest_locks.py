"""Per-digest locks that make metadata writers and the garbage collector take turns.

A manifest PUT checks that its blobs are linked and records its references; linking a blob checks
that its data is on disk; the collector re-checks that a blob is unreferenced before deleting its
row, and that no row came back before deleting its data. Each of those is one transaction that must
not interleave with the others on the same digest.

On SQLite every transaction already starts with BEGIN IMMEDIATE (see regsite.config), which takes
the database's single write lock, so writers are serialized and nothing more is needed. PostgreSQL
runs READ COMMITTED transactions side by side, so there each digest gets a transaction-scoped
advisory lock, released at commit or rollback.
"""
from __future__ import annotations

from typing import Iterable

from django.db import connection


def lock_digests(digests: Iterable[str]) -> None:
    """Hold the locks of ``digests`` until the current transaction ends."""
    if not connection.in_atomic_block:
        raise RuntimeError("lock_digests() must be called inside transaction.atomic()")
    if connection.vendor != "postgresql":
        return
    # One fixed order for every caller, so two transactions locking overlapping sets cannot deadlock.
    with connection.cursor() as cursor:
        for digest in sorted(set(digests)):
            cursor.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", [digest])
