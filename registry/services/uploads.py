"""Blob upload sessions: start, append (streamed or chunked), status, finish, cancel.

The session's bytes live in storage and its row in the database, so any worker can continue it and
it survives a restart; its offset is the size of the stored bytes. Data is hashed while it streams
in. The running hash of a session is kept in this process only as a shortcut: when a later request
of the same session lands in another worker (or after a restart), the bytes are hashed again from
storage, so correctness never depends on which worker answers.
"""
from __future__ import annotations

import threading
import uuid
from collections import OrderedDict
from dataclasses import dataclass
from datetime import timedelta
from functools import lru_cache
from typing import Protocol

from django.db import connection, transaction
from django.utils import timezone

from registry.digests import Digest, InvalidDigest, new_hasher
from registry.models import Repository, Upload
from registry.services import blobs
from registry.services.common import check_name, ensure_repository, parse_digest
from registry.services.exceptions import (
    DigestInvalid,
    SizeInvalid,
    UploadInvalid,
    UploadOutOfOrder,
    UploadUnknown,
)
from registry.storage import default_driver, paths
from registry.storage import driver as storage
from registry.storage.driver import StorageDriver

CHUNK_SIZE = 1024 * 1024
_HASH_CACHE_SIZE = 256


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


class _HashCache:
    """Process-local running hashes: upload id -> (offset, algorithm, hasher)."""

    def __init__(self) -> None:
        self._items: OrderedDict[str, tuple[int, str, object]] = OrderedDict()
        self._lock = threading.Lock()

    def take(self, upload_id: str, offset: int, algorithm: str):  # type: ignore[no-untyped-def]
        with self._lock:
            item = self._items.pop(upload_id, None)
        if item and item[0] == offset and item[1] == algorithm:
            return item[2]
        return None

    def put(self, upload_id: str, offset: int, algorithm: str, hasher: object) -> None:
        with self._lock:
            self._items[upload_id] = (offset, algorithm, hasher)
            while len(self._items) > _HASH_CACHE_SIZE:
                self._items.popitem(last=False)

    def drop(self, upload_id: str) -> None:
        with self._lock:
            self._items.pop(upload_id, None)


_hashes = _HashCache()


def _expiry() -> timedelta:
    from django.conf import settings

    return timedelta(hours=settings.REGISTRY_UPLOAD_EXPIRY_HOURS)


def _driver(driver: StorageDriver | None) -> StorageDriver:
    return driver or default_driver()


@lru_cache(maxsize=1)
def _insert_session_sql() -> str:
    # Built once, like the lookup below: the ORM's INSERT compile was 8% of a small push's CPU.
    return (f"INSERT INTO {connection.ops.quote_name(Upload._meta.db_table)} "
            "(id, repository_id, algorithm, created_at, updated_at) VALUES (%s, %s, %s, %s, %s)")


def start(name: str, algorithm: str = "sha256", driver: StorageDriver | None = None) -> UploadStatus:
    try:
        new_hasher(algorithm)
    except InvalidDigest as exc:
        raise DigestInvalid(str(exc)) from None
    repository = ensure_repository(name)
    upload_id = uuid.uuid4().hex
    drv = _driver(driver)
    # Appending nothing creates the empty file without an fsync, which could not make its
    # directory entry durable anyway: a session whose file is lost reads as unknown.
    drv.writer(paths.upload_data(upload_id), append=True).commit()
    now = connection.ops.adapt_datetimefield_value(timezone.now())
    with connection.cursor() as cursor:
        cursor.execute(_insert_session_sql(), [upload_id, repository.pk, algorithm, now, now])
    _hashes.put(upload_id, 0, algorithm, new_hasher(algorithm))
    return UploadStatus(upload_id, name, 0)


@lru_cache(maxsize=1)
def _session_sql() -> str:
    # Built once: compiling the session lookup with the ORM was a sixth of a small push's CPU.
    q = connection.ops.quote_name
    return (f"SELECT u.algorithm, u.repository_id, u.updated_at >= %s FROM {q(Upload._meta.db_table)} u "
            f"JOIN {q(Repository._meta.db_table)} r ON r.id = u.repository_id WHERE u.id = %s AND r.name = %s")


