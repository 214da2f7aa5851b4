"""Online garbage collection: unreferenced blobs, untagged manifests, expired uploads.

The registry keeps serving while this runs, because every fact that decides what is garbage is in
the database and every deletion re-checks it under the digest locks that writers take too
(``services.digest_locks``):

1. Upload sessions idle for longer than ``upload_expiry_hours`` go, with their partial data.
2. With ``delete_untagged``, manifests that no tag reaches, directly, through an index or as a
   referrer of a reached manifest, go (per repository, re-marked inside the deleting transaction).
3. Blob links that no manifest of their repository references go.
4. Blob rows that no manifest of any repository references go, in one transaction; only after it
   commits is their data deleted, in a second transaction that skips any digest whose row came back
   meanwhile. A crash between the two leaves data without a row: invisible to clients (nothing can
   link or pull it without a row) and removed by the next run as an orphaned file.
5. Blob files without a row (such crashes, or uploads that died between their rename and their row)
   go.

Nothing younger than the grace period is touched: not a blob created or (re)linked into a repository
within it, not a manifest pushed within it, not a file written within it. A push uploads its blobs
before its manifest, so the grace period keeps an in-flight push's layers. A manifest PUT that races
the deletion of a blob it references either commits first (the blob is then referenced and kept) or
finds the blob gone and fails with MANIFEST_BLOB_UNKNOWN.
"""
from __future__ import annotations

import time
from collections import Counter, defaultdict
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Callable, Iterable, Iterator, TypeVar

from django.db import connection, transaction
from django.db.models import Count, Exists, OuterRef
from django.utils import timezone

from registry.digests import Digest
from registry.models import Blob, BlobLink, Manifest, ManifestReference, Repository, Tag
from registry.services import uploads
from registry.services.digest_locks import lock_digests
from registry.storage import default_driver, paths
from registry.storage.driver import PathNotFound, StorageDriver, delete_if_exists

BATCH = 200
DATA_BATCH = 50
WRITER_PAUSE = 0.1  # seconds, see _locked
PROGRESS_EVERY = 10_000

Report = Callable[[str], None]
T = TypeVar("T")


@dataclass(frozen=True)
class Options:
    grace: timedelta = timedelta(hours=24)
    delete_untagged: bool = False
    dry_run: bool = False
    upload_expiry: timedelta | None = None  # None: [registry] upload_expiry_hours


@dataclass
class Result:
    uploads: int = 0
    manifests: int = 0
    blob_links: int = 0
    blobs: int = 0
    orphaned_files: int = 0
    bytes_freed: int = 0

    def summary(self, dry_run: bool) -> str:
        verb = "would remove" if dry_run else "removed"
        freed = "would free" if dry_run else "freed"
        return (
            f"{verb} {self.uploads} upload sessions, {self.manifests} manifests, "
            f"{self.blob_links} blob links, {self.blobs} blobs, {self.orphaned_files} orphaned files; "
            f"{freed} {self.bytes_freed} bytes"
        )


def _silent(_line: str) -> None:
    return None


@contextmanager
def _locked(digests: Iterable[str]) -> Iterator[None]:
    """A write transaction holding the digests' locks; on SQLite, followed by a pause.

    SQLite writers waiting for the lock poll it (every 100 ms once they have waited a while), so a
    collector that starts its next transaction as soon as one ends could keep a push waiting for
    its whole run. The pause, as long as the transaction held the lock and at least
    ``WRITER_PAUSE``, lets waiting writers in: pushes take their turns, the collection takes longer.
    """
    outermost = not connection.in_atomic_block
    with transaction.atomic():
        started = time.monotonic()  # SQLite's BEGIN IMMEDIATE has taken the lock by now
        lock_digests(digests)
        yield
    if outermost and connection.vendor == "sqlite":
        time.sleep(max(time.monotonic() - started, WRITER_PAUSE))


