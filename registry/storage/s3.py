"""S3 storage driver (AWS S3, Ceph RGW, MinIO and other S3-compatible stores), on boto3.

Paths map to keys under ``prefix`` in one bucket. A plain write is one PUT (atomic in S3); a move is a
server-side copy (multipart copy above 5 GiB) and a delete, never a download and upload again.

An upload session is written through ``S3Writer``, a multipart upload whose progress is the writer's
``state`` (the upload id, the parts uploaded, the size of a small tail object): the caller keeps that
state in the database between requests, so any replica can continue the session. S3 parts must be at
least 5 MiB except the last one; bytes are sent as parts of ``part_size`` as they arrive, and a
request that ends with less than 5 MiB left over stores it as a tail object, which the next request
prepends to its first part (the only time uploaded bytes are read back, at most 5 MiB) and which
sealing the upload turns into the last part by a server-side copy. Throttling (``SlowDown``, 503)
and transient errors are retried with exponential backoff (botocore's standard retry mode).

A store that stalls (takes the connection and never answers), resets or drops connections fails a
request within a deadline, not minutes: each attempt may take ``timeout`` seconds to connect and
then ``timeout`` seconds between bytes, and there are ``max_attempts`` of them (the registry answers
503 with Retry-After). Server-side copies and the completion of a multipart upload, which a store
may answer only when done with gigabytes, wait ``copy_timeout`` between bytes instead.
"""
from __future__ import annotations

import io
import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, BinaryIO, Callable, Iterator, Mapping

import boto3
from botocore import handlers
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError

from registry.storage.driver import FileInfo, InvalidPath, PathNotFound, StorageError, check_path

if TYPE_CHECKING:  # boto3-stubs, a test dependency: annotations only
    from mypy_boto3_s3.type_defs import (
        CompletedPartTypeDef, CopySourceTypeDef, GetObjectRequestTypeDef, ObjectIdentifierTypeDef)

MIN_PART = 5 * 1024 * 1024
MAX_COPY = 5 * 1024 * 1024 * 1024  # the largest object one CopyObject (or UploadPartCopy) may copy
COPY_PART = 1024 * 1024 * 1024
DEFAULT_PART = 8 * 1024 * 1024
DELETE_BATCH = 1000
_NOT_FOUND = {"404", "NoSuchKey", "NotFound", "NoSuchUpload"}
_CREDENTIALS_EXPIRED = {"ExpiredToken", "InvalidToken", "TokenRefreshRequired"}
_PROBE = b"ready\n"


class CheckFailed(StorageError):
    """The start-up check of the bucket failed; ``setting`` is what the operator must change:
    ``bucket``, ``access_key``, ``secret_key`` or ``endpoint``."""

    def __init__(self, message: str, setting: str) -> None:
        super().__init__(message)
        self.setting = setting


@dataclass
class Counters:
    """Requests that read stored bytes back, for the metrics and the tests that prove there are none."""

    gets: int = 0
    bytes_read: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def read(self, size: int) -> None:
        with self.lock:
            self.gets += 1
            self.bytes_read += size


def _missing(exc: ClientError) -> bool:
    error = exc.response.get("Error", {})
    if error.get("Code") == "NoSuchBucket":
        # A 404 too, but of the store, not of the path: taken for a missing file, it would make
        # `scrub --repair` forget every blob of a mistyped or deleted bucket.
        return False
    return str(error.get("Code")) in _NOT_FOUND or exc.response.get("ResponseMetadata", {}).get(
        "HTTPStatusCode") == 404


def _failure(exc: Exception, path: str) -> StorageError:
    if isinstance(exc, ClientError):
        if _missing(exc):
            return PathNotFound(path)
        error = exc.response.get("Error", {})
        return StorageError(f"S3 {error.get('Code', 'error')} on {path}: {error.get('Message') or ''}".strip())
    return StorageError(f"S3 request failed on {path}: {exc}")