def _session(name: str, upload_id: str, driver: StorageDriver) -> tuple[Upload, int]:
    check_name(name)
    unknown = UploadUnknown(f"upload {upload_id[:64]!r} unknown to repository {name!r}")
    try:
        data_path = paths.upload_data(upload_id)
    except ValueError:
        raise unknown from None
    cutoff = connection.ops.adapt_datetimefield_value(timezone.now() - _expiry())
    with connection.cursor() as cursor:
        cursor.execute(_session_sql(), [cutoff, upload_id, name])
        row = cursor.fetchone()
    if row is None:
        raise unknown
    algorithm, repository_id, live = row
    if not live:
        _discard(upload_id, driver)
        raise UploadUnknown(f"upload {upload_id} expired")
    upload = Upload.from_db(connection.alias, ["id", "repository_id", "algorithm"],
                            [upload_id, repository_id, algorithm])
    upload.repository = Repository.from_db(connection.alias, ["id", "name"], [repository_id, name])
    try:
        offset = driver.stat(data_path).size
    except storage.PathNotFound:
        Upload.objects.filter(id=upload_id).delete()
        raise unknown from None
    return upload, offset


def status(name: str, upload_id: str, driver: StorageDriver | None = None) -> UploadStatus:
    _, offset = _session(name, upload_id, _driver(driver))
    return UploadStatus(upload_id, name, offset)


def _stream_into(
    upload: Upload, offset: int, body: Body, drv: StorageDriver, content_range: tuple[int, int] | None
) -> int:
    """Append ``body`` to the session's data; on any failure the data is cut back to ``offset``."""
    if content_range is not None:
        start, end = content_range
        if start != offset:
            raise UploadOutOfOrder(f"chunk starts at {start} but the upload is at {offset}", offset)
        if body.length is not None and end - start + 1 != body.length:
            raise SizeInvalid(f"Content-Range {start}-{end} does not match Content-Length {body.length}")
    try:
        writer = drv.writer(paths.upload_data(upload.id), append=True)
    except storage.WriterBusy:
        raise UploadOutOfOrder("another chunk of this upload is in progress", offset) from None
    if writer.size != offset:  # a chunk landed between our stat and our lock
        writer.cancel()
        raise UploadOutOfOrder("another chunk of this upload landed first", writer.size)
    hasher = _hashes.take(upload.id, offset, upload.algorithm)
    if hasher is None and offset == 0:
        hasher = new_hasher(upload.algorithm)
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
            if hasher is not None:
                hasher.update(chunk)
            received += len(chunk)
            if remaining is not None:
                remaining -= len(chunk)
        if body.length is not None and received != body.length:
            raise SizeInvalid(f"received {received} bytes, Content-Length said {body.length}")
        writer.commit()
    except BaseException:  # StorageFull too: the view answers it with 507
        writer.cancel()
        raise
    new_offset = offset + received
    if hasher is not None:
        _hashes.put(upload.id, new_offset, upload.algorithm, hasher)
    return new_offset


def append(
    name: str,
    upload_id: str,
    body: Body,
    content_range: tuple[int, int] | None = None,
    driver: StorageDriver | None = None,
) -> UploadStatus:
    drv = _driver(driver)
    upload, offset = _session(name, upload_id, drv)
    new_offset = _stream_into(upload, offset, body, drv, content_range)
    Upload.objects.filter(id=upload_id).update(updated_at=timezone.now())
    return UploadStatus(upload_id, name, new_offset)


def _rehash(upload_id: str, algorithm: str, drv: StorageDriver) -> str:
    hasher = new_hasher(algorithm)
    with drv.open(paths.upload_data(upload_id)) as fh:
        while chunk := fh.read(CHUNK_SIZE):
            hasher.update(chunk)
    return hasher.hexdigest()