def _chunks(items: Iterable[T], size: int = BATCH) -> Iterator[list[T]]:
    chunk: list[T] = []
    for item in items:
        chunk.append(item)
        if len(chunk) >= size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def collect(options: Options, driver: StorageDriver | None = None, report: Report = _silent) -> Result:
    """Run one collection; ``report`` receives one line per thing removed and progress lines."""
    run = _Run(options, driver or default_driver(), report)
    run.result.uploads = uploads.purge_expired(options.upload_expiry, run.driver, dry_run=options.dry_run)
    if options.delete_untagged:
        run.manifests()
    run.links()
    run.blobs()
    run.orphaned_files()
    return run.result


class _Run:
    def __init__(self, options: Options, driver: StorageDriver, report: Report) -> None:
        self.options, self.driver, self.report = options, driver, report
        self.cutoff: datetime = timezone.now() - options.grace
        self.verb = "would remove" if options.dry_run else "removed"
        self.result = Result()
        # A dry run deletes no manifest, so it discounts the blob references of those it would.
        self.doomed_refs: Counter[tuple[int, str]] = Counter()
        self.doomed_refs_anywhere: Counter[str] = Counter()

    # -- manifests ---------------------------------------------------------------------------

    def manifests(self) -> None:
        for repository_id, name in Repository.objects.order_by("name").values_list("id", "name"):
            doomed = unreachable_manifests(repository_id, self.cutoff)
            if not doomed:
                continue
            if self.options.dry_run:
                self._discount_references(repository_id, list(doomed))
            else:
                doomed = self._delete_manifests(repository_id, doomed)
            for digest in sorted(doomed.values()):
                self.report(f"{self.verb} manifest {name}@{digest}")
            self.result.manifests += len(doomed)

    def _delete_manifests(self, repository_id: int, candidates: dict[int, str]) -> dict[int, str]:
        with _locked(candidates.values()):
            still = unreachable_manifests(repository_id, self.cutoff)
            doomed = {mid: digest for mid, digest in candidates.items() if still.get(mid) == digest}
            for chunk in _chunks(doomed):
                Manifest.objects.filter(id__in=chunk).only("id").delete()  # never load the bodies
        return doomed

    def _discount_references(self, repository_id: int, manifest_ids: list[int]) -> None:
        for chunk in _chunks(manifest_ids):
            refs = ManifestReference.objects.filter(manifest_id__in=chunk, kind=ManifestReference.BLOB)
            for digest in refs.values_list("digest", flat=True):
                self.doomed_refs[(repository_id, digest)] += 1
                self.doomed_refs_anywhere[digest] += 1

    # -- blob links ----------------------------------------------------------------------------

    def links(self) -> None:
        last = 0
        while True:
            page = list(
                BlobLink.objects.filter(id__gt=last, created_at__lt=self.cutoff)
                .order_by("id")
                .values_list("id", "repository_id", "repository__name", "blob__digest")[:BATCH]
            )
            if not page:
                return
            last = page[-1][0]
            in_use = self._referenced_in_repositories({(row[1], row[3]) for row in page})
            unused = [row for row in page if (row[1], row[3]) not in in_use]
            if unused and not self.options.dry_run:
                unused = self._delete_links(unused)
            for _id, _repo, name, digest in unused:
                self.report(f"{self.verb} blob link {name}@{digest}")
            self.result.blob_links += len(unused)

    def _referenced_in_repositories(self, pairs: set[tuple[int, str]]) -> set[tuple[int, str]]:
        counts = (
            ManifestReference.objects.filter(
                kind=ManifestReference.BLOB,
                digest__in={digest for _repo, digest in pairs},
                manifest__repository_id__in={repo for repo, _digest in pairs},
            )
            .values("manifest__repository_id", "digest")
            .annotate(n=Count("id"))
            .values_list("manifest__repository_id", "digest", "n")
        )
        return {(repo, digest) for repo, digest, n in counts if n > self.doomed_refs[(repo, digest)]}

    def _delete_links(self, rows: list[tuple[int, int, str, str]]) -> list[tuple[int, int, str, str]]:
        with _locked(row[3] for row in rows):
            referenced = ManifestReference.objects.filter(
                kind=ManifestReference.BLOB,
                digest=OuterRef("blob__digest"),
                manifest__repository_id=OuterRef("repository_id"),
            )
            still = set(
                BlobLink.objects.filter(id__in=[row[0] for row in rows], created_at__lt=self.cutoff)
                .exclude(Exists(referenced))
                .values_list("id", flat=True)
            )
            BlobLink.objects.filter(id__in=still).delete()
        return [row for row in rows if row[0] in still]

    # -- blobs ---------------------------------------------------------------------------------

    def blobs(self) -> None:
        total, checked, last = Blob.objects.count(), 0, 0
        while True:
            rows = Blob.objects.filter(id__gt=last).order_by("id")
            page = list(rows.values_list("id", "digest", "size", "created_at")[:BATCH])
            if not page:
                return
            last = page[-1][0]
            self._collect_blobs([row for row in page if row[3] < self.cutoff])
            checked = self._progress(checked, len(page), f"of {total} blobs checked")

    def _collect_blobs(self, rows: list[tuple[int, str, int, datetime]]) -> None:
        if not rows:
            return
        referenced = self._referenced_anywhere({row[1] for row in rows})
        fresh = set(
            BlobLink.objects.filter(blob_id__in=[row[0] for row in rows], created_at__gte=self.cutoff)
            .values_list("blob_id", flat=True)
        )
        unused = [
            (blob_id, digest, size)
            for blob_id, digest, size, _created in rows
            if digest not in referenced and blob_id not in fresh
        ]
        if not unused:
            return
        if self.options.dry_run:
            for _id, digest, size in unused:
                self._removed_blob(digest, size)
            return
        gone = self._delete_blob_rows(unused)
        freed = delete_data_without_rows(self.driver, [digest for digest, _size in gone])
        for digest, _size in gone:
            self._removed_blob(digest, freed.get(digest, 0))

    def _removed_blob(self, digest: str, size: int) -> None:
        self.report(f"{self.verb} blob {digest} ({size} bytes)")
        self.result.blobs += 1
        self.result.bytes_freed += size

    def _referenced_anywhere(self, digests: set[str]) -> set[str]:
        counts = (
            ManifestReference.objects.filter(kind=ManifestReference.BLOB, digest__in=digests)
            .values("digest")
            .annotate(n=Count("id"))
            .values_list("digest", "n")
        )
        return {digest for digest, n in counts if n > self.doomed_refs_anywhere[digest]}

    def _delete_blob_rows(self, rows: list[tuple[int, str, int]]) -> list[tuple[str, int]]:
        """Delete the rows that are still unreferenced and old, re-checked under the digest locks."""
        with _locked(digest for _id, digest, _size in rows):
            referenced = ManifestReference.objects.filter(
                kind=ManifestReference.BLOB, digest=OuterRef("digest")
            )
            fresh = BlobLink.objects.filter(blob=OuterRef("pk"), created_at__gte=self.cutoff)
            still = list(
                Blob.objects.filter(id__in=[row[0] for row in rows], created_at__lt=self.cutoff)
                .exclude(Exists(referenced))
                .exclude(Exists(fresh))
                .values_list("id", "digest", "size")
            )
            ids = [row[0] for row in still]
            BlobLink.objects.filter(blob_id__in=ids).delete()
            Blob.objects.filter(id__in=ids).delete()
        return [(digest, size) for _id, digest, size in still]

    # -- orphaned files ------------------------------------------------------------------------

    def orphaned_files(self) -> None:
        old_enough, walked = [], 0
        for info in self.driver.walk(paths.BLOBS):
            walked = self._progress(walked, 1, "blob files checked")
            digest = paths.digest_from_blob_path(info.path)
            if digest is not None and info.mtime < self.cutoff.timestamp():
                old_enough.append((str(digest), info.size))
            if len(old_enough) >= BATCH:
                self._collect_orphans(old_enough)
                old_enough = []
        self._collect_orphans(old_enough)

    def _collect_orphans(self, files: list[tuple[str, int]]) -> None:
        if not files:
            return
        known = _known_digests([digest for digest, _size in files])
        orphans = [(digest, size) for digest, size in files if digest not in known]
        if not orphans:
            return
        if self.options.dry_run:
            freed = dict(orphans)
        else:
            freed = delete_data_without_rows(self.driver, [digest for digest, _size in orphans])
        for digest, size in freed.items():
            self.report(f"{self.verb} orphaned file of {digest} ({size} bytes)")
            self.result.orphaned_files += 1
            self.result.bytes_freed += size

    def _progress(self, done: int, step: int, what: str) -> int:
        after = done + step
        if after // PROGRESS_EVERY > done // PROGRESS_EVERY:
            self.report(f"progress: {after} {what}")
        return after


