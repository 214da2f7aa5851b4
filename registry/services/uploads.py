"""Blob upload sessions: start, append (streamed or chunked), status, finish, cancel.

A session may be continued by any worker of any replica, in any order, and survive a process dying
between two requests: its bytes are in storage and everything else is its database row, read and
leased in one statement at the start of each request (registry.queries). The row holds the offset,
the storage driver's resume state (an S3 multipart upload's parts) and the running hash, saved after
every chunk (registry.hashing), so the digest is checked at the end without reading the bytes back.
Where no saved hash fits (a digest algorithm without a resumable implementation, or a filesystem
upload whose file grew past the recorded offset in a crash), the stored bytes are hashed again.

On a filesystem the file is the truth about how many bytes arrived (a chunk cut off by a crash
keeps what reached the disk); elsewhere the row is.
"""
from __future__ import annotations

import hashlib
import logging
import os
import socket
import time
import uuid
from contextlib import contextmanager
from dataclasses import dataclass
from functools import lru_cache
from datetime import timedelta
from typing import Any, Iterator, Protocol

from django.db import transaction
from django.utils import timezone

from notifications import outbox
from registry import hashing, queries
from registry.digests import Digest, InvalidDigest, new_hasher
from registry.policies import quotas
from registry.services import blobs, lease_release
from registry.services.common import check_name, ensure_repository, parse_digest
from registry.services.exceptions import (
    DigestInvalid,
    QuotaExceeded,
    SizeInvalid,
    TooManyUploads,
    UploadBusy,
    UploadInvalid,
    UploadOutOfOrder,
    UploadUnknown,
)
from registry.storage import default_driver, paths
from registry.storage import driver as storage
from registry.storage.driver import StorageDriver
from regsite import db

log = logging.getLogger(__name__)
CHUNK_SIZE = 256 * 1024
# A request writing to a session renews its lease while the body streams in, so a replica that dies
# mid-chunk blocks the session for at most LEASE (and not at all on its own host: see _take_over).
LEASE = timedelta(seconds=60)
RENEW_EVERY = 15.0


class Readable(Protocol):
    def read(self, size: int = -1) -> bytes: ...


@dataclass(frozen=True)
class Body:
    """A request body to be streamed: ``length`` is None for chunked transfer encoding."""

    stream: Readable
    length: int | None


@dataclass(frozen=True)
class UploadStatus:
    id: str
    name: str
    offset: int


@dataclass
class _Open:
    """A leased session during one request."""

    session: queries.Session
    name: str
    owner: str
    offset: int
    hasher: Any  # a resumable hash, a hashlib hash, or None when the bytes must be hashed again
    storage_state: dict[str, Any]
    renewed: float = 0.0


def _expiry() -> timedelta:
    from django.conf import settings

    return timedelta(hours=settings.REGISTRY_UPLOAD_EXPIRY_HOURS)


def _new_hash(algorithm: str) -> Any:
    return hashing.new(algorithm) if hashing.available(algorithm) else new_hasher(algorithm)


def start(name: str, algorithm: str = "sha256", owner: str = "") -> UploadStatus:
    """A new session of ``owner`` (who counts against [registry] max_upload_sessions; empty: nobody)."""
    try:
        new_hasher(algorithm)
    except InvalidDigest as exc:
        raise DigestInvalid(str(exc)) from None
    drv = default_driver()
    _check_floor(drv)
    check_name(name)
    quotas.check_room(name)
    repository = ensure_repository(name)
    upload_id = uuid.uuid4().hex
    # A writer that commits nothing creates the session's (empty) file on a filesystem, and
    # nothing at all in an object store, where the first chunk starts the multipart upload.
    # A full device raises StorageFull, which the view answers with 507.
    drv.writer(paths.upload_data(upload_id), append=True).commit()
    queries.insert_session(upload_id, repository.id, algorithm, timezone.now(), owner)
    _check_session_cap(owner, upload_id, drv)
    return UploadStatus(upload_id, name, 0)


