"""Blobs through a pull-through cache: served from storage when cached, else fetched once.

A miss is streamed to the client while it is written to storage and hashed (``Fill``). The blob
becomes visible (its row, its link, its data under blobs/) only once every byte arrived and the
digest matched; until then the last piece is held back, so a client never receives complete bytes
that do not match. The first piece to send is received before the answer begins, so that a blob of
one piece is checked whole and a failure until then is an OCI error (502, 503, 504); one after
that cuts the client's connection short (``Cut``), stores nothing and is logged in one line.

Concurrent pulls of one missing blob, in any worker of any replica, cause one upstream fetch: the
fetcher holds a lease row named after the digest (registry.models.Lease, renewed as the bytes flow),
and the others wait until the blob is stored (then read it from storage like any other) or until the
lease is free again (the fetch failed: one of them tries in turn). A client that goes away mid-fetch
does not stop it: the rest is still read into storage for those waiting.

No request thread waits on the upstream for long: the fetch and the waits share the pull's
deadline (the cache's ``total_timeout``: 504, or 503 for a wait, with Retry-After), and each holds
one of the worker's slots for its cache (registry.proxy.slots: 503 at once when none is free).
"""
from __future__ import annotations

import atexit
import errno
import hashlib
import logging
import threading
import time
import uuid
from datetime import timedelta
from typing import Any, BinaryIO, cast

from django.conf import settings
from django.db import connection
from django.utils import timezone

from registry import queries
from registry.digests import Digest, new_hasher
from registry.proxy import metrics, misses, slots
from registry.proxy.mirrors import Mirror, split
from registry.proxy.spool import Spool
from registry.proxy.upstream import Upstream, discard
from registry.services import blobs
from registry.services.common import check_name, ensure_repository, parse_digest
from registry.services.exceptions import BlobUnknown, UpstreamError, UpstreamFailed, UpstreamUnavailable
from registry.storage import default_driver, paths
from registry.storage.driver import StorageDriver, StorageError, StorageFull, delete_if_exists
from regsite import db

log = logging.getLogger(__name__)

PIECE = 1024 * 1024
# A fetcher that dies, or whose bytes stop coming, frees the blob for another request after this.
LEASE = timedelta(seconds=60)


class Cut(ConnectionResetError):
    """A blob's answer ends short, its connection closed: the upstream failed (or the store did)
    after the first bytes were sent. A connection reset to the server, which logs no traceback."""


def stat(name: str, digest_text: str) -> blobs.BlobInfo:
    """HEAD: the cached blob, else what the upstream says of it (nothing is fetched)."""
    try:
        return blobs.stat(name, digest_text)
    except BlobUnknown:
        pass
    mirror, upstream_name = split(name)
    digest = parse_digest(digest_text)
    if _adopt(name, digest):
        return blobs.stat(name, digest_text)
    if misses.remembered(mirror, "blob", upstream_name, str(digest)):
        raise _unknown(name, digest)
    slot = slots.take(mirror)
    try:
        size = Upstream(mirror).head_blob(upstream_name, str(digest))
    finally:
        slot.release()
    if size is None:
        misses.remember(mirror, "blob", upstream_name, str(digest))
        raise _unknown(name, digest)
    return blobs.BlobInfo(str(digest), size)


def pull(name: str, digest_text: str, ranged: bool = False) -> tuple[BinaryIO, blobs.BlobInfo] | None:
    """GET: None when the blob is stored here (now), to be served like any other; else the blob
    streaming in from the upstream. A ranged request waits for the whole blob to be stored."""
    check_name(name)
    mirror, upstream_name = split(name)
    digest = parse_digest(digest_text)
    if _hit(mirror, name, digest):
        return None
    if misses.remembered(mirror, "blob", upstream_name, str(digest)):
        raise _unknown(name, digest)
    slot = slots.take(mirror)
    try:
        fill = _fetch(mirror, name, upstream_name, digest, slot)
        if fill is not None and not ranged and fill.size is not None:
            fill.start()
            # Read like a file: the response only reads it to the end and closes it. The fill lets
            # go of the slot once the upstream sent its last byte.
            return cast(BinaryIO, fill), blobs.BlobInfo(str(digest), fill.size)
        if fill is not None:
            fill.complete()
    except BaseException:
        slot.release()
        raise
    slot.release()
    return None


