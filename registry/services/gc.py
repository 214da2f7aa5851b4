"""Online garbage collection: unreferenced blobs, untagged manifests, expired uploads.

The registry keeps serving while this runs, because every fact that decides what is garbage is in
the database and every deletion re-checks it under the digest locks that writers take too
(``services.digest_locks``):

1. Upload sessions idle for longer than ``upload_expiry_hours`` go, with their partial data; so
   do a pull-through cache's images not pulled for its ``evict_after_days`` (registry.proxy).
2. In a repository a ``[[retention]]`` rule covers, the manifests its rule leaves to go
   (retention.executor.collectable: untagged for longer than untagged_after_hours, or with
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

from django.utils import timezone

from registry import queries
from registry.policies import quotas
from registry.policies.rules import current as current_policies
from registry.proxy import eviction
from registry.proxy.mirrors import mirrored
from registry.retention import executor as retention
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


def collect(options: Options, report: Report = sweep.silent) -> Result:
    """Run one collection; ``report`` receives one line per thing removed and progress lines."""
    run = _Run(options, default_driver(), report)
    run.result.uploads = uploads.purge_expired(options.upload_expiry, dry_run=options.dry_run)
    run.evict_cached()
    if options.delete_untagged or current_policies().retention:
        run.manifests()
    run.links()
    run.blobs()
    run.orphaned_files()
    if not options.dry_run and current_policies().quotas:
        quotas.reconcile(report)
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
        for repository in queries.all_repositories():
            doomed = self._unwanted(repository.id, repository.name)
            if not doomed:
                continue
            if self.options.dry_run:
                self._discount_references(repository.id, list(doomed))
            else:
                doomed = self._delete_manifests(repository.id, repository.name, doomed)
            for digest in sorted(doomed.values()):
                self.report(f"{self.verb} manifest {repository.name}@{digest}")
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

    def _unwanted(self, repository_id: int, name: str) -> dict[int, str]:
        """A repository a retention rule covers follows its rule, and with ``delete_untagged`` also
        loses the untagged manifests older than the grace period that the rule does not keep by
        pulls; the others lose their untagged manifests only with ``delete_untagged``; a
        pull-through cache's, only by eviction."""
        if mirrored(name):
            return {}
        governed = retention.collectable(repository_id, name,
                                         at_most=self.options.grace if self.options.delete_untagged else None)
        if governed is not None:
            return governed
        return unreachable_manifests(repository_id, self.cutoff) if self.options.delete_untagged else {}

    def _delete_manifests(self, repository_id: int, name: str, candidates: dict[int, str]) -> dict[int, str]:
        with sweep.locked(candidates.values()):
            still = self._unwanted(repository_id, name)
            doomed = {mid: digest for mid, digest in candidates.items() if still.get(mid) == digest}
            for chunk in sweep.chunks(doomed):
                queries.delete_manifests(chunk)
        return doomed

    def _discount_references(self, repository_id: int, manifest_ids: list[int]) -> None:
        for chunk in sweep.chunks(manifest_ids):
            for digest in queries.blob_references(chunk):
                self.doomed_refs[(repository_id, digest)] += 1
                self.doomed_refs_anywhere[digest] += 1

    # -- blob links ----------------------------------------------------------------------------

    def links(self) -> None:
        last = 0
        while True:
            page = queries.links_created_before(self.cutoff, last, sweep.BATCH)
            if not page:
                return
            last = page[-1].id
            in_use = self._referenced_in_repositories({(link.repository_id, link.digest) for link in page})
            unused = [link for link in page if (link.repository_id, link.digest) not in in_use]
            if unused and not self.options.dry_run:
                unused = self._delete_links(unused)
            for link in unused:
                self.report(f"{self.verb} blob link {link.repository}@{link.digest}")
            self.result.blob_links += len(unused)

    def _referenced_in_repositories(self, pairs: set[tuple[int, str]]) -> set[tuple[int, str]]:
        counts = queries.blob_reference_counts_in(pairs)
        return {pair for pair, n in counts.items() if n > self.doomed_refs[pair]}

    def _delete_links(self, links: list[queries.LinkRow]) -> list[queries.LinkRow]:
        ids = [link.id for link in links]
        with sweep.locked(link.digest for link in links), quotas.releasing(lambda: queries.quota_links_by_id(ids)):
            deleted = queries.delete_unreferenced_links(ids, self.cutoff)
        return [link for link in links if link.id in deleted]

    # -- blobs ---------------------------------------------------------------------------------

    def blobs(self) -> None:
        total = queries.blob_count()
        progress = sweep.Progress(self.report, lambda checked: f"{checked} of {total} blobs checked")
        for page in sweep.blob_pages():
            self._collect_blobs([blob for blob in page if blob.created_at < self.cutoff])
            progress.add(len(page))

    def _collect_blobs(self, blobs: list[queries.StoredBlob]) -> None:
        if not blobs:
            return
        referenced = self._referenced_anywhere({blob.digest for blob in blobs})
        fresh = queries.linked_since([blob.id for blob in blobs], self.cutoff)
        unused = [blob for blob in blobs if blob.digest not in referenced and blob.id not in fresh]
        if not unused:
            return
        if self.options.dry_run:
            for blob in unused:
                self._removed_blob(blob.digest, blob.size)
            return
        gone = self._delete_blob_rows(unused)
        freed = sweep.delete_data_without_rows(self.driver, [row.digest for row in gone])
        for row in gone:
            self._removed_blob(row.digest, freed.get(row.digest, 0))

    def _removed_blob(self, digest: str, size: int) -> None:
        self.report(f"{self.verb} blob {digest} ({size} bytes)")
        self.result.blobs += 1
        self.result.bytes_freed += size

    def _referenced_anywhere(self, digests: set[str]) -> set[str]:
        counts = queries.blob_reference_counts(digests)
        return {digest for digest, n in counts.items() if n > self.doomed_refs_anywhere[digest]}

    def _delete_blob_rows(self, blobs: list[queries.StoredBlob]) -> list[queries.BlobRow]:
        """Delete the rows that are still unreferenced and old, re-checked under the digest locks."""
        ids = [blob.id for blob in blobs]
        with sweep.locked(blob.digest for blob in blobs), quotas.releasing(lambda: queries.quota_links_of_blobs(ids)):
            return queries.delete_unused_blobs(ids, self.cutoff)

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
    nodes = queries.manifest_nodes(repository_id)
    if not nodes:
        return {}
    digest_of = {node.id: node.digest for node in nodes}
    id_of = {digest: mid for mid, digest in digest_of.items()}
    referrers: dict[str, list[int]] = defaultdict(list)
    for node in nodes:
        if node.subject_digest:
            referrers[node.subject_digest].append(node.id)
    children: dict[int, list[str]] = defaultdict(list)
    for mid, child in queries.index_children(repository_id):
        children[mid].append(child)
    tagged = queries.tagged_manifests(repository_id)
    pending = [node.id for node in nodes if node.id in tagged or node.created_at >= cutoff]
    reached: set[int] = set()
    while pending:
        mid = pending.pop()
        if mid in reached:
            continue
        reached.add(mid)
        pending.extend(id_of[child] for child in children[mid] if child in id_of)
        pending.extend(referrers.get(digest_of[mid], ()))
    return {mid: digest for mid, digest in digest_of.items() if mid not in reached}
