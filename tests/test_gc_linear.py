"""Garbage collection is linear in what it examines: ten times the images cost at most ten times
the database's work (issue 25 measured 63 times the time from 10,000 to 100,000 images on SQLite).

Work is counted, not timed, so that small data on a busy machine decides it: SQLite's virtual
machine instructions (its progress handler), PostgreSQL's rows read in this transaction
(pg_stat_xact_all_tables). The shape is issue 25's (tests/support/scale_content.py): N tags in one
repository beside N single-image repositories, every image sharing one base layer (the digest whose
references the old collector counted again for every page of links), every tenth image of the big
repository untagged, N/100 blobs nothing references. The times at 10,000 and 100,000 images, and
the pulls' p99 meanwhile, are bench figures (bench/RESULTS.md, tests/e2e/test_gc_scale.py).
"""
from __future__ import annotations

from datetime import timedelta
from typing import Callable

import pytest
from django.db import connection

from registry.models import Blob, BlobLink, Manifest, ManifestReference, Repository, Tag
from registry.services import gc
from tests.support import scale
from tests.support import scale_content as content

pytestmark = pytest.mark.django_db
SMALL = 400
STEPS = 1000  # SQLite instructions per progress call


def _rows_read() -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT coalesce(sum(coalesce(seq_tup_read, 0) + coalesce(idx_tup_fetch, 0)), 0) "
                       "FROM pg_stat_xact_all_tables WHERE schemaname NOT IN ('pg_catalog', 'information_schema')")
        return int(cursor.fetchone()[0])


def _work(run: Callable[[], object]) -> int:
    """The database's work while ``run`` runs, in its own unit (see the module's docstring)."""
    if connection.vendor == "postgresql":
        before = _rows_read()
        run()
        return _rows_read() - before
    connection.ensure_connection()
    calls = [0]

    def count() -> int:
        calls[0] += 1
        return 0

    connection.connection.set_progress_handler(count, STEPS)
    try:
        run()
    finally:
        connection.connection.set_progress_handler(None, STEPS)
    return calls[0] * STEPS


def _collection_work(size: int) -> int:
    scale.load(content.Shape(big_tags=size, small=size, untagged_every=10, orphans=size // 100, files=False))
    found: list[gc.Result] = []
    work = _work(lambda: found.append(gc.collect(gc.Options(grace=timedelta(hours=1), delete_untagged=True))))
    assert (found[0].manifests, found[0].blobs) == (size // 10, size // 10 + size // 100)
    with connection.cursor() as cursor:
        for model in (Tag, ManifestReference, Manifest, BlobLink, Blob, Repository):
            cursor.execute(f"DELETE FROM {model._meta.db_table}")
    return work


def test_ten_times_the_images_cost_at_most_ten_times_the_work() -> None:
    small, large = _collection_work(SMALL), _collection_work(10 * SMALL)
    print(f"collection work at {2 * SMALL} images: {small:,}, at {20 * SMALL:,}: {large:,} "
          f"({large / small:.1f} times; {connection.vendor})")
    assert large <= 10 * small, (small, large)