SESSION_CAP_RETRY_AFTER = 60


def _check_session_cap(owner: str, upload_id: str, drv: StorageDriver) -> None:
    """At most [registry] max_upload_sessions live sessions per owner: one more is undone and refused.

    Counted after the new session is recorded, so that of many requests racing for the last places
    none passes the limit (they can only fall short of it, and the next request fills it)."""
    from django.conf import settings

    limit = settings.REGISTRY_MAX_UPLOAD_SESSIONS
    if not owner or not limit or queries.count_live_sessions(owner, timezone.now() - _expiry()) <= limit:
        return
    _discard(upload_id, {}, drv)
    raise TooManyUploads(f"{owner.partition(':')[2]} already holds {limit} upload sessions "
                         "([registry] max_upload_sessions): finish or cancel one, or wait for idle ones to "
                         f"expire ({settings.REGISTRY_UPLOAD_EXPIRY_HOURS} h)", SESSION_CAP_RETRY_AFTER)


def _check_floor(drv: StorageDriver) -> None:
    """No new upload below [storage] min_free_bytes: what is stored stays pullable, and sessions in
    progress may finish, but nothing new starts filling the last of the device."""
    from django.conf import settings

    free = drv.free_bytes()
    if free is not None and free < settings.REGISTRY_MIN_FREE_BYTES:
        raise storage.StorageFull(f"the storage device has {free} bytes free, below the floor of "
                                  f"{settings.REGISTRY_MIN_FREE_BYTES} ([storage] min_free_bytes): "
                                  "no new uploads until space is freed")


@contextmanager
def _leased(name: str, upload_id: str, drv: StorageDriver, closing: bool = False) -> Iterator[_Open]:
    """The session, leased to this request until the block ends (saved, or let go unchanged). Busy
    with another request, it refuses a chunk (416: one chunk per offset) and asks a closing PUT to
    retry (503: the other may be an attempt of the same PUT whose lease is being given back)."""
    check_name(name)
    unknown = UploadUnknown(f"upload {upload_id[:64]!r} unknown to repository {name!r}")
    try:
        data_path = paths.upload_data(upload_id)
    except ValueError:
        raise unknown from None
    owner, now = _owner(), timezone.now()
    session = queries.acquire_session(upload_id, name, owner, now, now + LEASE, now - _expiry())
    if session is None:
        busy = queries.read_session(upload_id, name, now - _expiry())
        if busy is None:
            raise unknown
        session = _take_over(busy, upload_id, name, owner, now)
        if session is None and closing:
            raise UploadBusy("another request of this upload is in progress; send the PUT again")
        if session is None:
            raise UploadOutOfOrder("another chunk of this upload is in progress", busy.offset)
    if not session.live:
        _discard(upload_id, session.storage_state, drv)
        raise UploadUnknown(f"upload {upload_id} expired")
    opened = _Open(session, name, owner, session.offset, None, session.storage_state, time.monotonic())
    try:
        if not drv.remote:
            opened.offset = _file_size(drv, data_path, upload_id)
        opened.hasher = _resume_hash(session, opened.offset)
        yield opened
    finally:
        if opened.owner:  # not saved: let go without changing anything (later, if the database is away)
            lease_release.release(upload_id, owner)


def _take_over(busy: queries.Session, upload_id: str, name: str, owner: str, now: Any) -> queries.Session | None:
    """A lease whose holder was a process of this host that no longer runs (a crash mid-chunk), or a
    request of this process that could not give it back (lease_release), is taken over at once
    instead of when it runs out; a holder elsewhere is waited for."""
    if not (holder_is_dead(busy.lease_owner) or lease_release.abandoned(busy.lease_owner)):
        return None
    return queries.take_over_session(upload_id, name, busy.lease_owner, owner, now + LEASE, now - _expiry())