def finish(
    name: str,
    upload_id: str,
    digest_text: str,
    body: Body | None = None,
    content_range: tuple[int, int] | None = None,
    driver: StorageDriver | None = None,
) -> blobs.BlobInfo:
    """Append the optional last chunk, verify the digest, and make the blob visible atomically."""
    digest = parse_digest(digest_text)
    drv = _driver(driver)
    upload, offset = _session(name, upload_id, drv)
    if body is not None and (body.length is None or body.length > 0):
        offset = _stream_into(upload, offset, body, drv, content_range)
    guard = _hold(upload_id, offset, drv)
    try:
        hasher = _hashes.take(upload_id, offset, digest.algorithm)
        actual = hasher.hexdigest() if hasher is not None else _rehash(upload_id, digest.algorithm, drv)
        if actual != digest.hex:
            _discard(upload_id, drv)
            raise DigestInvalid(
                f"digest {digest} does not match uploaded content ({digest.algorithm}:{actual})",
                {"digest": str(digest)},
            )
        return _commit(upload, digest, offset, drv)
    finally:
        guard.commit()  # nothing was written through it: this only releases the lock


def _hold(upload_id: str, offset: int, drv: StorageDriver) -> storage.Writer:
    """Lock the session's data from verification to commit.

    A chunk appended in between (a PATCH racing the closing PUT, in any worker) would otherwise
    land in the blob after its digest was checked, and stay there under that digest.
    """
    try:
        writer = drv.writer(paths.upload_data(upload_id), append=True)
    except storage.WriterBusy:
        raise UploadOutOfOrder("a chunk of this upload is still being written", offset) from None
    size = writer.size
    if size != offset:
        writer.commit()
        raise UploadOutOfOrder("a chunk of this upload landed while it was being completed", size)
    return writer


def _commit(upload: Upload, digest: Digest, size: int, drv: StorageDriver) -> blobs.BlobInfo:
    # blobs.link moves the data into place, when it is not stored already, inside the transaction
    # that records the row: a crash before the commit leaves data without a row, which the collector
    # removes, never a row without data; and a collection deleting a stored copy cannot interleave.
    with transaction.atomic():
        blob = blobs.link(upload.repository, digest, size, drv, source=paths.upload_data(upload.id))
        Upload.objects.filter(id=upload.id).delete()
    _remove_data(upload.id, drv)  # the row went with the transaction: no second write transaction
    return blobs.BlobInfo(blob.digest, blob.size)


def monolithic(name: str, digest_text: str, body: Body, driver: StorageDriver | None = None) -> blobs.BlobInfo:
    """POST ?digest=: the whole blob in one request."""
    digest = parse_digest(digest_text)
    session = start(name, digest.algorithm, driver)
    try:
        return finish(name, session.id, str(digest), body, driver=driver)
    except BaseException:
        _discard(session.id, _driver(driver))
        raise


def cancel(name: str, upload_id: str, driver: StorageDriver | None = None) -> None:
    drv = _driver(driver)
    _session(name, upload_id, drv)
    _discard(upload_id, drv)


def _discard(upload_id: str, drv: StorageDriver) -> None:
    Upload.objects.filter(id=upload_id).delete()
    _remove_data(upload_id, drv)


def _remove_data(upload_id: str, drv: StorageDriver) -> None:
    _hashes.drop(upload_id)
    storage.delete_if_exists(drv, paths.upload_dir(upload_id))


def purge_expired(
    older_than: timedelta | None = None, driver: StorageDriver | None = None, dry_run: bool = False
) -> int:
    """Remove sessions idle for longer than the expiry, and upload data without a session.

    Returns how many were removed (with ``dry_run``, how many would be).
    """
    drv = _driver(driver)
    cutoff = timezone.now() - (older_than if older_than is not None else _expiry())
    removed = 0
    for upload_id in list(Upload.objects.filter(updated_at__lt=cutoff).values_list("id", flat=True)):
        if dry_run:
            removed += 1
        # Deleted only if still idle: a chunk may have arrived since the query.
        elif Upload.objects.filter(id=upload_id, updated_at__lt=cutoff).delete()[0]:
            _discard(upload_id, drv)
            removed += 1
    try:
        on_disk = drv.list(paths.UPLOADS)
    except storage.PathNotFound:
        on_disk = []
    known = set(Upload.objects.filter(id__in=on_disk).values_list("id", flat=True))
    for upload_id in on_disk:
        if upload_id in known:
            continue
        try:
            info = drv.stat(paths.upload_dir(upload_id))
        except (storage.PathNotFound, ValueError):
            continue
        if info.mtime < cutoff.timestamp():
            if not dry_run:
                _discard(upload_id, drv)
            removed += 1
    return removed