class S3Driver:
    remote = True

    def __init__(self, bucket: str, prefix: str = "", endpoint: str | None = None, region: str = "us-east-1",
                 access_key: str | None = None, secret_key: str | None = None,
                 redirect_endpoint: str | None = None, part_size: int = DEFAULT_PART,
                 max_attempts: int = 3, pool_size: int = 64, timeout: float = 10,
                 copy_timeout: float = 300) -> None:
        if part_size < MIN_PART:
            raise ValueError(f"part_size must be at least {MIN_PART} bytes")
        self.bucket = bucket
        self.prefix = prefix.strip("/") + "/" if prefix.strip("/") else ""
        self.part_size = part_size
        self.counters = Counters()
        # total_max_attempts counts every attempt (botocore's max_attempts counts the retries only).
        config = Config(retries={"mode": "standard", "total_max_attempts": max_attempts},
                        max_pool_connections=pool_size, connect_timeout=timeout, read_timeout=timeout,
                        s3={"addressing_style": "path" if endpoint else "auto"},
                        signature_version="s3v4")
        # No access key: boto3's own chain (environment, instance role) finds the credentials.
        key_id, secret = (access_key, secret_key) if access_key else (None, None)
        session = boto3.session.Session()
        self.client = session.client("s3", endpoint_url=endpoint or None, region_name=region, config=config,
                                     aws_access_key_id=key_id, aws_secret_access_key=secret)
        # botocore asks for "100 Continue" before every PUT body and holds the body until the answer,
        # a pause that made up most of a small push against RGW (3a05d2a has the figures): bodies are
        # sent at once, as the Go SDK does below 2 MiB.
        for operation in ("PutObject", "UploadPart"):
            self.client.meta.events.unregister(f"before-call.s3.{operation}", handlers.add_expect_header)
        self.copier = session.client("s3", endpoint_url=endpoint or None, region_name=region,
                                     config=config.merge(Config(read_timeout=copy_timeout)),
                                     aws_access_key_id=key_id, aws_secret_access_key=secret)
        # Presigned URLs name the host clients reach the store by, which may not be ours.
        self.signer = self.client if not redirect_endpoint else session.client(
            "s3", endpoint_url=redirect_endpoint, region_name=region, config=config,
            aws_access_key_id=key_id, aws_secret_access_key=secret)

    # -- keys ----------------------------------------------------------------------------------

    def key(self, path: str) -> str:
        return self.prefix + check_path(path)

    def _path(self, key: str) -> str:
        return key[len(self.prefix):]

    # -- whole objects -------------------------------------------------------------------------

    def read(self, path: str) -> bytes:
        try:
            body = self.client.get_object(Bucket=self.bucket, Key=self.key(path))["Body"]
            data: bytes = body.read()
        except (ClientError, BotoCoreError) as exc:
            raise _failure(exc, path) from exc
        self.counters.read(len(data))
        return data

    def write(self, path: str, data: bytes) -> None:
        try:
            self.client.put_object(Bucket=self.bucket, Key=self.key(path), Body=data)
        except (ClientError, BotoCoreError) as exc:
            raise _failure(exc, path) from exc

    def open(self, path: str, offset: int = 0) -> BinaryIO:
        """A reader at ``offset``. The GET is sent on the first read, from wherever the reader was
        seeked to by then, so a ranged pull costs one request for just the range."""
        reader = _Reader(self, path)
        reader.seek(offset)
        return reader  # type: ignore[return-value]  # typing.BinaryIO is nominal: no RawIOBase is one

    def _get(self, path: str, offset: int) -> Any:
        request: GetObjectRequestTypeDef = {"Bucket": self.bucket, "Key": self.key(path)}
        if offset:
            request["Range"] = f"bytes={offset}-"
        try:
            response = self.client.get_object(**request)
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") == "InvalidRange":
                return None  # at or past the end of the object: nothing to read
            raise _failure(exc, path) from exc
        except BotoCoreError as exc:
            raise _failure(exc, path) from exc
        self.counters.read(0)
        return response["Body"]

    def stat(self, path: str) -> FileInfo:
        try:
            head = self.client.head_object(Bucket=self.bucket, Key=self.key(path))
            return FileInfo(path, head["ContentLength"], head["LastModified"].timestamp(), False)
        except ClientError as exc:
            if not _missing(exc):
                raise _failure(exc, path) from exc
        except BotoCoreError as exc:
            raise _failure(exc, path) from exc
        for info in self._objects(path, limit=1):
            return FileInfo(path, 0, info.mtime, True)
        raise PathNotFound(path)

    def list(self, path: str) -> list[str]:
        prefix = self.key(path) + "/"
        names: set[str] = set()
        try:
            pages = self.client.get_paginator("list_objects_v2").paginate(
                Bucket=self.bucket, Prefix=prefix, Delimiter="/")
            for page in pages:
                names.update(p["Prefix"][len(prefix):].rstrip("/") for p in page.get("CommonPrefixes", []))
                names.update(o["Key"][len(prefix):] for o in page.get("Contents", []))
        except (ClientError, BotoCoreError) as exc:
            raise _failure(exc, path) from exc
        if not names:
            raise PathNotFound(path)
        return sorted(names)

    def walk(self, path: str) -> Iterator[FileInfo]:
        yield from self._objects(path)

    def _objects(self, path: str, limit: int | None = None) -> Iterator[FileInfo]:
        try:
            pages = self.client.get_paginator("list_objects_v2").paginate(
                Bucket=self.bucket, Prefix=self.key(path) + "/", PaginationConfig={"MaxItems": limit} if limit else {})
            for page in pages:
                for item in page.get("Contents", []):
                    yield FileInfo(self._path(item["Key"]), item["Size"], item["LastModified"].timestamp(), False)
        except (ClientError, BotoCoreError) as exc:
            raise _failure(exc, path) from exc

    def copy(self, source: str, dest: str) -> None:
        """Server-side: the bytes never pass through the registry."""
        try:
            self.copier.copy_object(Bucket=self.bucket, Key=self.key(dest),
                                    CopySource={"Bucket": self.bucket, "Key": self.key(source)})
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") != "InvalidRequest":
                raise _failure(exc, source) from exc
            # Above 5 GiB one CopyObject may not copy it: ranges of a multipart upload do.
            self._copy(self.key(source), self.key(dest), self.stat(source).size, source)
        except BotoCoreError as exc:
            raise _failure(exc, source) from exc

    def move(self, source: str, dest: str) -> None:
        """Server-side copy, then delete."""
        self.copy(source, dest)
        try:
            self.client.delete_object(Bucket=self.bucket, Key=self.key(source))
        except (ClientError, BotoCoreError) as exc:
            raise _failure(exc, source) from exc

    def detach(self, path: str, holding: str) -> bool:
        check_path(path)
        check_path(holding)
        return False  # a rename is a copy and a delete: the caller deletes instead

    def _copy(self, source_key: str, dest_key: str, size: int, path: str) -> None:
        copy_source: CopySourceTypeDef = {"Bucket": self.bucket, "Key": source_key}
        try:
            if size <= MAX_COPY:
                self.copier.copy_object(Bucket=self.bucket, Key=dest_key, CopySource=copy_source)
                return
            upload_id = self.client.create_multipart_upload(Bucket=self.bucket, Key=dest_key)["UploadId"]
            try:
                parts: list[CompletedPartTypeDef] = []
                for number, start in enumerate(range(0, size, COPY_PART), start=1):
                    end = min(start + COPY_PART, size) - 1
                    result = self.copier.upload_part_copy(
                        Bucket=self.bucket, Key=dest_key, UploadId=upload_id, PartNumber=number,
                        CopySource=copy_source, CopySourceRange=f"bytes={start}-{end}")
                    parts.append({"PartNumber": number, "ETag": result["CopyPartResult"]["ETag"]})
                self.copier.complete_multipart_upload(Bucket=self.bucket, Key=dest_key, UploadId=upload_id,
                                                      MultipartUpload={"Parts": parts})
            except BaseException:
                self.client.abort_multipart_upload(Bucket=self.bucket, Key=dest_key, UploadId=upload_id)
                raise
        except (ClientError, BotoCoreError) as exc:
            raise _failure(exc, path) from exc

    def delete(self, path: str) -> None:
        """The object at ``path`` and every object below it (one listing), in batches of 1000."""
        key = self.key(path)
        keys: list[str] = []
        try:
            for page in self.client.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=key):
                keys += [o["Key"] for o in page.get("Contents", [])
                         if o["Key"] == key or o["Key"].startswith(key + "/")]
        except (ClientError, BotoCoreError) as exc:
            raise _failure(exc, path) from exc
        if not keys:
            raise PathNotFound(path)
        keys = [self._path(k) for k in keys]
        for start in range(0, len(keys), DELETE_BATCH):
            batch: list[ObjectIdentifierTypeDef] = [{"Key": self.key(k)} for k in keys[start:start + DELETE_BATCH]]
            try:
                result = self.client.delete_objects(Bucket=self.bucket, Delete={"Objects": batch, "Quiet": True})
            except (ClientError, BotoCoreError) as exc:
                raise _failure(exc, path) from exc
            if result.get("Errors"):
                first = result["Errors"][0]
                raise StorageError(f"S3 could not delete {first.get('Key')}: {first.get('Message')}")

    # -- uploads -------------------------------------------------------------------------------

    def writer(self, path: str, append: bool = False, state: Mapping[str, Any] | None = None) -> "S3Writer":
        return S3Writer(self, path, dict(state or {}) if append else {})

    def abort(self, path: str, state: Mapping[str, Any] | None) -> None:
        """Discard an unfinished upload: its multipart upload and its tail objects."""
        upload_id = (state or {}).get("upload_id")
        if upload_id:
            try:
                self.client.abort_multipart_upload(Bucket=self.bucket, Key=self.key(path), UploadId=upload_id)
            except ClientError as exc:
                if not _missing(exc):
                    raise _failure(exc, path) from exc
        try:
            self.delete(path + ".parts")
        except PathNotFound:
            pass

    def abort_stale_uploads(self, path: str, keep: set[str]) -> int:
        """Abort multipart uploads below ``path`` whose id is not in ``keep`` (sessions the database
        no longer knows: a crash between starting one and recording it). Paginated."""
        aborted = 0
        try:
            pages = self.client.get_paginator("list_multipart_uploads").paginate(
                Bucket=self.bucket, Prefix=self.key(path) + "/")
            for page in pages:
                for upload in page.get("Uploads", []):
                    if upload["UploadId"] not in keep:
                        self.client.abort_multipart_upload(Bucket=self.bucket, Key=upload["Key"],
                                                           UploadId=upload["UploadId"])
                        aborted += 1
        except (ClientError, BotoCoreError) as exc:
            raise _failure(exc, path) from exc
        return aborted

    # -- pulls and health ----------------------------------------------------------------------

    def url_for(self, path: str, expires_in: int = 1200) -> str:
        """A presigned GET URL for ``path``: the client fetches the bytes (with Range) from the store."""
        url: str = self.signer.generate_presigned_url(
            "get_object", Params={"Bucket": self.bucket, "Key": self.key(path)}, ExpiresIn=expires_in)
        return url

    def free_bytes(self) -> int | None:
        return None  # an object store has no free-space figure; quotas are the store's business

    def check(self, probe: str) -> None:
        """The bucket exists and this driver can write, read back and delete ``probe`` in it; if not,
        CheckFailed says what to change."""
        try:
            self.client.head_bucket(Bucket=self.bucket)
        except ClientError as exc:
            if _missing(exc):
                raise CheckFailed(f"bucket {self.bucket!r} does not exist", "bucket") from exc
            raise self._refused(exc, "refuses access") from exc
        except BotoCoreError as exc:
            raise _unreachable(exc) from exc
        key = self.key(probe)
        self._step("is not writable", lambda: self.client.put_object(Bucket=self.bucket, Key=key, Body=_PROBE))
        if self._step("is not readable", lambda: self.client.get_object(Bucket=self.bucket, Key=key)["Body"].read()
                      ) != _PROBE:
            raise CheckFailed(f"bucket {self.bucket!r} returned different bytes than written", "bucket")
        self._step("refuses deletes", lambda: self.client.delete_object(Bucket=self.bucket, Key=key))

    def _step(self, failing: str, call: Callable[[], Any]) -> Any:
        try:
            return call()
        except ClientError as exc:
            raise self._refused(exc, failing) from exc
        except BotoCoreError as exc:
            raise _unreachable(exc) from exc

    def _refused(self, exc: ClientError, failing: str) -> CheckFailed:
        code = str(exc.response.get("Error", {}).get("Code") or "")
        if code.isdigit():
            # An answer to HEAD has no body to say why (RGW and S3 send a bare 403 for a wrong secret
            # as for a bucket of someone else): a one-key listing is answered with the reason.
            try:
                self.client.list_objects_v2(Bucket=self.bucket, MaxKeys=1)
            except ClientError as listed:
                code = str(listed.response.get("Error", {}).get("Code") or code)
            except BotoCoreError:
                pass
        if code == "InvalidAccessKeyId":
            return CheckFailed(f"the store knows no such access key ({code})", "access_key")
        if code == "SignatureDoesNotMatch":
            return CheckFailed(f"the store refuses the signature ({code}): this is not the secret of the "
                               "access key", "secret_key")
        if code in _CREDENTIALS_EXPIRED:
            return CheckFailed(f"the store refuses the credentials ({code})", "access_key")
        if code == "NoSuchBucket":
            return CheckFailed(f"bucket {self.bucket!r} does not exist", "bucket")
        return CheckFailed(f"bucket {self.bucket!r} {failing} ({code})", "bucket")