def _owner() -> str:
    """A lease holder's name: random, then this process's id and host (see holder_is_dead)."""
    return f"{uuid.uuid4().hex[:12]}.{os.getpid()}.{_host()}"


@lru_cache(maxsize=1)
def _host() -> str:
    # The host name tells containers apart; the boot id, one boot of a machine from the next.
    try:
        with open("/proc/sys/kernel/random/boot_id") as fh:
            boot = fh.read().strip()
    except OSError:
        boot = ""
    return hashlib.sha256(f"{socket.gethostname()}/{boot}".encode()).hexdigest()[:10]


def holder_is_dead(owner: str) -> bool:
    parts = owner.split(".")
    if len(parts) != 3 or parts[2] != _host() or not parts[1].isdigit():
        return False
    pid = int(parts[1])
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            # A killed worker whose parent died too stays a zombie until init reaps it.
            return fh.read().rsplit(b")", 1)[1].split()[0] == b"Z"
    except FileNotFoundError:
        return True
    except OSError:
        pass
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except OSError:
        return False
    return False


def _file_size(drv: StorageDriver, data_path: str, upload_id: str) -> int:
    try:
        return drv.stat(data_path).size
    except storage.PathNotFound:
        queries.delete_session(upload_id)
        raise UploadUnknown(f"upload {upload_id} lost its data") from None


def _resume_hash(session: queries.Session, offset: int) -> Any:
    if offset == 0:
        return _new_hash(session.algorithm)
    if session.hash_state is None or offset != session.offset:
        return None
    try:
        return hashing.resume(session.algorithm, session.hash_state, offset)
    except hashing.StateUnavailable:
        return None


def _save(opened: _Open) -> None:
    state = opened.hasher.state() if isinstance(opened.hasher, hashing.ResumableHash) else None
    if not queries.save_session(opened.session.id, opened.owner, opened.offset, state, opened.storage_state,
                                timezone.now()):
        raise UploadOutOfOrder("the upload was taken over by another request", opened.offset)
    opened.owner = ""


def status(name: str, upload_id: str) -> UploadStatus:
    """Where the upload is, without taking its lease: a chunk may be arriving meanwhile."""
    check_name(name)
    drv = default_driver()
    try:
        data_path = paths.upload_data(upload_id)
    except ValueError:
        raise UploadUnknown(f"upload {upload_id[:64]!r} unknown to repository {name!r}") from None
    session = queries.read_session(upload_id, name, timezone.now() - _expiry())
    if session is None or not session.live:
        raise UploadUnknown(f"upload {upload_id} unknown to repository {name!r}")
    offset = session.offset if drv.remote else _file_size(drv, data_path, upload_id)
    return UploadStatus(upload_id, name, offset)


