"""Garbage collection is linear in what it examines: ten times the images cost at most ten times
the work (issue 25 measured 63 times the time from 10,000 to 100,000 images on SQLite, and its
deleting run 500 times from 1,000 to 100,000).

Work is counted, not timed, so that small data on a busy machine decides it, and the run deletes
(its untagged manifests, their links and blobs, as ``garbagecollect --delete-untagged`` does):
- the database's work in its own unit: SQLite's virtual machine instructions (its progress
  handler), PostgreSQL's rows read in this transaction (pg_stat_xact_all_tables);
- the statements sent, each a round trip (a lock taken per digest was most of a PostgreSQL run);
- the storage driver's calls (a blob's data goes with one stat and one delete, none per page).
The shape is issue 25's (tests/support/scale_content.py): N tags in one repository beside N
single-image repositories, every image sharing one base layer (the digest whose references the old
collector counted again for every page of links), every tenth image of the big repository
untagged, N/100 blobs nothing references. The times at 10,000 and 100,000 images, and the pulls'
p99 meanwhile, are bench figures (bench/RESULTS.md, tests/e2e/test_gc_scale.py).
"""
from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any, Callable, Iterator, NamedTuple

import pytest
from django.db import connection
from django.utils import timezone

from registry.digests import Digest
from registry.models import Blob, BlobLink, Manifest, ManifestReference, Repository, Tag
from registry.services import gc, sweep
from registry.storage import default_driver, paths
from registry.storage.driver import FileInfo, StorageDriver
from registry.storage.filesystem import FilesystemDriver
from tests.support import scale
from tests.support import scale_content as content

pytestmark = pytest.mark.django_db
SMALL = 400
STEPS = 100  # SQLite instructions per progress call: a statement counts only its whole hundreds


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


class Counted(NamedTuple):
    work: int
    statements: int
    driver_calls: int


class _CountingDriver:
    """The storage driver, counting the calls made to it."""

    def __init__(self, driver: StorageDriver) -> None:
        self.driver, self.calls, self.files = driver, 0, 0  # files: whose size and age were read

    def __getattr__(self, name: str) -> Any:
        found = getattr(self.driver, name)
        if not callable(found):
            return found

        def counted(*args: Any, **kwargs: Any) -> Any:
            self.calls += 1
            self.files += name == "stat"
            return found(*args, **kwargs)
        return counted

    def walk(self, path: str) -> Iterator[FileInfo]:
        self.calls += 1
        for info in self.driver.walk(path):
            self.files += 1
            yield info


def _empty_tables() -> None:
    """The registry's tables emptied; on PostgreSQL truncated, so that what earlier tests in this
    database wrote and rolled back (dead rows the planner counts as pages) cannot change the plans
    the small run gets: with it, the small run read 12,394 to 12,757 rows, on fresh tables 14,635."""
    models = (Tag, ManifestReference, Manifest, BlobLink, Blob, Repository)
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")  # the checks still pending from the run before
            cursor.execute(f"TRUNCATE {', '.join(model._meta.db_table for model in models)} CASCADE")
            cursor.execute("SET CONSTRAINTS ALL DEFERRED")
            return
        for model in models:
            cursor.execute(f"DELETE FROM {model._meta.db_table}")


def _collection_work(size: int, monkeypatch: pytest.MonkeyPatch) -> Counted:
    _empty_tables()
    scale.load(content.Shape(big_tags=size, small=size, untagged_every=10, orphans=size // 100, files=False))
    driver = _CountingDriver(default_driver())
    monkeypatch.setattr(gc, "default_driver", lambda: driver)
    statements = [0]

    def count(execute: Callable[..., Any], sql: str, params: Any, many: bool, context: Any) -> Any:
        statements[0] += 1
        return execute(sql, params, many, context)

    found: list[gc.Result] = []
    with connection.execute_wrapper(count):
        work = _work(lambda: found.append(gc.collect(gc.Options(grace=timedelta(hours=1), delete_untagged=True))))
    assert (found[0].manifests, found[0].blobs) == (size // 10, size // 10 + size // 100)
    assert Manifest.objects.count() == 2 * size - size // 10  # deleted, not only found
    return Counted(work, statements[0], driver.calls)


def test_ten_times_the_images_cost_at_most_ten_times_the_work(monkeypatch: pytest.MonkeyPatch) -> None:
    small, large = _collection_work(SMALL, monkeypatch), _collection_work(10 * SMALL, monkeypatch)
    for measure in Counted._fields:
        few, many = getattr(small, measure), getattr(large, measure)
        print(f"{measure} at {2 * SMALL} images: {few:,}, at {20 * SMALL:,}: {many:,} "
              f"({many / few:.1f} times; {connection.vendor})")
    assert [large[k] <= 10 * small[k] for k in range(3)] == [True] * 3, (small, large)


def test_blob_data_is_looked_at_only_for_digests_without_rows(tmp_path: Path) -> None:
    """The orphaned-file sweep reads the digests from the blob directories' names and looks at a
    file (its size and age) only when its digest has no row: walking every blob's directory and
    data file read two inodes per blob from the disk once a big registry's tree was out of the page
    cache, most of a 100,000-image collection's time."""
    driver = _CountingDriver(FilesystemDriver(tmp_path))
    digests = [Digest.parse(content.digest_of(f"blob {n}".encode())) for n in range(30)]
    for digest in digests:
        driver.driver.write(paths.blob_data(digest), b"x")
    Blob.objects.bulk_create(Blob(digest=str(digest), size=1) for digest in digests[3:])
    found = [orphan for batch in sweep.files_without_rows(driver, timezone.now() + timedelta(hours=1))
             for orphan in batch]
    assert sorted(found) == sorted((str(digest), 1) for digest in digests[:3])
    assert driver.files == 3, driver.files


def test_a_repository_whose_untagged_manifests_fit_a_page_is_collected_in_one_transaction() -> None:
    """``--delete-untagged`` over many small repositories: one write transaction each, not a second
    one to find the next page empty (two commits, and on SQLite a writer's pause, per repository)."""
    repositories = 20
    scale.load(content.Shape(big_tags=0, small=repositories, files=False))
    Tag.objects.all().delete()
    transactions = [0]

    def count(execute: Callable[..., Any], sql: str, params: Any, many: bool, context: Any) -> Any:
        transactions[0] += sql.startswith("SAVEPOINT")
        return execute(sql, params, many, context)

    with connection.execute_wrapper(count):
        found = gc.collect(gc.Options(grace=timedelta(hours=1), delete_untagged=True))
    assert found.manifests == repositories
    assert transactions[0] <= repositories + 10, transactions[0]  # + the links' and blobs' batches
