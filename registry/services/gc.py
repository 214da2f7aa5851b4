"""Online garbage collection: unreferenced blobs, untagged manifests, expired uploads.

The registry keeps serving while this runs, because every fact that decides what is garbage is in
the database and every deletion re-checks it under the digest locks that writers take too
(``services.digest_locks``):

1. Upload sessions idle for longer than ``upload_expiry_hours`` go, with their partial data; so
   do a pull-through cache's images not pulled for its ``evict_after_days`` (registry.proxy).
2. In a repository a ``[[retention]]`` rule covers, the manifests its rule leaves to go
   (retention.executor.roots: untagged for longer than untagged_after_hours, or with
   ``delete_untagged`` for longer than the grace period, unless pulled within pulled_within_days;
   and the referrers of those); in the others, with ``delete_untagged``, manifests that no tag reaches,
   directly, through an index or as a referrer of a reached manifest. Per repository, re-marked
   inside the deleting transaction. Neither applies under a pull-through cache's prefix: eviction
   alone decides there (an image pulled by digest is untagged, yet in use).
3. Blob links that no manifest of their repository references go.
4. Blob rows that no manifest of any repository references go, in one transaction; only after it
   commits is their data deleted, in a second transaction that skips any digest whose row came back
   meanwhile. A crash between the two leaves data without a row: invisible to clients (nothing can
   link or pull it without a row) and removed by the next run as an orphaned file.
5. Blob files without a row (such crashes, or uploads that died between their rename and their row)
   go, and so does what a crash left in the trash (step 4 renames data there under the lock and
   deletes it after, where the storage renames in one step).

Nothing younger than the grace period is touched: not a blob created or (re)linked into a repository
within it, not a manifest pushed within it, not a file written within it. A push uploads its blobs
before its manifest, so the grace period keeps an in-flight push's layers. A manifest PUT that races
the deletion of a blob it references either commits first (the blob is then referenced and kept) or
finds the blob gone and fails with MANIFEST_BLOB_UNKNOWN.
"""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.utils import timezone

from registry import queries
from registry.policies import quotas
from registry.policies.rules import current as current_policies
from registry.proxy import eviction
from registry.proxy.mirrors import mirrored
from registry.retention import executor as retention
from registry.services import reachability, sweep, uploads
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


def collect(options: Options, report: Report = sweep.silent) -> Result:
    """Run one collection; ``report`` receives one line per thing removed and progress lines."""
    run = _Run(options, default_driver(), report)
    try:
        run.result.uploads = uploads.purge_expired(options.upload_expiry, dry_run=options.dry_run)
        run.evict_cached()
        with queries.range_plans():
            if options.delete_untagged or current_policies().retention:
                run.manifests()
            run.links()
            run.blobs()
        sweep.finish_deletions()  # before the orphaned-file sweep empties what crashes left in the trash
        run.orphaned_files()
    finally:
        sweep.finish_deletions()
        if run.holding_doomed:
            queries.forget_doomed()
    if not options.dry_run and current_policies().quotas:
        quotas.reconcile(report)
    return run.result


REPOSITORY_PAGE = 1000


