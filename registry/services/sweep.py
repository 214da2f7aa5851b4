"""What garbage collection and scrub share: paging over blob rows, and blob data that has no row.

Data without a Blob row is invisible to clients (nothing can link or pull it), and is left by a crash
between a collection's two transactions or by an upload that died between its rename and its row.
The collector deletes it; scrub reports it and, with ``--repair``, deletes it. Both find it the
same way: walk the blob data, keep the files older than a cutoff (an upload renames its data into
place a moment before it records the row), and ask the database which of their digests have no row,
one batch at a time. Both delete it the same way too: under the digests' locks, re-checking that no
row came back meanwhile.
"""
from __future__ import annotations

import threading
import time
import uuid
from contextlib import contextmanager
from datetime import datetime
from typing import Callable, Iterable, Iterator, TypeVar

from django.db import connection, transaction

from registry import queries
from registry.digests import HEX, Digest
from registry.services.digest_locks import lock_digests
from registry.storage import paths
from registry.storage.driver import PathNotFound, StorageDriver, delete_if_exists

BATCH = 200  # rows per write transaction
RANGE = 2000  # rows a collection examines per statement
# Blobs whose data goes per write transaction: their directories are renamed under the lock (on
# SQLite, the database's), a few ms each on a busy disk; 50 kept pulls waiting up to a second
# (bench scale).
DATA_BATCH = 10
# Data taken out of the tree waits in the trash for the writers' turn (see writing), up to this
# many entries.
DEFERRED_AT_MOST = 1000
WRITER_BUDGET = 0.1  # seconds of lock held between pauses, see writing
WRITER_PAUSE = 0.1  # seconds
PROGRESS_EVERY = 10_000

Report = Callable[[str], None]
T = TypeVar("T")


def silent(_line: str) -> None:
    return None


class Progress:
    """Reports ``progress: <line(count)>`` each time the count passes a multiple of PROGRESS_EVERY."""

    def __init__(self, report: Report, line: Callable[[int], str]) -> None:
        self.report, self.line, self.count = report, line, 0

    def add(self, step: int = 1) -> None:
        before, self.count = self.count, self.count + step
        if self.count // PROGRESS_EVERY > before // PROGRESS_EVERY:
            self.report(f"progress: {self.line(self.count)}")


def chunks(items: Iterable[T], size: int | None = None) -> Iterator[list[T]]:
    """``items`` in lists of ``size`` (default BATCH)."""
    size = size or BATCH
    chunk: list[T] = []
    for item in items:
        chunk.append(item)
        if len(chunk) >= size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


@contextmanager
def writing() -> Iterator[None]:
    """A write transaction of the collector or scrub; on SQLite, now and then after a pause.

    SQLite writers waiting for the lock poll it (every 100 ms once they have waited a while), so a
    collector that starts its next transaction as soon as one ends could keep a push waiting for
    its whole run. Once its transactions have held the lock for WRITER_BUDGET in all, it leaves
    the lock alone for WRITER_PAUSE and waiting writers get their turn. Its pauses then add up to
    about the time it held the lock, which grows with what it deletes, not with what it examines
    (a pause after every transaction made a collection of a million links sleep for minutes).

    The pause is taken before the next transaction, not after the last one, and what the collector
    did meanwhile without the lock (deleting the files it took out of the tree, its next reads)
    counts towards it: waiting writers get the same turn, and the collector no longer sleeps and
    then works, one after the other.

    The time held ends where the COMMIT starts. SQLite releases the lock once the commit's pages
    are in the write-ahead log; when the log has passed 1,000 pages, the commit then copies it
    into the database and syncs both before it returns (a checkpoint), without the lock. At
    100,000 images one commit in eighteen did, 29 ms each (2.2 s of a 14 s collection; 10,000
    took 0.1 s, bigger indexes dirtying more pages per deleted row). Counted as held, that grew
    the pauses by as much again; now it counts towards them, like the other work without the lock.
    """
    outermost = not connection.in_atomic_block
    pausing = outermost and connection.vendor == "sqlite"
    if pausing:
        _wait_turn()
    with transaction.atomic():
        started = time.monotonic()  # SQLite's BEGIN IMMEDIATE has taken the lock by now
        yield
        ended = time.monotonic()
    if pausing:
        _held(started, ended)


_turns = threading.local()


def _held(started: float, ended: float) -> None:
    _turns.held = getattr(_turns, "held", 0.0) + ended - started
    if _turns.held >= WRITER_BUDGET:
        _turns.held = 0.0
        _turns.released = ended  # writers' turn from the commit on, for WRITER_PAUSE


def _wait_turn() -> None:
    released: float | None = getattr(_turns, "released", None)
    if released is not None:
        _turns.released = None
        finish_deletions()  # work without the lock: done in the writers' turn, not after a sleep
        if (left := released + WRITER_PAUSE - time.monotonic()) > 0:
            time.sleep(left)


def _deferred() -> list[tuple[StorageDriver, str]]:
    pending: list[tuple[StorageDriver, str]] | None = getattr(_turns, "deferred", None)
    if pending is None:
        pending = _turns.deferred = []
    return pending


def finish_deletions() -> None:
    """Delete what ``delete_data_without_rows`` took out of the tree and left in the trash. A
    collection or scrub calls it before it ends; a crash before leaves the entries to the next
    collection's ``empty_trash``."""
    pending = _deferred()
    while pending:
        driver, path = pending.pop()
        delete_if_exists(driver, path)


