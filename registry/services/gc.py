"""Online garbage collection: unreferenced blobs, untagged manifests, expired uploads.

The registry keeps serving while this runs, because every fact that decides what is garbage is in
the database and every deletion re-checks it under the digest locks that writers take too
(``services.digest_locks``):

1. Upload sessions idle for longer than ``upload_expiry_hours`` go, with their partial data; so
   do a pull-through cache's images not pulled for its ``evict_after_days`` (registry.proxy).
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

from collections import Counter, defaultdict
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db.models import Count, Exists, OuterRef
from django.utils import timezone

from registry.models import Blob, BlobLink, Manifest, ManifestReference, Repository, Tag
from registry.proxy import eviction
from registry.services import sweep, uploads
from registry.services.sweep import Report
from registry.storage import default_driver
from registry.storage.driver import StorageDriver


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


def collect(options: Options, driver: StorageDriver | None = None, report: Report = sweep.silent) -> Result:
    """Run one collection; ``report`` receives one line per thing removed and progress lines."""
    run = _Run(options, driver or default_driver(), report)
    run.result.uploads = uploads.purge_expired(options.upload_expiry, run.driver, dry_run=options.dry_run)
    run.evict_cached()
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

    def evict_cached(self) -> None:
        for found in eviction.stale(timezone.now()):
            if self.options.dry_run:
                self._discount_references(found.repository_id, list(found.manifests))
                doomed = found.manifests
            else:
                doomed = eviction.evict(found)
            for digest in sorted(doomed.values()):
                self.report(f"{self.verb} cached manifest {found.name}@{digest} (not pulled for {found.days} days)")
            self.result.manifests += len(doomed)

    def _delete_manifests(self, repository_id: int, candidates: dict[int, str]) -> dict[int, str]:
        with sweep.locked(candidates.values()):
            still = unreachable_manifests(repository_id, self.cutoff)
            doomed = {mid: digest for mid, digest in candidates.items() if still.get(mid) == digest}
            for chunk in sweep.chunks(doomed):
                Manifest.objects.filter(id__in=chunk).only("id").delete()  # never load the bodies
        return doomed

    def _discount_references(self, repository_id: int, manifest_ids: list[int]) -> None:
        for chunk in sweep.chunks(manifest_ids):
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
                .values_list("id", "repository_id", "repository__name", "blob__digest")[: sweep.BATCH]
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
        with sweep.locked(row[3] for row in rows):
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
        total = Blob.objects.count()
        progress = sweep.Progress(self.report, lambda checked: f"{checked} of {total} blobs checked")
        for page in sweep.blob_pages("digest", "size", "created_at"):
            self._collect_blobs([row for row in page if row[3] < self.cutoff])
            progress.add(len(page))

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
        freed = sweep.delete_data_without_rows(self.driver, [digest for digest, _size in gone])
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
        with sweep.locked(digest for _id, digest, _size in rows):
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
        walked = sweep.Progress(self.report, lambda files: f"{files} blob files checked")
        for orphans in sweep.files_without_rows(self.driver, self.cutoff, walked.add):
            if self.options.dry_run:
                freed = dict(orphans)
            else:
                freed = sweep.delete_data_without_rows(self.driver, [digest for digest, _size in orphans])
            for digest, size in freed.items():
                self.report(f"{self.verb} orphaned file of {digest} ({size} bytes)")
                self.result.orphaned_files += 1
                self.result.bytes_freed += size


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