def _stream_into(opened: _Open, body: Body, drv: StorageDriver, content_range: tuple[int, int] | None,
                 seal: bool = False) -> None:
    """Append ``body``; on any failure the stored bytes are cut back to where they were. With
    ``seal`` the upload is finished by the same writer (an object store then stores the last bytes
    once, as the last part, instead of as a tail it would copy again)."""
    offset = opened.offset
    if content_range is not None:
        begin, end = content_range
        if begin != offset:
            raise UploadOutOfOrder(f"chunk starts at {begin} but the upload is at {offset}", offset)
        if body.length is not None and end - begin + 1 != body.length:
            raise SizeInvalid(f"Content-Range {begin}-{end} does not match Content-Length {body.length}")
    try:
        writer = drv.writer(paths.upload_data(opened.session.id), append=True, state=opened.storage_state)
    except storage.WriterBusy:
        raise UploadOutOfOrder("another chunk of this upload is in progress", offset) from None
    if writer.size != offset:
        writer.cancel()
        raise UploadOutOfOrder("the stored upload does not end where its session says", writer.size)
    db.release()  # the body may take minutes to arrive
    received = 0
    try:
        remaining = body.length
        while remaining is None or remaining > 0:
            want = CHUNK_SIZE if remaining is None else min(CHUNK_SIZE, remaining)
            try:
                chunk = body.stream.read(want)
            except OSError as exc:
                raise UploadInvalid(f"client stopped sending the body: {exc}") from None
            if not chunk:
                break
            writer.write(chunk)
            if opened.hasher is not None:
                opened.hasher.update(chunk)
            received += len(chunk)
            if remaining is not None:
                remaining -= len(chunk)
            _renew(opened)
        if body.length is not None and received != body.length:
            raise SizeInvalid(f"received {received} bytes, Content-Length said {body.length}")
        writer.seal() if seal else writer.commit()
    except storage.PathNotFound:
        writer.cancel()
        if drv.remote and _exists(drv, paths.upload_data(opened.session.id)):
            # What this writer resumes (a tail, a multipart upload) went when a closing PUT sealed the
            # upload, and that PUT's commit failed (a failover): the upload takes no more bytes.
            raise UploadInvalid("this upload was closed by a PUT whose commit failed: send that PUT again, "
                                "or start a new upload") from None
        raise
    except BaseException:  # StorageFull too: the view answers it with 507
        writer.cancel()
        raise
    opened.offset = offset + received
    opened.storage_state = writer.state


def _exists(drv: StorageDriver, path: str) -> bool:
    try:
        drv.stat(path)
    except storage.PathNotFound:
        return False
    return True


def _renew(opened: _Open) -> None:
    if time.monotonic() - opened.renewed < RENEW_EVERY:
        return
    opened.renewed = time.monotonic()
    if not queries.renew_session(opened.session.id, opened.owner, timezone.now() + LEASE):
        raise UploadOutOfOrder("the upload was taken over by another request", opened.offset)
    db.release()


def append(
    name: str,
    upload_id: str,
    body: Body,
    content_range: tuple[int, int] | None = None,
) -> UploadStatus:
    drv = default_driver()
    with _leased(name, upload_id, drv) as opened:
        _stream_into(opened, body, drv, content_range)
        _save(opened)
        return UploadStatus(upload_id, name, opened.offset)


def _rehash(upload_id: str, algorithm: str, drv: StorageDriver) -> str:
    hasher = new_hasher(algorithm)
    with drv.open(paths.upload_data(upload_id)) as fh:
        while chunk := fh.read(1024 * 1024):
            hasher.update(chunk)
    return hasher.hexdigest()


def finish(
    name: str,
    upload_id: str,
    digest_text: str,
    body: Body | None = None,
    content_range: tuple[int, int] | None = None,
) -> blobs.BlobInfo:
    """Append the optional last chunk, verify the digest, and make the blob visible atomically."""
    digest = parse_digest(digest_text)
    drv = default_driver()
    with _leased(name, upload_id, drv, closing=True) as opened:
        if body is not None and (body.length is None or body.length > 0):
            _stream_into(opened, body, drv, content_range, seal=True)
        else:
            try:
                drv.writer(paths.upload_data(upload_id), append=True, state=opened.storage_state).seal()
            except storage.WriterBusy:
                raise UploadOutOfOrder("a chunk of this upload is still being written", opened.offset) from None
        usable = opened.hasher is not None and opened.hasher.name == digest.algorithm
        actual = opened.hasher.hexdigest() if usable else _rehash(upload_id, digest.algorithm, drv)
        if actual != digest.hex:
            _discard(upload_id, {}, drv)
            opened.owner = ""
            raise DigestInvalid(
                f"digest {digest} does not match uploaded content ({digest.algorithm}:{actual})",
                {"digest": str(digest)},
            )
        info = _commit(opened.session.repository_id, name, digest, opened.offset, upload_id, drv)
        opened.owner = ""  # the row went with the commit
        return info


