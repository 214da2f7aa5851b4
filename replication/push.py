"""Push replication of one item: a tag (or a referrer, or a deletion) from here to the remote.

A copy is exact: every manifest goes byte for byte under its own digest, an index's platform images
before the index, an image's blobs before the image, and the tag last, so the destination never
shows a tag whose image is incomplete. What the destination has already (a HEAD by digest) is not
sent again; a blob another of the policy's repositories holds there is mounted rather than sent.
Referrers (signatures, SBOMs, OCI ``subject`` manifests and cosign's ``sha256-<hex>.sig`` tags)
follow their subject. A blob larger than CHUNK goes in recorded pieces (replication.models.Upload),
so a run killed midway resumes it where the destination stopped taking bytes.
"""
from __future__ import annotations

import json
import logging
from typing import Any

from django.conf import settings
from django.utils import timezone

from registry import queries as local
from registry.media_types import OCI_INDEX
from registry.services import blobs, manifest_format
from registry.services.exceptions import BlobUnknown
from replication import queries
from replication.feed import travels
from replication.policies import COSIGN_TAG, Policy
from replication.queries import ItemRow
from replication.remote import Remote
from replication.transfer import CHUNK, Known, Outcome, Skip, Stream, Tally, Throttle

log = logging.getLogger("replication")

REFERRER_DEPTH = 3  # a signature of an SBOM of an image: referrers of referrers, this deep
REFERRER_PAGE = 100  # subjects asked about at once