def _fetch(mirror: Mirror, name: str, upstream_name: str, digest: Digest, slot: slots.Slot) -> "Fill | None":
    """The fetch of ``digest`` this request makes, or None once another request stored it."""
    upstream = Upstream(mirror)  # the pull's deadline starts now, the waits included
    lease = FetchLease(digest)
    while True:
        if lease.acquire():
            try:
                fill = _start(upstream, name, upstream_name, digest, lease, slot)
            except BaseException:
                lease.release()
                raise
            if fill is not None:
                return fill
            lease.release()  # stored by the request that held the lease just before
        else:
            _wait(name, digest, lease.name, upstream.deadline)
        if _hit(mirror, name, digest):
            return None


def _hit(mirror: Mirror, name: str, digest: Digest) -> bool:
    if _linked(name, digest) or _adopt(name, digest):
        metrics.HITS.labels(mirror.prefix, "blob").inc()
        return True
    return False


def _unknown(name: str, digest: Digest) -> BlobUnknown:
    return BlobUnknown(f"blob {digest} unknown to the upstream of {name!r}", {"digest": str(digest)})


class FetchLease:
    """The lease row that makes one request the fetcher of a blob, in every worker and replica.

    Renewed by the fetch itself as bytes arrive (a fetcher that dies, or stalls for LEASE, loses it);
    its row is removed when let go, since one is made per blob fetched.
    """

    def __init__(self, digest: Digest) -> None:
        # A lease name is at most 64 characters (registry.models.Lease).
        self.name = "proxy-" + hashlib.sha256(str(digest).encode()).hexdigest()[:58]
        self.owner = ""
        self._renewed = 0.0

    def acquire(self) -> bool:
        owner, now = uuid.uuid4().hex, timezone.now()
        if queries.acquire_lease(self.name, owner, now, now + LEASE) is None:
            return False
        self.owner, self._renewed = owner, time.monotonic()
        return True

    def renew(self) -> None:
        if self.owner and time.monotonic() - self._renewed > LEASE.total_seconds() / 3:
            self._renewed = time.monotonic()
            queries.renew_lease(self.name, self.owner, timezone.now() + LEASE)

    def release(self) -> None:
        if self.owner:
            queries.release_lease(self.name, self.owner)
            queries.delete_free_lease(self.name)
            self.owner = ""


def _start(upstream: Upstream, name: str, upstream_name: str, digest: Digest, lease: FetchLease,
           slot: slots.Slot) -> "Fill | None":
    if _linked(name, digest) or _adopt(name, digest):
        return None
    drv = default_driver()
    free = drv.free_bytes()
    if free is not None and free < settings.REGISTRY_MIN_FREE_BYTES:
        raise StorageFull(f"the storage device has {free} bytes free, below the floor of "
                          f"{settings.REGISTRY_MIN_FREE_BYTES} ([storage] min_free_bytes): nothing new is cached")
    mirror = upstream.mirror
    response = upstream.open_blob(upstream_name, str(digest))
    if response is None:
        misses.remember(mirror, "blob", upstream_name, str(digest))
        raise _unknown(name, digest)
    metrics.MISSES.labels(mirror.prefix, "blob").inc()
    try:
        return Fill(upstream, name, digest, response, lease, drv, slot)
    except BaseException:
        discard(response)
        raise


def _linked(name: str, digest: Digest) -> bool:
    return queries.linked_blob(name, str(digest)) is not None