@contextmanager
def locked(digests: Iterable[str]) -> Iterator[None]:
    """A write transaction (``writing``) holding the digests' locks."""
    with writing():
        lock_digests(digests)
        yield


def blob_pages() -> Iterator[list[queries.StoredBlob]]:
    """Every blob row, BATCH rows at a time in id order."""
    last = 0
    while page := queries.blob_page(last, BATCH):
        last = page[-1].id
        yield page


def files_without_rows(
    driver: StorageDriver, cutoff: datetime, walked: Callable[[int], None] = lambda _count: None
) -> Iterator[list[tuple[str, int]]]:
    """Blob data files older than ``cutoff`` whose digest has no row, as (digest, size) batches.

    The digests are read from the blob directories' names (``blobs/<alg>/<xx>/<hex>``), a prefix
    directory at a time, and only a digest without a row has its data looked at (its size and
    age): walking every blob's directory and data file read two inodes per blob from the disk once
    a big registry's tree was out of the page cache, most of a 100,000-image collection's time.
    The rows of a prefix directory are read in one range of the digest index, and only the names
    without a row are parsed (asking 200 digests at a time and parsing each name was 0.5 s and
    1.3 s of the walk's 2.8 at 100,000 images, profiled). ``walked`` gets the number of blob
    directories of each prefix directory.
    """
    limit = cutoff.timestamp()
    orphans: list[tuple[str, int]] = []
    for algorithm, prefix, names in _prefix_listings(driver):
        known = queries.digests_with_prefix(algorithm, prefix)
        walked(len(names))
        for name in names:
            text = f"{algorithm}:{name}"
            if text in known or (digest := paths.digest_from_blob_dir(algorithm, prefix, name)) is None:
                continue
            try:
                info = driver.stat(paths.blob_data(digest))
            except PathNotFound:
                continue  # a directory without data, or removed meanwhile
            if info.mtime < limit:
                orphans.append((text, info.size))
            if len(orphans) >= BATCH:
                yield orphans
                orphans = []
    if orphans:
        yield orphans


def _prefix_listings(driver: StorageDriver) -> Iterator[tuple[str, str, list[str]]]:
    """(algorithm, prefix, names in its directory) for each blob prefix directory."""
    for algorithm in _names(driver, paths.BLOBS):
        if algorithm not in HEX:
            continue  # a probe file, say
        for prefix in _names(driver, paths.blob_algorithm_dir(algorithm)):
            if paths.is_blob_prefix(prefix):
                yield algorithm, prefix, _names(driver, paths.blob_prefix_dir(algorithm, prefix))


def _names(driver: StorageDriver, path: str) -> list[str]:
    try:
        return driver.list(path)
    except PathNotFound:
        return []


def delete_data_without_rows(driver: StorageDriver, found: list[tuple[str, int]]) -> dict[str, int]:
    """Delete the data of those (digest, size) pairs whose digest has no Blob row; returns the bytes
    freed per digest: the size given (the row's, or the walk's stat of the file), 0 when the data
    was gone already.

    Checked under the digests' locks, so a row created meanwhile (a blob pushed again) keeps its
    data. Where the driver renames in one step, the data is only renamed into the trash under the
    locks and deleted after them: on SQLite the locks are the database's write lock, which pushes
    and pulls wait for, and the collector pauses for as long as it held it (``writing``), so the
    unlinking of each file counted twice and made everyone wait. For the same reason the sizes
    come from the caller, not from a stat of each file under the lock.

    The renamed data is deleted in the writers' next turn (the pause of ``writing``), which the
    collector otherwise slept through: the unlink and rmdir of a blob's data take about 0.5 ms,
    a quarter of a deleting collection's time at 100,000 images, and its pauses a fifth. Up to
    DEFERRED_AT_MOST entries wait; the caller deletes the rest with ``finish_deletions``.
    """
    freed: dict[str, int] = {}
    # Small transactions: pushes wait for the write lock meanwhile.
    for chunk in chunks(found, DATA_BATCH):
        held: list[str] = []
        digests = [digest for digest, _size in chunk]
        with locked(digests):
            alive = queries.known_digests(digests)
            for digest, size in chunk:
                if digest not in alive:
                    freed[digest] = size if _take_blob_data(driver, Digest.parse(digest), held) else 0
        pending = _deferred()
        pending.extend((driver, path) for path in held)
        if len(pending) >= DEFERRED_AT_MOST:
            finish_deletions()
    return freed


def _take_blob_data(driver: StorageDriver, digest: Digest, held: list[str]) -> bool:
    """Take a blob's data out of the tree if it is there (False if it was not): renamed into the
    trash where the driver can (its new path added to ``held``, for the caller to delete), else
    deleted."""
    trash = paths.trash(uuid.uuid4().hex)
    try:
        if driver.detach(paths.blob_dir(digest), trash):
            held.append(trash)
            return True
    except PathNotFound:
        return False
    return delete_if_exists(driver, paths.blob_dir(digest))


def empty_trash(driver: StorageDriver) -> int:
    """Delete what a crashed collection left in the trash (renamed, not yet deleted): the number
    of entries. Nothing in it is reachable: a concurrent collection deleting its own finds it
    gone, which it allows for."""
    emptied = 0
    for name in _names(driver, paths.TRASH):
        try:
            path = paths.trash(name)
        except ValueError:
            continue  # not one of ours
        emptied += delete_if_exists(driver, path)
    return emptied
