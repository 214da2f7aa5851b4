"""An index nothing reads only costs its writes: Blob.created_at's went (migration 0011).

No statement reads blobs by creation time: the collector compares it in the rows of a range of
digests. Its index cost every push a write, and the collector, deleting blobs in digest order, a
page at random for each blob it removed (issue 25).
"""
from __future__ import annotations

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from registry.models import Blob
from tests.support.schema import indexes_on

BEFORE = [("registry", "0010_reference_digest_covering")]
AFTER = [("registry", "0011_blob_created_unindexed")]


def _migrate(to: list[tuple[str, str]]) -> None:
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(to)


@pytest.mark.django_db
def test_a_blob_has_no_index_of_its_creation_time() -> None:
    assert indexes_on(Blob, "created_at") == ()


@pytest.mark.django_db(transaction=True)  # the migration is not atomic (CONCURRENTLY on PostgreSQL)
def test_the_migration_drops_the_index_and_builds_it_again_backwards() -> None:
    try:
        _migrate(BEFORE)
        assert len(indexes_on(Blob, "created_at")) == 1
        Blob.objects.create(digest="sha256:" + "a" * 64, size=1)  # the old schema takes the model's rows
    finally:
        _migrate(AFTER)
    assert indexes_on(Blob, "created_at") == ()
    assert Blob.objects.filter(size=1).count() == 1