def _adopt(name: str, digest: Digest) -> bool:
    """Link a blob stored here already (another repository's, another mirror's) into ``name`` when a
    manifest cached there lists it: the upstream vouched for it with that manifest."""
    size = queries.stored_blob_size(str(digest))
    if size is None or not queries.references_blob(name, str(digest)):
        return False
    try:
        blobs.link(ensure_repository(name).id, name, digest, size)
    except BlobUnknown:  # a row whose data is missing (scrub reports it): fetch it again
        return False
    return True


def _wait(name: str, digest: Digest, lease: str, deadline: float) -> None:
    """Until the blob is linked here or the fetch holding ``lease`` is over, whatever its outcome;
    503 once the pull's deadline passed."""
    delay = 0.02
    while time.monotonic() < deadline:
        if _linked(name, digest) or not queries.lease_held(lease, timezone.now()):
            return
        db.release()  # a pooled connection goes back while this request only waits
        time.sleep(delay)
        delay = min(delay * 1.5, 0.5)
    raise UpstreamUnavailable(f"another request is still fetching blob {digest} from the upstream; retry later", 10)


class Fill:
    """A blob arriving from the upstream, read like a file by the response that sends it on.

    Each piece read is hashed, given to the spool, which writes it to an upload path in storage in
    a thread of its own (registry.proxy.spool), and given out; the last one only once the whole
    digest matched. The spool's thread then makes the blob durable and visible (its data moved
    into place, its row and link) while that last piece travels: the response ends without waiting
    for the disk, and the lease, held until then, keeps other pulls of the blob waiting for the
    stored copy. A write that fails after the client had every (verified) byte leaves nothing
    stored, and is logged. The request's slot (registry.proxy.slots) is let go once the upstream
    sent its last byte, or the fill ended otherwise.
    """

    def __init__(self, upstream: Upstream, name: str, digest: Digest, response: Any, lease: FetchLease,
                 drv: StorageDriver, slot: slots.Slot) -> None:
        length = response.headers.get("Content-Length", "")
        self.size: int | None = int(length) if length.isdigit() else None
        self._upstream, self._name, self._digest = upstream, name, digest
        self._response, self._lease, self._drv, self._slot = response, lease, drv, slot
        self._path = paths.upload_data(uuid.uuid4().hex)
        self._writer = drv.writer(self._path, append=True)
        self._spool = Spool(self._writer)
        self._hasher = new_hasher(digest.algorithm)
        self._pending = b""
        self._first: bytes | None = None
        self._received = self._sent = 0
        self._state = RECEIVING

    def start(self) -> None:
        """Receive the first piece to send before the answer begins (a blob of one piece whole,
        and checked): what fails until then is the request's error, an OCI error response."""
        self._first = self._read()

    def read(self, size: int = -1) -> bytes:
        if self._first is not None:
            out, self._first = self._first, None
        else:
            try:
                out = self._read()
            except (UpstreamError, StorageError) as exc:
                raise self._cut(exc) from None
        self._sent += len(out)
        return out

    def _read(self) -> bytes:
        try:
            while self._state == RECEIVING:
                piece = self._next()
                if not piece:
                    self._verify()
                    break
                out, self._pending = self._pending, piece
                if out:
                    return out
            if self._state == VERIFIED and not self._pending:
                self._state = STORING
                _storing(self, True)
                self._spool.close(self._stored)
        except BaseException:
            self._abandon()
            raise
        out, self._pending = self._pending, b""
        return out

    def complete(self) -> None:
        """Read the rest into storage without a client (a ranged request, a client gone)."""
        try:
            while self._state == RECEIVING:
                if not self._next():
                    self._verify()
            if self._state == VERIFIED:
                self._pending = b""
                self._spool.finish()
                self._commit()
        except BaseException:
            self._abandon()
            raise

    def close(self) -> None:
        if self._state not in (RECEIVING, VERIFIED):
            return
        try:
            self.complete()
        except Exception as exc:
            self._not_stored(exc)

    def _next(self) -> bytes:
        want = PIECE if self.size is None else min(PIECE, self.size - self._received)
        if want <= 0:
            return b""
        piece = self._upstream.read(self._response, want)
        if piece:
            self._spool.write(piece)
            self._hasher.update(piece)
            self._received += len(piece)
            self._lease.renew()
        return piece

    def _verify(self) -> None:
        mirror, digest = self._upstream.mirror, self._digest
        actual = f"{digest.algorithm}:{self._hasher.hexdigest()}"
        if actual != str(digest) or (self.size is not None and self._received != self.size):
            self._spool.finish()  # a write that failed first is the error to report
            metrics.UPSTREAM_ERRORS.labels(mirror.prefix, "digest_mismatch").inc()
            log.error("pull-through cache %s: the upstream %s sent %d bytes for blob %s of %s that hash to %s; "
                      "nothing was stored or served whole", mirror.prefix, mirror.upstream, self._received,
                      digest, self._name, actual)
            raise UpstreamFailed(f"the upstream {mirror.upstream} sent bytes that do not match blob {digest}")
        self._state = VERIFIED
        discard(self._response)
        self._slot.release()

    def _stored(self, error: BaseException | None) -> None:
        """In the spool's thread, once every piece is written (or one failed)."""
        try:
            if error is not None:
                raise error
            self._commit()
        except Exception as exc:
            self._abandon()
            self._not_stored(exc)
        finally:
            _storing(self, False)
            connection.close()  # this thread's own: nothing else would give it back

    def _commit(self) -> None:
        self._writer.seal()
        repository = ensure_repository(self._name)
        blobs.link(repository.id, self._name, self._digest, self._received, source=self._path)
        self._state = STORED
        self._cleanup()

    def _abandon(self) -> None:
        if self._state in (STORED, ABANDONED):
            return
        self._state = ABANDONED
        self._pending = b""
        try:
            self._spool.stop()
            self._writer.cancel()
            self._drv.abort(self._path, self._writer.state)
        except Exception:
            pass  # purge_expired removes upload data that no session knows
        self._cleanup()

    def _cleanup(self) -> None:
        try:
            delete_if_exists(self._drv, paths.upload_dir(self._path.split("/")[1]))
        finally:
            discard(self._response)
            self._slot.release()
            self._lease.release()

    def _cut(self, exc: UpstreamError | StorageError) -> Cut:
        why = exc.message if isinstance(exc, UpstreamError) else str(exc)
        log.warning("pull-through cache %s: the answer of blob %s of %s ended after %d of %s bytes: %s",
                    self._upstream.mirror.prefix, self._digest, self._name, self._sent, self.size, why)
        return Cut(errno.ECONNRESET, f"blob {self._digest} cut short: {why}")

    def _not_stored(self, exc: BaseException) -> None:
        # A domain error's message, a storage error's own text; anything else by its class only,
        # since a transport error's text may repeat the upstream URL.
        why = getattr(exc, "message", "") or (str(exc) if isinstance(exc, StorageError) else "") or type(exc).__name__
        log.warning("pull-through cache %s: blob %s was not stored: %s", self._upstream.mirror.prefix,
                    self._digest, why)


_STORING: set[Fill] = set()
_STORING_CHANGED = threading.Condition()


def _storing(fill: Fill, busy: bool) -> None:
    with _STORING_CHANGED:
        (_STORING.add if busy else _STORING.discard)(fill)
        _STORING_CHANGED.notify_all()


def wait_for_stores(timeout: float | None = None) -> bool:
    """Wait until every blob a response has finished sending is stored (or given up); False when
    ``timeout`` ran out first. A worker that exits lets them finish (atexit)."""
    with _STORING_CHANGED:
        return _STORING_CHANGED.wait_for(lambda: not _STORING, timeout)


atexit.register(wait_for_stores, LEASE.total_seconds())


RECEIVING, VERIFIED, STORING, STORED, ABANDONED = "receiving", "verified", "storing", "stored", "abandoned"