def _unreachable(exc: BotoCoreError) -> CheckFailed:
    if isinstance(exc, NoCredentialsError):
        return CheckFailed("no credentials given, and none found by the AWS credential chain", "access_key")
    return CheckFailed(f"S3 endpoint not reachable: {exc}", "endpoint")


class _Reader(io.RawIOBase):
    """An object's bytes from a position, fetched with one ranged GET on the first read."""

    def __init__(self, driver: S3Driver, path: str) -> None:
        self._driver = driver
        self._path = path
        self._position = 0
        self._body: Any = None
        self._started = False
        self._size = driver.stat(path).size  # a missing object fails here, as opening a missing file does

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return not self._started

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        if self._started:
            raise io.UnsupportedOperation("an S3 reader seeks only before its first read")
        # From the end too: Django's FileResponse measures a seekable file so (the whole-blob GET
        # without redirect answered 500 while this reader seeked to absolute positions only).
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._position, io.SEEK_END: self._size}[whence]
        if base + offset < 0:
            raise ValueError(f"negative seek position {base + offset}")
        self._position = base + offset
        return self._position

    def tell(self) -> int:
        return self._position

    def read(self, size: int = -1) -> bytes:
        if not self._started:
            self._started = True
            self._body = self._driver._get(self._path, self._position)
        if self._body is None:
            return b""
        data: bytes = self._body.read(None if size is None or size < 0 else size)
        self._position += len(data)
        with self._driver.counters.lock:
            self._driver.counters.bytes_read += len(data)
        return data

    def readinto(self, buffer: Any) -> int:
        data = self.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)

    def close(self) -> None:
        if not self.closed and self._body is not None:
            self._body.close()
        super().close()


