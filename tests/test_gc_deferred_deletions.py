"""Blob data a collection or scrub takes out of the tree waits in the trash and is deleted in the
writers' next turn (sweep.writing's pause), where the collector used to sleep; at most
DEFERRED_AT_MOST entries wait, and a collection or scrub leaves none behind, even when it fails."""
from __future__ import annotations

import threading
from datetime import timedelta
from typing import Iterator

import pytest
from django.db import connection

from registry.digests import Digest
from registry.services import gc, scrub, sweep
from registry.storage import default_driver, paths
from registry.storage.driver import PathNotFound, StorageDriver
from tests.support.lifecycle import age_data, age_everything, digest_of, has_data, push_blob

pytestmark = pytest.mark.django_db(transaction=True)  # writing pauses after outermost transactions only


@pytest.fixture(autouse=True)
def own_turns(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sweep, "_turns", threading.local())


def data_without_rows(driver: StorageDriver, count: int) -> list[tuple[str, int]]:
    found = []
    for n in range(count):
        data = f"data without a row, {n}".encode()
        driver.write(paths.blob_data(Digest.parse(digest_of(data))), data)
        found.append((digest_of(data), len(data)))
    return found


def waiting(driver: StorageDriver) -> int:
    try:
        return len(driver.list(paths.TRASH))
    except PathNotFound:
        return 0


def test_taken_data_is_deleted_in_the_writers_next_turn(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sweep, "WRITER_BUDGET", 0.0)  # every transaction ends with the writers' turn
    monkeypatch.setattr(sweep, "WRITER_PAUSE", 0.0)
    monkeypatch.setattr(sweep, "DATA_BATCH", 10)
    driver = default_driver()
    found = data_without_rows(driver, 25)  # three transactions of 10

    assert sweep.delete_data_without_rows(driver, found) == dict(found)

    assert not any(has_data(digest) for digest, _size in found)  # out of the tree at once
    # SQLite: the first two transactions' data went in the turns before the next two. PostgreSQL's
    # writers wait on row locks, nothing pauses, and all of it waits for finish_deletions.
    assert waiting(driver) == (5 if connection.vendor == "sqlite" else 25)
    sweep.finish_deletions()
    assert waiting(driver) == 0


def test_no_more_than_deferred_at_most_entries_wait(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sweep, "WRITER_BUDGET", 3600.0)  # no writers' turn comes
    monkeypatch.setattr(sweep, "DEFERRED_AT_MOST", 20)
    monkeypatch.setattr(sweep, "DATA_BATCH", 10)
    driver = default_driver()

    sweep.delete_data_without_rows(driver, data_without_rows(driver, 25))

    assert waiting(driver) == 5  # 20 after the second transaction: deleted then; the third's 5 wait
    sweep.finish_deletions()


def test_a_collection_leaves_nothing_in_the_trash_even_when_it_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sweep, "WRITER_BUDGET", 3600.0)  # no writers' turn comes: everything waits
    driver = default_driver()
    pushed = [push_blob("team/app", f"never referenced {n}".encode()) for n in range(15)]
    orphans = data_without_rows(driver, 5)
    age_everything()
    for digest, _size in orphans:
        age_data(digest)
    at_the_sweep: list[int] = []
    sweep_orphans = gc._Run.orphaned_files
    walk = sweep.files_without_rows

    def counted(run: gc._Run) -> None:
        at_the_sweep.append(waiting(driver))
        sweep_orphans(run)

    def failing(*args: object, **kwargs: object) -> Iterator[list[tuple[str, int]]]:
        yield from walk(*args, **kwargs)  # type: ignore[arg-type]
        raise OSError("the storage went away")

    monkeypatch.setattr(gc._Run, "orphaned_files", counted)
    monkeypatch.setattr(sweep, "files_without_rows", failing)
    with pytest.raises(OSError, match="went away"):
        gc.collect(gc.Options())
    assert at_the_sweep == [0]  # the blobs' data went before the sweep that empties what crashes left
    assert not any(has_data(digest) for digest in pushed + [digest for digest, _size in orphans])
    assert waiting(driver) == 0  # the orphans' data too, although the sweep failed after taking it


def test_a_repairing_scrub_leaves_nothing_in_the_trash() -> None:
    driver = default_driver()
    found = data_without_rows(driver, 12)
    for digest, _size in found:
        age_data(digest)

    result = scrub.scrub(repair=True, grace=timedelta(hours=1))

    assert len(result.problems) == 12 and all(problem.repaired for problem in result.problems)
    assert not any(has_data(digest) for digest, _size in found)
    assert waiting(driver) == 0