class _Run:
    def __init__(self, options: Options, driver: StorageDriver, report: Report) -> None:
        self.options, self.driver, self.report = options, driver, report
        self.cutoff: datetime = timezone.now() - options.grace
        self.verb = "would remove" if options.dry_run else "removed"
        self.result = Result()
        # A dry run deletes no manifest, so it discounts the blob references of those it would:
        # their ids are held in a temporary table the later statements leave out.
        self.holding_doomed = False

    # -- manifests ---------------------------------------------------------------------------

    def manifests(self) -> None:
        after, governed = 0, bool(current_policies().retention)
        while page := queries.repository_page(after, REPOSITORY_PAGE):
            after = page[-1].id
            untagged = (queries.repositories_with_untagged(page[0].id, page[-1].id, self.cutoff)
                        if self.options.delete_untagged else set())
            for repository in page:
                if not governed and repository.id not in untagged:
                    continue  # most repositories: one statement for the page decided it
                roots = self._roots(repository.name, repository.id in untagged)
                if roots is not None:
                    self._collect_manifests(repository, roots)

    def evict_cached(self) -> None:
        for found in eviction.stale(timezone.now()):
            if self.options.dry_run:
                self._hold_doomed(list(found.manifests))
                doomed = found.manifests
            else:
                doomed = eviction.evict(found)
            for digest in sorted(doomed.values()):
                self.report(f"{self.verb} cached manifest {found.name}@{digest} (not pulled for {found.days} days)")
            self.result.manifests += len(doomed)

    def _roots(self, name: str, has_untagged: bool) -> reachability.Roots | None:
        """What keeps a repository's manifests, or None when none goes: a repository a retention
        rule covers follows its rule, and with ``delete_untagged`` also loses the untagged
        manifests older than the grace period that the rule does not keep by pulls; the others lose
        their untagged manifests only with ``delete_untagged``; a pull-through cache's, only by
        eviction."""
        if mirrored(name):
            return None
        governed = retention.roots(name, at_most=self.options.grace if self.options.delete_untagged else None)
        if governed is not None:
            return governed
        return reachability.untagged_roots(self.cutoff) if has_untagged else None

    def _collect_manifests(self, repository: queries.NamedRepository, roots: reachability.Roots) -> None:
        """A page of candidates at a time, each decided and (unless a dry run) deleted in one
        transaction holding the repository's lock, so that no push makes one reachable between."""
        after: queries.GraphNode | None = None
        while True:
            if self.options.dry_run:
                page = reachability.candidates(repository.id, roots, after)
                doomed = reachability.unkept(repository.id, page, roots)
                self._hold_doomed([node.id for node in doomed])
            else:
                with sweep.writing():
                    queries.lock_repository(repository.id, exclusive=True)
                    page = reachability.candidates(repository.id, roots, after)
                    doomed = reachability.unkept(repository.id, page, roots)
                    queries.delete_manifests([node.id for node in doomed])
            for node in doomed:
                self.report(f"{self.verb} manifest {repository.name}@{node.digest}")
            self.result.manifests += len(doomed)
            if len(page) < reachability.PAGE:
                return  # the last page: no second transaction per repository to find it empty
            after = page[-1]

    def _hold_doomed(self, manifest_ids: list[int]) -> None:
        if manifest_ids:
            queries.hold_doomed(manifest_ids)
            self.holding_doomed = True

    # -- blob links ----------------------------------------------------------------------------

    def links(self) -> None:
        for low, high in queries.link_ranges(sweep.RANGE):
            unused = queries.unreferenced_links(low, high, self.cutoff, discount=self.holding_doomed)
            if unused and not self.options.dry_run:
                unused = [gone for chunk in sweep.chunks(unused) for gone in self._delete_links(chunk)]
            for link in unused:
                self.report(f"{self.verb} blob link {link.repository}@{link.digest}")
            self.result.blob_links += len(unused)

    def _delete_links(self, links: list[queries.LinkRow]) -> list[queries.LinkRow]:
        """Delete those of ``links`` still unreferenced, checked again under the digests' locks."""
        ids = [link.id for link in links]
        low, high = min(link.repository_id for link in links), max(link.repository_id for link in links)
        with sweep.locked(link.digest for link in links), quotas.releasing(lambda: queries.quota_links_by_id(ids)):
            still = queries.unreferenced_links(low, high, self.cutoff, again=links)
            queries.delete_links([link.id for link in still])
        return still

    # -- blobs ---------------------------------------------------------------------------------

    def blobs(self) -> None:
        total = queries.blob_count()
        progress = sweep.Progress(self.report, lambda checked: f"{checked} of {total} blobs checked")
        for low, high in queries.blob_ranges(sweep.RANGE):
            unused = queries.unused_blobs(low, high, self.cutoff, discount=self.holding_doomed)
            for chunk in sweep.chunks(unused):
                self._collect_blobs(low, high, chunk)
            progress.add(min(sweep.RANGE, total - progress.count))  # a range holds RANGE blobs, the last fewer

    def _collect_blobs(self, low: str, high: str | None, blobs: list[queries.UnusedBlob]) -> None:
        if self.options.dry_run:
            for blob in blobs:
                self._removed_blob(blob.digest, blob.size)
            return
        ids = [blob.id for blob in blobs]
        with sweep.locked(blob.digest for blob in blobs), quotas.releasing(lambda: queries.quota_links_of_blobs(ids)):
            # checked again under the locks
            gone = queries.unused_blobs(low, high, self.cutoff, digests=[blob.digest for blob in blobs])
            queries.delete_blob_rows([blob.id for blob in gone])
        freed = sweep.delete_data_without_rows(self.driver, [(blob.digest, blob.size) for blob in gone])
        for blob in gone:
            self._removed_blob(blob.digest, freed.get(blob.digest, 0))

    def _removed_blob(self, digest: str, size: int) -> None:
        self.report(f"{self.verb} blob {digest} ({size} bytes)")
        self.result.blobs += 1
        self.result.bytes_freed += size

    # -- orphaned files ------------------------------------------------------------------------

    def orphaned_files(self) -> None:
        if not self.options.dry_run and (emptied := sweep.empty_trash(self.driver)):
            self.report(f"emptied {emptied} entries a crashed collection left in the trash")
        walked = sweep.Progress(self.report, lambda files: f"{files} blob files checked")
        for orphans in sweep.files_without_rows(self.driver, self.cutoff, walked.add):
            if self.options.dry_run:
                freed = dict(orphans)
            else:
                freed = sweep.delete_data_without_rows(self.driver, orphans)
            for digest, size in freed.items():
                self.report(f"{self.verb} orphaned file of {digest} ({size} bytes)")
                self.result.orphaned_files += 1
                self.result.bytes_freed += size