def _commit(repository_id: int, name: str, digest: Digest, size: int, upload_id: str,
            drv: StorageDriver) -> blobs.BlobInfo:
    # blobs.link puts the data into place (a move, or on an object store a copy), when it is not
    # stored already, under the digest's lock with the row that records it: a crash before the
    # commit leaves data without a row, which the collector removes, never a row without data.
    try:
        with transaction.atomic():
            info = blobs.link(repository_id, name, digest, size, source=paths.upload_data(upload_id))
            queries.delete_session(upload_id)
            outbox.blob_pushed(name, info.digest, info.size)
    except QuotaExceeded:
        _discard(upload_id, {}, drv)  # refused for good: the client must not resume it
        raise
    try:
        _remove_data(upload_id, drv)
    except storage.StorageError as exc:
        # The blob is pushed: the store failing now must not answer 503 for it (whose retry would
        # find no session). What is left of the upload has no session: purge_expired removes it.
        log.warning("upload %s: removing its data after the commit failed: %s", upload_id, exc)
    return info


def monolithic(name: str, digest_text: str, body: Body, owner: str = "") -> blobs.BlobInfo:
    """POST ?digest=: the whole blob in one request."""
    digest = parse_digest(digest_text)
    session = start(name, digest.algorithm, owner)
    try:
        return finish(name, session.id, str(digest), body)
    except BaseException:
        _discard(session.id, {}, default_driver())
        raise


def cancel(name: str, upload_id: str) -> None:
    drv = default_driver()
    with _leased(name, upload_id, drv) as opened:
        _discard(upload_id, opened.storage_state, drv)
        opened.owner = ""


def _discard(upload_id: str, storage_state: dict[str, Any], drv: StorageDriver) -> None:
    """Forget the session and abort what it stored (an S3 multipart upload, its tails)."""
    if not storage_state:
        storage_state = queries.session_storage_state(upload_id)
    queries.delete_session(upload_id)
    try:
        drv.abort(paths.upload_data(upload_id), storage_state)
    except storage.StorageError:
        pass  # purge_expired finds what is left once the session is gone
    _remove_data(upload_id, drv)


def _remove_data(upload_id: str, drv: StorageDriver) -> None:
    storage.delete_if_exists(drv, paths.upload_dir(upload_id))


def purge_expired(
    older_than: timedelta | None = None, dry_run: bool = False
) -> int:
    """Remove sessions idle for longer than the expiry, and upload data without a session.

    Returns how many were removed (with ``dry_run``, how many would be).
    """
    drv = default_driver()
    cutoff = timezone.now() - (older_than if older_than is not None else _expiry())
    removed = 0
    for upload_id, state in queries.idle_sessions(cutoff):
        if dry_run:
            removed += 1
        elif queries.delete_idle_session(upload_id, cutoff):
            _discard(upload_id, state, drv)
            removed += 1
    removed += _purge_orphans(drv, cutoff.timestamp(), dry_run)
    return removed


def _purge_orphans(drv: StorageDriver, cutoff: float, dry_run: bool) -> int:
    """Upload data (and, in an object store, multipart uploads) that no session knows."""
    newest: dict[str, float] = {}
    for info in drv.walk(paths.UPLOADS):
        parts = info.path.split("/")
        if len(parts) >= 3:
            newest[parts[1]] = max(newest.get(parts[1], 0.0), info.mtime)
    old = {upload_id for upload_id, mtime in newest.items() if mtime < cutoff}
    known = queries.known_sessions(old)
    removed = 0
    for upload_id in sorted(old - known):
        try:
            paths.upload_dir(upload_id)
        except ValueError:
            continue
        if not dry_run:
            _remove_data(upload_id, drv)
        removed += 1
    stale = getattr(drv, "abort_stale_uploads", None)
    if stale is not None and not dry_run:
        removed += stale(paths.UPLOADS, queries.multipart_upload_ids())
    return removed