def delete_data_without_rows(driver: StorageDriver, digests: list[str]) -> dict[str, int]:
    """Delete the data of those digests that have no Blob row; returns the bytes freed per digest.

    Runs under the digests' locks, so a row created meanwhile (a blob pushed again) keeps its data.
    """
    freed: dict[str, int] = {}
    # Small transactions: pushes wait for the write lock while files are deleted under it.
    for chunk in _chunks(digests, DATA_BATCH):
        with _locked(chunk):
            alive = set(Blob.objects.filter(digest__in=chunk).values_list("digest", flat=True))
            for text in chunk:
                if text not in alive:
                    freed[text] = _delete_blob_files(driver, Digest.parse(text))
    return freed


def _known_digests(digests: list[str]) -> set[str]:
    return set(Blob.objects.filter(digest__in=digests).values_list("digest", flat=True))


def _delete_blob_files(driver: StorageDriver, digest: Digest) -> int:
    try:
        size = driver.stat(paths.blob_data(digest)).size
    except PathNotFound:
        size = 0
    return size if delete_if_exists(driver, paths.blob_dir(digest)) else 0


def unreachable_manifests(repository_id: int, cutoff: datetime) -> dict[int, str]:
    """Manifests of a repository pushed before ``cutoff`` that no tag reaches: id -> digest.

    A manifest is reached when it is tagged or younger than the cutoff, when a reached index lists
    it, or when its subject is a reached manifest (a signature or SBOM of a kept image stays).
    """
    manifests = Manifest.objects.filter(repository_id=repository_id)
    rows = list(manifests.values_list("id", "digest", "subject_digest", "created_at"))
    if not rows:
        return {}
    digest_of = {mid: digest for mid, digest, _subject, _created in rows}
    id_of = {digest: mid for mid, digest in digest_of.items()}
    referrers: dict[str, list[int]] = defaultdict(list)
    for mid, _digest, subject, _created in rows:
        if subject:
            referrers[subject].append(mid)
    children: dict[int, list[str]] = defaultdict(list)
    child_refs = ManifestReference.objects.filter(
        manifest__repository_id=repository_id, kind=ManifestReference.MANIFEST
    ).values_list("manifest_id", "digest")
    for mid, child in child_refs:
        children[mid].append(child)
    tagged = set(Tag.objects.filter(repository_id=repository_id).values_list("manifest_id", flat=True))
    pending = [mid for mid, _digest, _subject, created in rows if mid in tagged or created >= cutoff]
    reached: set[int] = set()
    while pending:
        mid = pending.pop()
        if mid in reached:
            continue
        reached.add(mid)
        pending.extend(id_of[child] for child in children[mid] if child in id_of)
        pending.extend(referrers.get(digest_of[mid], ()))
    return {mid: digest for mid, digest in digest_of.items() if mid not in reached}