class S3Writer:
    """Appends to a multipart upload; ``state`` is what the caller must keep to resume it elsewhere.

    A writer is used by one request at a time (the caller holds the session's lease). ``commit``
    makes what was written durable and resumable; ``cancel`` forgets this writer's bytes (its parts
    are simply never listed when the upload completes); ``seal`` completes the upload, after which
    the object exists at ``path``.
    """

    def __init__(self, driver: S3Driver, path: str, state: dict[str, Any]) -> None:
        self._driver = driver
        self._path = path
        self._key = driver.key(path)
        self._upload_id: str | None = state.get("upload_id")
        self._parts: list[list[Any]] = [list(p) for p in state.get("parts", [])]
        self._tail = int(state.get("tail", 0))
        self._tails_written = int(state.get("tails", 0))
        self._buffer = bytearray()
        self._closed = False
        self._committed_state = self.state

    @property
    def size(self) -> int:
        return sum(int(p[2]) for p in self._parts) + self._tail + len(self._buffer)

    @property
    def state(self) -> dict[str, Any]:
        return {"upload_id": self._upload_id, "parts": [list(p) for p in self._parts], "tail": self._tail,
                "tails": self._tails_written}

    def _tail_key(self, number: int) -> str:
        return f"{self._key}.parts/tail-{number}"

    def write(self, data: bytes) -> int:
        if self._tail and not self._buffer:
            self._absorb_tail()
        self._buffer += data
        while len(self._buffer) >= self._driver.part_size:
            self._upload_part(bytes(self._buffer[: self._driver.part_size]))
            del self._buffer[: self._driver.part_size]
        return len(data)

    def _absorb_tail(self) -> None:
        # The only read-back of uploaded bytes: a previous request left less than a part.
        key = self._tail_key(self._tails_written)
        try:
            data = self._driver.client.get_object(Bucket=self._driver.bucket, Key=key)["Body"].read()
        except (ClientError, BotoCoreError) as exc:
            raise _failure(exc, self._path) from exc
        self._driver.counters.read(len(data))
        if len(data) != self._tail:
            raise StorageError(f"the tail of upload {self._path} is {len(data)} bytes, not {self._tail}")
        self._buffer[:0] = data
        self._tail = 0

    def _upload_part(self, data: bytes) -> None:
        client, bucket = self._driver.client, self._driver.bucket
        try:
            if self._upload_id is None:
                self._upload_id = client.create_multipart_upload(Bucket=bucket, Key=self._key)["UploadId"]
            number = len(self._parts) + 1
            result = client.upload_part(Bucket=bucket, Key=self._key, UploadId=self._upload_id,
                                        PartNumber=number, Body=data)
        except (ClientError, BotoCoreError) as exc:
            raise _failure(exc, self._path) from exc
        self._parts.append([number, result["ETag"], len(data)])

    def commit(self) -> None:
        """Make every byte written durable: a full part, or else a new tail object."""
        if len(self._buffer) >= MIN_PART:
            self._upload_part(bytes(self._buffer))
        elif self._buffer:
            number = self._tails_written + 1
            try:
                self._driver.client.put_object(Bucket=self._driver.bucket, Key=self._tail_key(number),
                                               Body=bytes(self._buffer))
            except (ClientError, BotoCoreError) as exc:
                raise _failure(exc, self._path) from exc
            self._tail, self._tails_written = len(self._buffer), number
        self._buffer.clear()
        self._committed_state = self.state
        self._closed = True

    def cancel(self) -> None:
        if not self._closed:
            self._buffer.clear()
            restored = self._committed_state
            self._parts, self._tail = restored["parts"], restored["tail"]
            self._upload_id, self._tails_written = restored["upload_id"], restored["tails"]
            self._closed = True

    def seal(self) -> None:
        """Complete the upload: the bytes become one object at ``path``. Sealing again what was
        sealed (a retry of a request whose commit in the database failed) finds it done."""
        expected = self.size
        try:
            self._seal()
        except PathNotFound:
            # The tail or the multipart upload is gone: sealed before, if the object is all there.
            if self._stored_size() != expected:
                raise
        self._buffer.clear()
        self._upload_id, self._tail = None, 0
        self._closed = True
        if self._tails_written:
            try:
                self._driver.delete(self._path + ".parts")
            except PathNotFound:
                pass

    def _seal(self) -> None:
        client, bucket = self._driver.copier, self._driver.bucket  # copies and completion: copy_timeout
        if self._tail and self._buffer:
            self._absorb_tail()
        try:
            if self._upload_id is None and self._tail:
                # Less than a part in all, stored as a tail: it becomes the object by a copy.
                client.copy_object(Bucket=bucket, Key=self._key,
                                   CopySource={"Bucket": bucket, "Key": self._tail_key(self._tails_written)})
            elif self._upload_id is None:
                self._driver.client.put_object(Bucket=bucket, Key=self._key, Body=bytes(self._buffer))
            else:
                if self._buffer:
                    self._upload_part(bytes(self._buffer))
                elif self._tail:
                    number = len(self._parts) + 1
                    result = client.upload_part_copy(
                        Bucket=bucket, Key=self._key, UploadId=self._upload_id, PartNumber=number,
                        CopySource={"Bucket": bucket, "Key": self._tail_key(self._tails_written)})
                    self._parts.append([number, result["CopyPartResult"]["ETag"], self._tail])
                parts: list[CompletedPartTypeDef] = [{"PartNumber": int(n), "ETag": etag}
                                                     for n, etag, _size in self._parts]
                client.complete_multipart_upload(Bucket=bucket, Key=self._key, UploadId=self._upload_id,
                                                 MultipartUpload={"Parts": parts})
        except (ClientError, BotoCoreError) as exc:
            raise _failure(exc, self._path) from exc

    def _stored_size(self) -> int | None:
        try:
            return self._driver.stat(self._path).size
        except PathNotFound:
            return None


__all__ = ["CheckFailed", "S3Driver", "S3Writer", "InvalidPath"]
