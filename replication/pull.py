"""Pull replication of one item: a tag of the remote registry copied here.

Through the registry's own services, as a push is: every blob verified against its digest as it is
stored, every manifest checked and stored byte for byte, the tag last; quotas, immutable tags and
events apply as to any push. A tag that is already the remote's digest costs one HEAD and moves no
byte; a blob this registry stores already (in any repository) is linked, not fetched. An immutable
local tag that points elsewhere is never overwritten: the item is skipped and logged. Nor is a local
tag someone else set: one at another digest than the policy last left it at (or one the policy never
set), moved by hand or there before the policy; the item is skipped with a note saying so.
"""
from __future__ import annotations

import logging
from typing import Any

from django.conf import settings

from registry import queries as local
from registry.digests import Digest
from registry.policies import immutable
from registry.proxy.auth import discard
from registry.services import blobs, manifest_format, manifests, uploads
from registry.services.exceptions import ImmutableTag
from replication.policies import Policy
from replication import queries
from replication.queries import ItemRow
from replication.remote import Remote, RemoteError
from replication.transfer import Known, Outcome, Skip, Stream, Tally, Throttle

log = logging.getLogger("replication")


class Pull:
    def __init__(self, policy: Policy, remote: Remote, throttle: Throttle, known: Known) -> None:
        self.policy, self.remote, self.throttle, self.known = policy, remote, throttle, known

    def run(self, item: ItemRow, tally: Tally) -> Outcome:
        try:
            note = self._copy(item, tally)
        except Skip as skipped:
            return Outcome("skipped" if not tally.bytes else "done", str(skipped), tally.bytes, skipped.digest)
        return Outcome("done", note[0], tally.bytes, note[1])

    def preview(self, item: ItemRow) -> str:
        here = self.policy.destination(item.repository)
        there = self.remote.manifest_digest(item.repository, item.tag)
        if there is None:
            return f"{self.policy.remote}/{item.repository}:{item.tag}: gone"
        row = local.manifest_by_tag(here, item.tag, with_body=False)
        if row is not None and row.digest == there:
            return f"{here}:{item.tag}: up to date ({there})"
        if row is not None and (left := self._theirs(item, here, row.digest, there)):
            return f"{here}:{item.tag}: {left}"
        return f"would pull {self.policy.remote}/{item.repository}:{item.tag} ({there or 'digest not sent'}) to {here}"

    def _theirs(self, item: ItemRow, here: str, digest: str, there: str) -> str | None:
        """Why the local tag (at ``digest``) is someone else's, or None when it is the policy's to move."""
        last = queries.last_set(self.policy.name, item.repository, item.tag)
        if last == digest:
            return None
        was = f"this policy last set {last}" if last else "this policy never set it"
        return f"{queries.LEFT}: {here}:{item.tag} is {digest} ({was}); the remote's is {there or 'newer'}"

    def _copy(self, item: ItemRow, tally: Tally) -> tuple[str, str]:
        """(note, the digest the tag is now)."""
        name, here = item.repository, self.policy.destination(item.repository)
        there = self.remote.manifest_digest(name, item.tag)
        if there is None:
            raise Skip(f"{name}:{item.tag} is no longer at {self.policy.remote}")
        row = local.manifest_by_tag(here, item.tag, with_body=False)
        if row is not None and row.digest == there:
            raise Skip("up to date", there)
        if row is not None and immutable.immutable_tags(here, [item.tag]):
            log.warning("replication %s: %s:%s is immutable here and points to %s; the remote's %s is not pulled "
                        "over it", self.policy.name, here, item.tag, row.digest, there or "manifest",
                        extra={"policy": self.policy.name, "repository": here, "tag": item.tag})
            raise Skip(f"immutable here: {here}:{item.tag} stays {row.digest}")
        if row is not None and (left := self._theirs(item, here, row.digest, there or "")):
            log.info("replication %s: %s", self.policy.name, left,
                     extra={"policy": self.policy.name, "repository": here, "tag": item.tag})
            raise Skip(left)
        fetched = self.remote.get_manifest(name, there or item.tag)
        if fetched is None:
            raise Skip(f"{name}:{item.tag} is no longer at {self.policy.remote}")
        digest = str(Digest.of(fetched.body, Digest.parse(there).algorithm if there else "sha256"))
        if there and digest != there:
            raise RemoteError(f"{self.policy.remote} sent a manifest for {name}:{item.tag} that does not match its "
                              f"digest {there}", transient=False)
        self._tree(name, here, digest, tally, fetched)
        try:
            manifests.put(here, item.tag, fetched.body, fetched.media_type, settings.REGISTRY_MAX_MANIFEST_BYTES)
        except ImmutableTag:
            raise Skip(f"immutable here: {here}:{item.tag} was pushed meanwhile and stays") from None
        return f"{here}:{item.tag} is {digest}", digest

    def _tree(self, name: str, here: str, digest: str, tally: Tally, fetched: Any = None) -> None:
        if (here, digest) in self.known or local.manifest_by_digest(here, digest, with_body=False) is not None:
            return
        if fetched is None:
            fetched = self.remote.get_manifest(name, digest)
            if fetched is None:
                raise RemoteError(f"{self.policy.remote} lists manifest {digest} in {name} but does not have it",
                                  transient=False)
            if str(Digest.of(fetched.body, Digest.parse(digest).algorithm)) != digest:
                raise RemoteError(f"{self.policy.remote} sent manifest {digest} of {name} with other bytes",
                                  transient=False)
        parsed = manifest_format.parse(fetched.body, fetched.media_type, settings.REGISTRY_MAX_DESCRIPTORS)
        for child in parsed.children:
            self._tree(name, here, child.digest, tally)
        for blob in sorted((b for b in parsed.blobs if not b.foreign), key=lambda b: b.size):
            self._blob(name, here, blob.digest, blob.size, tally)
        manifests.put(here, digest, fetched.body, fetched.media_type, settings.REGISTRY_MAX_MANIFEST_BYTES)
        self.known.add((here, digest))
        if self.policy.referrers:
            self._referrers(name, here, digest, tally)

    def _blob(self, name: str, here: str, digest: str, size: int, tally: Tally) -> None:
        if (here, digest) in self.known:
            return
        with self.known.moving((here, digest)):
            self._blob_once(name, here, digest, size, tally)

    def _blob_once(self, name: str, here: str, digest: str, size: int, tally: Tally) -> None:
        if local.linked_blob(here, digest) is not None:
            self.known.add((here, digest))
            return
        if blobs.mount(here, digest, None) is None:
            response = self.remote.open_blob(name, digest)
            try:
                stream = Stream(lambda n: response.read(n, decode_content=False), size, self.throttle, tally,
                                f"blob {digest} of {name}")
                uploads.monolithic(here, digest, uploads.Body(stream, size))
            finally:
                discard(response)
        self.known.add((here, digest))

    def _referrers(self, name: str, here: str, subject: str, tally: Tally) -> None:
        """The remote's OCI referrers of ``subject`` (a registry without the API has none to give)."""
        listing = self.remote.referrers(name, subject)
        for descriptor in listing:
            self._tree(name, here, descriptor, tally)