class Push:
    def __init__(self, policy: Policy, remote: Remote, throttle: Throttle, known: Known) -> None:
        self.policy, self.remote, self.throttle, self.known = policy, remote, throttle, known

    def run(self, item: ItemRow, tally: Tally) -> Outcome:
        try:
            note = self._delete(item) if item.action == "delete" else self._copy(item, tally)
        except Skip as skipped:
            return Outcome("skipped" if not tally.bytes else "done", str(skipped), tally.bytes)
        return Outcome("done", note, tally.bytes)

    def preview(self, item: ItemRow) -> str:
        """What running the item would do (``manage.py replicate --dry-run``): asks, changes nothing."""
        dest = self.policy.destination(item.repository)
        target = f"{self.policy.remote}/{dest}:{item.tag}" if item.tag else f"{self.policy.remote}/{dest}@{item.digest}"
        there = self.remote.manifest_digest(dest, item.tag or item.digest)
        if item.action == "delete":
            return f"would delete {target}" if there is not None else f"{target}: not there, nothing to delete"
        if there == item.digest:
            return f"{target}: up to date ({item.digest})"
        return f"would copy {item.repository}:{item.tag} ({item.digest}) to {target}"

    # -- copies ------------------------------------------------------------------------------------

    def _copy(self, item: ItemRow, tally: Tally) -> str:
        name, dest = item.repository, self.policy.destination(item.repository)
        repository = local.find_repository(name)
        if repository is None:
            raise Skip(f"{name} is no longer here")
        if not item.tag:  # a referrer pushed on its own
            subject = queries.manifest_subject(repository.id, item.digest)
            if subject is None:
                raise Skip(f"{item.digest} is no longer in {name}")
            if not subject or not self._replicated(repository.id, subject):
                raise Skip(f"its subject {subject or '(none)'} is not replicated by this policy")
            self._tree(name, dest, subject, tally)
            self._tree(name, dest, item.digest, tally)
            self._referrers(name, dest, [item.digest], tally, REFERRER_DEPTH - 1)
            return f"referrer {item.digest} of {subject}"
        cosign = COSIGN_TAG.fullmatch(item.tag)
        if cosign and not self.policy.wants_tag(item.tag) \
                and not self._replicated(repository.id, f"{cosign[1]}:{cosign[2]}"):
            raise Skip(f"its subject {cosign[1]}:{cosign[2]} is not replicated by this policy")
        row = local.manifest_by_digest(name, item.digest)
        if row is None or row.body is None:
            raise Skip(f"{item.digest} is no longer in {name}: a later push or delete of the tag replaces this one")
        if self.remote.manifest_digest(dest, item.tag) == item.digest:
            self._referrers(name, dest, [item.digest], tally, REFERRER_DEPTH)
            raise Skip(f"up to date at {self.policy.remote}")
        visited = self._tree(name, dest, item.digest, tally, row, tag=item.tag)
        self._referrers(name, dest, visited, tally, REFERRER_DEPTH)
        return f"{dest}:{item.tag} is {item.digest}"

    def _replicated(self, repository_id: int, digest: str) -> bool:
        """Whether a tag this policy replicates holds ``digest`` (itself, or as a platform image)."""
        return any(travels(self.policy, tag) for tag in local.tags_reaching(repository_id, digest, blob=False))

    def _tree(self, name: str, dest: str, digest: str, tally: Tally, row: Any = None, tag: str = "") -> list[str]:
        """Put the manifest ``digest`` (under ``tag`` when given) and everything it references at
        the destination; the digests of the manifests it consists of (itself and an index's
        platform images). A tag is put by itself, not after the digest: one request less per tag."""
        row = row or local.manifest_by_digest(name, digest)
        if row is None or row.body is None:
            raise Skip(f"manifest {digest} is no longer in {name}")
        if not tag and ((dest, digest) in self.known or self.remote.manifest_digest(dest, digest) is not None):
            self.known.add((dest, digest))
            return [digest]
        parsed = manifest_format.parse(row.body, row.media_type, settings.REGISTRY_MAX_DESCRIPTORS)
        visited = [digest]
        for child in parsed.children:
            visited += self._tree(name, dest, child.digest, tally)
        for blob in sorted((b for b in parsed.blobs if not b.foreign), key=lambda b: b.size):
            self._blob(name, dest, blob.digest, blob.size, tally)
        answer = self.remote.put_manifest(dest, tag or digest, row.body, row.media_type)
        if parsed.subject and "oci-subject" not in answer:
            self._fallback_tag(dest, parsed.subject.digest, row, parsed)
        self.known.add((dest, digest))
        return visited

    def _referrers(self, name: str, dest: str, subjects: list[str], tally: Tally, depth: int) -> None:
        """The referrers of ``subjects`` (OCI ``subject`` manifests and cosign's tags), after them."""
        repository = local.find_repository(name) if self.policy.referrers and depth > 0 else None
        if repository is None:
            return
        referrers, tags = queries.followers(repository.id, subjects[:REFERRER_PAGE])
        for _subject, digest in referrers:
            self._tree(name, dest, digest, tally)
        if referrers:
            self._referrers(name, dest, [digest for _subject, digest in referrers], tally, depth - 1)
        for tag in tags:
            row = local.manifest_by_tag(name, tag)
            if row is not None and row.body is not None and self.remote.manifest_digest(dest, tag) != row.digest:
                self._tree(name, dest, row.digest, tally, row, tag=tag)

    def _fallback_tag(self, dest: str, subject: str, row: Any, parsed: manifest_format.ParsedManifest) -> None:
        """A destination without the referrers API (no OCI-Subject in its answer) finds referrers
        by the spec's tag schema: an index under the tag ``<alg>-<hex>`` of the subject."""
        tag = subject.replace(":", "-")[:128]
        current = self.remote.get_manifest(dest, tag)
        try:
            index = json.loads(current.body) if current else None
        except ValueError:
            index = None
        if not isinstance(index, dict) or not isinstance(index.get("manifests"), list):
            index = {"schemaVersion": 2, "mediaType": OCI_INDEX, "manifests": []}
        if any(isinstance(m, dict) and m.get("digest") == row.digest for m in index["manifests"]):
            return
        descriptor: dict[str, Any] = {"mediaType": row.media_type, "digest": row.digest, "size": row.size}
        if parsed.referrer_artifact_type:
            descriptor["artifactType"] = parsed.referrer_artifact_type
        if parsed.annotations:
            descriptor["annotations"] = parsed.annotations
        index["manifests"].append(descriptor)
        self.remote.put_manifest(dest, tag, json.dumps(index, separators=(",", ":")).encode(), OCI_INDEX)

    # -- blobs -------------------------------------------------------------------------------------

    def _blob(self, name: str, dest: str, digest: str, size: int, tally: Tally) -> None:
        if (dest, digest) in self.known:
            return
        with self.known.moving((dest, digest)):
            self._blob_once(name, dest, digest, size, tally)

    def _blob_once(self, name: str, dest: str, digest: str, size: int, tally: Tally) -> None:
        if (dest, digest) in self.known or self.remote.has_blob(dest, digest):
            self.known.add((dest, digest))
            return
        location, offset = self._resumed(dest, digest) if size > CHUNK else (None, 0)
        if location is None:
            source = self._mount_source(name, digest)
            location = self.remote.start_upload(dest, mount=digest if source else "", source=source)
            if location is None:
                self.known.add((dest, digest))
                return
            offset = 0
        self._send(name, dest, digest, size, location, offset, tally)
        self.known.add((dest, digest))

    def _resumed(self, dest: str, digest: str) -> tuple[str | None, int]:
        saved = queries.upload(self.policy.name, dest, digest)
        if saved is None:
            return None, 0
        offset = self.remote.upload_offset(dest, saved[0])
        if offset is None:
            queries.drop_upload(self.policy.name, dest, digest)
            return None, 0
        log.info("replication %s: resuming the upload of blob %s to %s at byte %d", self.policy.name, digest,
                 dest, offset, extra={"policy": self.policy.name, "digest": digest, "offset": offset})
        return saved[0], offset

    def _mount_source(self, name: str, digest: str) -> str:
        """Another of the policy's repositories holding the blob: its destination may have it too."""
        for other in local.repositories_linking(digest)[:20]:
            if other != name and self.policy.covers(other):
                return self.policy.destination(other)
        return ""

    def _send(self, name: str, dest: str, digest: str, size: int, location: str, offset: int, tally: Tally) -> None:
        try:
            source, _info = blobs.open_blob(name, digest)
        except BlobUnknown:
            raise Skip(f"blob {digest} of {name} is missing here") from None
        what = f"blob {digest} of {name}"
        try:
            if offset:
                source.seek(offset)
            if offset == 0 and size <= CHUNK:  # one request: the bytes with the closing PUT
                self.remote.finish_upload(dest, location, digest, Stream(source.read, size, self.throttle, tally,
                                                                            what), size)
                return
            queries.save_upload(self.policy.name, dest, digest, location, offset, timezone.now())
            while offset < size:
                length = min(CHUNK, size - offset)
                location = self.remote.patch(dest, location, Stream(source.read, length, self.throttle, tally, what),
                                             offset, length)
                offset += length
                queries.save_upload(self.policy.name, dest, digest, location, offset, timezone.now())
            self.remote.finish_upload(dest, location, digest)
            queries.drop_upload(self.policy.name, dest, digest)
        finally:
            source.close()

    # -- deletions ---------------------------------------------------------------------------------

    def _delete(self, item: ItemRow) -> str:
        dest = self.policy.destination(item.repository)
        target = f"{dest}:{item.tag}" if item.tag else f"{dest}@{item.digest}"
        status = self.remote.delete_manifest(dest, item.tag or item.digest)
        if status == 404:
            raise Skip(f"{target} is not at {self.policy.remote}")
        if status < 300:
            return f"deleted {target}"
        if not item.tag:
            raise Skip(f"{self.policy.remote} refuses deletes ({status}): {target} stays")
        return self._delete_by_digest(item, dest, target)

    def _delete_by_digest(self, item: ItemRow, dest: str, target: str) -> str:
        """A registry that refuses a delete by tag (CNCF distribution answers 400) deletes the
        manifest the tag points to, unless another tag this policy replicates still needs it."""
        there = self.remote.manifest_digest(dest, item.tag)
        if not there:
            raise Skip(f"{target} is not at {self.policy.remote}")
        repository = local.find_repository(item.repository)
        holders = [tag for tag in (local.tags_reaching(repository.id, there, blob=False) if repository else [])
                   if travels(self.policy, tag)]
        if holders:
            log.info("replication %s: %s refuses deleting the tag %s, and its manifest %s is also %s here: the tag "
                     "stays there", self.policy.name, self.policy.remote, target, there, ", ".join(sorted(holders)[:5]),
                     extra={"policy": self.policy.name, "tag": item.tag, "digest": there})
            raise Skip(f"tag left: {self.policy.remote} deletes only by digest, and {there} is still "
                       f"{', '.join(sorted(holders)[:5])}")
        status = self.remote.delete_manifest(dest, there)
        if status == 404:
            raise Skip(f"{target} is not at {self.policy.remote}")
        if status >= 300:
            raise Skip(f"{self.policy.remote} refuses deletes ({status}): {target} stays")
        return f"deleted {target} (by its digest {there}: the registry deletes no tag alone)"
