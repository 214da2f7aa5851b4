"""Integrity scrub: re-hash stored blobs and compare the data on disk with the metadata.

Three kinds of problem are found: a blob whose data no longer hashes to its digest (or has the wrong
size), a blob row whose data file is gone, and a data file without a row. Repairing removes what is
broken, so that a client pushing the image again uploads the blob afresh instead of every pull
getting corrupt bytes: manifests that reference a removed blob stay, and their pulls answer
BLOB_UNKNOWN for it until it is pushed again.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Callable

from django.db import transaction
from django.utils import timezone

from registry import queries
from registry.digests import Digest, new_hasher
from registry.policies import quotas
from registry.services import sweep
from registry.services.digest_locks import lock_digests
from registry.services.sweep import Report
from registry.storage import default_driver, paths
from registry.storage.driver import PathNotFound, StorageDriver, delete_if_exists

CHUNK_SIZE = 1024 * 1024
CORRUPT, MISSING, ORPHANED = "corrupt", "missing", "orphaned"


@dataclass(frozen=True)
class Problem:
    kind: str  # CORRUPT, MISSING or ORPHANED
    digest: str
    detail: str
    repaired: bool = False

    def __str__(self) -> str:
        text = f"{self.kind} blob {self.digest}: {self.detail}"
        return f"{text} (removed)" if self.repaired else text


@dataclass
class ScrubResult:
    blobs_checked: int = 0
    bytes_checked: int = 0
    problems: list[Problem] = field(default_factory=list)


def scrub(
    repair: bool = False,
    grace: timedelta = timedelta(hours=24),
    report: Report = sweep.silent,
) -> ScrubResult:
    """Check every blob; ``report`` gets one line per problem and progress lines.

    A data file without a row is only a problem once older than ``grace``: an upload renames its
    data into place a moment before it records the row.
    """
    drv = default_driver()
    result = ScrubResult()

    def found(problem: Problem) -> None:
        result.problems.append(problem)
        report(str(problem))

    _check_rows(drv, repair, result, found, report)
    _check_files(drv, repair, timezone.now() - grace, found)
    return result


def _check_rows(
    drv: StorageDriver, repair: bool, result: ScrubResult, found: Callable[[Problem], None], report: Report
) -> None:
    total = queries.blob_count()

    def checked(blobs: int) -> str:
        return f"{blobs} of {total} blobs checked ({result.bytes_checked} bytes)"

    progress = sweep.Progress(report, checked)
    for page in sweep.blob_pages():
        for blob in page:
            problem = _check_blob(drv, Digest.parse(blob.digest), blob.size)
            if problem is not None and queries.blob_exists(blob.digest):  # not collected meanwhile
                found(_repair(drv, problem) if repair else problem)
            result.blobs_checked += 1
            result.bytes_checked += blob.size
            progress.add()


def _check_blob(drv: StorageDriver, digest: Digest, size: int) -> Problem | None:
    path = paths.blob_data(digest)
    try:
        actual_size = drv.stat(path).size
    except PathNotFound:
        return Problem(MISSING, str(digest), "its data file is missing")
    if actual_size != size:
        return Problem(CORRUPT, str(digest), f"data is {actual_size} bytes, the blob is {size}")
    hasher = new_hasher(digest.algorithm)
    try:
        with drv.open(path) as stream:
            while chunk := stream.read(CHUNK_SIZE):
                hasher.update(chunk)
    except PathNotFound:
        return Problem(MISSING, str(digest), "its data file is missing")
    if hasher.hexdigest() != digest.hex:
        return Problem(CORRUPT, str(digest), f"data hashes to {digest.algorithm}:{hasher.hexdigest()}")
    return None


def _repair(drv: StorageDriver, problem: Problem) -> Problem:
    digest = Digest.parse(problem.digest)
    with transaction.atomic():
        lock_digests([problem.digest])
        if problem.kind == MISSING:
            try:
                drv.stat(paths.blob_data(digest))
                return problem  # pushed again meanwhile: nothing is missing any more
            except PathNotFound:
                pass
        else:
            # Corrupt data goes first, inside the transaction: a crash before the commit leaves a
            # row without data, which the next scrub removes, and no pull gets the bad bytes.
            delete_if_exists(drv, paths.blob_dir(digest))
        with quotas.releasing(lambda: queries.quota_links_of_digest(problem.digest)):
            queries.delete_blob(problem.digest)
    return Problem(problem.kind, problem.digest, problem.detail, repaired=True)


def _check_files(
    drv: StorageDriver, repair: bool, cutoff: datetime, found: Callable[[Problem], None]
) -> None:
    try:
        for orphans in sweep.files_without_rows(drv, cutoff):
            removed = sweep.delete_data_without_rows(drv, orphans) if repair else {}
            for digest, size in orphans:
                found(Problem(ORPHANED, digest, f"{size} bytes of data without a blob row", digest in removed))
    finally:
        sweep.finish_deletions()
